// Compiled once per architecture of the CMake presets besides sm_90 (sm_80, sm_89, sm_100, sm_120; tests/CMakeLists.txt),
// to PTX: the whole default dispatch of both kernel families, so every shipped configuration and, where the
// architecture's shared memory asks for them (every one of these but sm_100), every compact configuration
// (include/hawk/rglru/compact_config.cuh) is instantiated and compiled for it. Never run; linking is not needed.
#include "hawk/hawk.cuh"

hawk::Status arch_dispatch_check_rglru(const hawk::rglru::ForwardArguments& forward_args,
                                       const hawk::rglru::BackwardArguments& backward_args, cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(hawk::rglru::forward(forward_args, nullptr, 0, stream));
  HAWK_RETURN_IF_ERROR(hawk::rglru::decode(forward_args, nullptr, 0, stream));
  return hawk::rglru::backward(backward_args, nullptr, 0, stream);
}

hawk::Status arch_dispatch_check_gate_residual(const hawk::gate_residual::ForwardArguments& forward_args,
                                               const hawk::gate_residual::BackwardArguments& backward_args,
                                               cudaStream_t stream) {
  HAWK_RETURN_IF_ERROR(hawk::gate_residual::forward(forward_args, nullptr, 0, stream));
  return hawk::gate_residual::backward(backward_args, nullptr, 0, stream);
}
