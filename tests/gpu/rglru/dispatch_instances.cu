// The one instantiation of the RG-LRU default dispatch that hawk_gpu_rglru's test files call (see
// dispatch_instances.hpp): every shipped configuration's kernels, for every dtype, compiled once for the suite.
#include "dispatch_instances.hpp"

#if !defined(HAWK_TEST_SHARED_DISPATCH)
#error "dispatch_instances.cu belongs to a suite built with HAWK_TEST_SHARED_DISPATCH"
#endif

namespace hawk {
namespace rglru {
template Status forward<void>(const ForwardArguments&, void*, std::size_t, cudaStream_t);
template Status decode<void>(const ForwardArguments&, void*, std::size_t, cudaStream_t);
template Status backward<void>(const BackwardArguments&, void*, std::size_t, cudaStream_t);
template std::size_t forward_workspace_size<void>(const ForwardArguments&);
template std::size_t backward_workspace_size<void>(const BackwardArguments&);
template Status forward_can_implement<void>(const ForwardArguments&);
template Status backward_can_implement<void>(const BackwardArguments&);
}  // namespace rglru
}  // namespace hawk
