// The one instantiation of the RG-LRU default dispatch that hawk_gpu_rglru's test files call (see
// dispatch_instances.hpp): every shipped configuration's kernels, for every dtype, compiled once for the suite.
#include "dispatch_instances.hpp"

#if !defined(HAWK_TEST_SHARED_DISPATCH)
#error "dispatch_instances.cu belongs to a suite built with HAWK_TEST_SHARED_DISPATCH"
#endif

HAWK_TEST_RGLRU_DISPATCH_ENTRY_POINTS(template)
