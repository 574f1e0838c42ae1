// A driver for Nsight Compute, built with the probes (-DHAWK_BUILD_PROBES=ON): one forward and a few calls of the
// default RG-LRU backward (hawk::rglru::backward with the workspace it asks for, or with its least: the kernels a
// caller gets) at one shape, so that `ncu` can profile a single launch of each backward kernel
// (bench/profile-backward-scan-on-gpu.sh and bench/trace-backward-kernels-on-gpu.sh run it). Unlike the scan probe
// (bench/probes/backward_scan_probe.cu), whose kernels carry its timeline hook (registers of their own), this runs
// the library's kernels as built for every caller. Not a benchmark: it times nothing.
//
//   profile_rglru_backward SHAPE MODE [CALLS]
//     SHAPE: seed | long | batch | longest   ((4, 2048, 2048, 16), (1, 8192, 2560, 10), (16, 1024, 1024, 16),
//            (1, 65536, 2560, 10)), bf16, a reset at each sequence start, no h0, no dh_final
//     MODE:  fused | logits | fused_least (fused with backward_min_workspace_size: the time slices, where the shape
//            takes them; the least-workspace rows of bench_rglru)
//     CALLS: backward calls after the forward (default 3: ncu's --launch-skip picks one after the first)

#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../rglru/bench_rglru_support.cuh"
#include "hawk/rglru/rglru.cuh"

using namespace rglru_bench;

int main(int argc, char** argv) {
  Shape s{};
  const bool least_workspace = argc > 2 && std::strcmp(argv[2], "fused_least") == 0;
  const bool fused = least_workspace || (argc > 2 && std::strcmp(argv[2], "fused") == 0);
  if (argc < 3 || !shape_named(argv[1], s) || (!fused && std::strcmp(argv[2], "logits") != 0)) {
    std::fprintf(stderr, "usage: %s seed|long|batch|longest fused|logits|fused_least [CALLS]\n", argv[0]);
    return 2;
  }
  const int calls = argc > 3 ? std::atoi(argv[3]) : 3;
  const GateMode mode = fused ? GateMode::kFused : GateMode::kGateLogits;
  const std::int64_t T = s.B * s.L, w = s.W / s.H;
  ForwardBuffers b = make_buffers(s, mode, s.B);
  thrust::device_vector<float> checkpoints(
      static_cast<std::size_t>(hawk::rglru::checkpoint_rows(T, s.B, hawk::rglru::kDefaultTimeChunk) * s.W));
  thrust::device_vector<Element> dy = random_buffer<Element>(T * s.W, -1.0f, 1.0f, 1000);
  thrust::device_vector<Element> dx(static_cast<std::size_t>(T * s.W));
  thrust::device_vector<Element> dgx(fused ? 1 : static_cast<std::size_t>(T * s.W));
  thrust::device_vector<Element> dga(fused ? 1 : static_cast<std::size_t>(T * s.W));
  thrust::device_vector<float> dWx(static_cast<std::size_t>(s.H * w * w)), dWa(static_cast<std::size_t>(s.H * w * w));
  thrust::device_vector<float> dbx(static_cast<std::size_t>(s.W)), dba(static_cast<std::size_t>(s.W));
  thrust::device_vector<float> da_param(static_cast<std::size_t>(s.W));

  ForwardArguments f = arguments(s, mode, ResetMode::kSequenceStart, /*with_h0=*/false, /*decode=*/false, b, 0, s.B);
  f.checkpoints = raw(checkpoints);
  f.checkpoint_chunk = hawk::rglru::kDefaultTimeChunk;
  thrust::device_vector<unsigned char> forward_workspace(
      std::max<std::size_t>(1, hawk::rglru::forward_workspace_size(f)));
  hawk::Status status = hawk::rglru::forward(f, raw(forward_workspace), forward_workspace.size(), nullptr);
  if (!status.ok()) {
    std::fprintf(stderr, "forward failed: %s\n", status.to_string().c_str());
    return 1;
  }
  hawk::rglru::BackwardArguments a = hawk::rglru::backward_arguments_for(f);
  a.dy = raw(dy);
  a.dx = raw(dx);
  if (fused) {
    a.dWx = raw(dWx);
    a.dbx = raw(dbx);
    a.dWa = raw(dWa);
    a.dba = raw(dba);
  } else {
    a.dgx = raw(dgx);
    a.dga = raw(dga);
  }
  a.da_param = raw(da_param);
  const std::size_t workspace_bytes =
      least_workspace ? hawk::rglru::backward_min_workspace_size(a) : hawk::rglru::backward_workspace_size(a);
  thrust::device_vector<unsigned char> workspace(std::max<std::size_t>(1, workspace_bytes));
  for (int call = 0; call < calls; ++call) {
    status = hawk::rglru::backward(a, raw(workspace), workspace.size(), nullptr);
    if (!status.ok()) {
      std::fprintf(stderr, "backward failed: %s\n", status.to_string().c_str());
      return 1;
    }
  }
  BENCH_CUDA(cudaDeviceSynchronize());
  // The last word names the elements a launch covers (bench/profile-backward-scan-on-gpu.sh reads it).
  std::printf("%s %s: one forward, %d backward calls, %lld elements\n", argv[1], argv[2], calls,
              static_cast<long long>(T * s.W));
  return 0;
}
