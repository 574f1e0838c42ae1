// A driver for Nsight Compute: a few calls of one RG-LRU forward at one shape, so that `ncu` can profile a
// single launch of each kernel (bench/profile-forward-on-gpu.sh runs it). Not a benchmark: it times nothing.
//
//   profile_rglru_forward SHAPE KERNEL [CALLS]
//     SHAPE:  seed | long | batch | longest   ((4, 2048, 2048, 16), (1, 8192, 2560, 10), (16, 1024, 1024, 16),
//             (1, 65536, 2560, 10)), bf16, fused, a reset at each sequence start, no h0
//     KERNEL: sequential (hawk::rglru::forward, no workspace)
//             | chunked (ChunkedForward<DefaultChunkedConfig<...>::type>)
//             | default (hawk::rglru::forward with forward_workspace_size: the kernel a caller gets)
//     CALLS:  launches of the forward (default 3: ncu's --launch-skip picks one after the first)

#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench_rglru_support.cuh"
#include "hawk/rglru/rglru.cuh"

namespace {

using namespace rglru_bench;

//! The chunked operator for the default configuration that `args` visits.
hawk::Status run_chunked(const hawk::rglru::ForwardArguments& args, thrust::device_vector<unsigned char>& workspace) {
  return hawk::rglru::detail::visit_default_config(args, [&](auto config) -> hawk::Status {
    using Chunked = hawk::rglru::ChunkedForward<typename hawk::rglru::DefaultChunkedConfig<decltype(config)>::type>;
    const std::size_t bytes = Chunked::workspace_size(args);
    if (workspace.size() < bytes) workspace.resize(bytes);
    return Chunked::run(args, thrust::raw_pointer_cast(workspace.data()), bytes, nullptr);
  });
}

}  // namespace

int main(int argc, char** argv) {
  Shape s{};
  if (argc < 3 || !shape_named(argv[1], s) ||
      (std::strcmp(argv[2], "sequential") != 0 && std::strcmp(argv[2], "chunked") != 0 &&
       std::strcmp(argv[2], "default") != 0)) {
    std::fprintf(stderr, "usage: %s seed|long|batch|longest sequential|chunked|default [CALLS]\n", argv[0]);
    return 2;
  }
  const int calls = argc > 3 ? std::atoi(argv[3]) : 3;
  const bool chunked = std::strcmp(argv[2], "chunked") == 0;
  // default: forward() with the workspace it asks for, so that it picks its kernel as a caller's call would (the
  // Hopper chunked forward where it pays, in sm_90a builds).
  const bool by_default = std::strcmp(argv[2], "default") == 0;
  ForwardBuffers b = make_buffers(s, GateMode::kFused, s.B);
  thrust::device_vector<unsigned char> workspace(1);
  for (int call = 0; call < calls; ++call) {
    const hawk::rglru::ForwardArguments args =
        arguments(s, GateMode::kFused, ResetMode::kSequenceStart, /*with_h0=*/false, /*decode=*/false, b,
                  call % b.sets, s.B);
    if (by_default && workspace.size() < hawk::rglru::forward_workspace_size(args))
      workspace.resize(hawk::rglru::forward_workspace_size(args));
    const hawk::Status status =
        chunked      ? run_chunked(args, workspace)
        : by_default ? hawk::rglru::forward(args, thrust::raw_pointer_cast(workspace.data()), workspace.size(), nullptr)
                     : hawk::rglru::forward(args, nullptr, 0, nullptr);
    if (!status.ok()) {
      std::fprintf(stderr, "forward failed: %s\n", status.to_string().c_str());
      return 1;
    }
  }
  BENCH_CUDA(cudaDeviceSynchronize());
  std::printf("%s %s: %d calls\n", argv[1], argv[2], calls);
  return 0;
}
