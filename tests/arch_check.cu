// Compiled for sm_80, sm_89, sm_100 and sm_120 in every build (tests/CMakeLists.txt), besides the configured architectures:
// every public header, and one configuration of each operator instantiated, so nothing in the library is
// sm_90-only by accident. Never run; linking is not needed.
#include "hawk/hawk.cuh"

namespace {

using RglruForward = hawk::rglru::DefaultFusedConfig<__nv_bfloat16, 128, hawk::rglru::ResetFlags>::type;
using RglruGateLogits = hawk::rglru::DefaultGateLogitsConfig<__half, hawk::rglru::NoReset>::type;
// The chunked forward's bulk loads compile everywhere (they trap below sm_90, where can_implement refuses them).
using RglruChunkedBulk = hawk::rglru::DefaultChunkedConfig<RglruForward>::type::WithBulkLoads;

}  // namespace

hawk::Status arch_check_rglru(const hawk::rglru::ForwardArguments& forward_args,
                              const hawk::rglru::BackwardArguments& backward_args, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(hawk::rglru::Forward<RglruForward>::run(forward_args, nullptr, 0, stream));
  HAWK_RETURN_IF_ERROR(hawk::rglru::Forward<RglruGateLogits>::run(forward_args, nullptr, 0, stream));
  HAWK_RETURN_IF_ERROR(hawk::rglru::DecodeStep<RglruForward>::run(forward_args, nullptr, 0, stream));
  HAWK_RETURN_IF_ERROR(hawk::rglru::ChunkedForward<hawk::rglru::DefaultChunkedConfig<RglruForward>::type>::run(
      forward_args, nullptr, 0, stream));
  HAWK_RETURN_IF_ERROR(hawk::rglru::ChunkedForward<hawk::rglru::DefaultChunkedConfig<RglruGateLogits>::type>::run(
      forward_args, nullptr, 0, stream));
  HAWK_RETURN_IF_ERROR(hawk::rglru::ChunkedForward<RglruChunkedBulk>::run(forward_args, nullptr, 0, stream));
  return hawk::rglru::Backward<hawk::rglru::BackwardConfig<RglruForward>>::run(backward_args, nullptr, 0, stream);
}

hawk::Status arch_check_gate_residual(const hawk::gate_residual::ForwardArguments& forward_args,
                                      const hawk::gate_residual::BackwardArguments& backward_args,
                                      cudaStream_t stream) {
  using Forward = hawk::gate_residual::Forward<__nv_bfloat16, float, std::int64_t>;
  using Backward = hawk::gate_residual::Backward<__nv_bfloat16, __nv_bfloat16, std::int32_t>;
  HAWK_RETURN_IF_ERROR(Forward::run(forward_args, nullptr, 0, stream));
  return Backward::run(backward_args, nullptr, 0, stream);
}
