// Does the least-workspace backward's speed depend on where its workspace lies (issue 17)? bench_rglru's
// least-workspace rows (one long sequence in time slices of 1024 tokens) came in two modes about 10% apart, fixed for
// a process, whatever tree ran (bench/results/2026-12-06-h100-*-proposed-round/). One slice's fp32 row gradients at
// W = 2560 are 31.5 MB, written by the slice's scan and read right after by its two products: near the L2's size, so
// the physical placement of the workspace could decide whether the products find them in L2. This probe, at
// (1, 8192, 2560, 10) and (1, 65536, 2560, 10) (bf16, fused, canonical), runs the default backward with its least
// workspace (backward_min_workspace_size) at a sweep of byte offsets inside one large allocation, times each (CUDA
// events, the median of 20 after 3 warm-up calls), checks that every gradient keeps the one-pass backward's bytes
// (the outputs poisoned before each offset's first call, which must write them all), and times the one-pass backward
// at offset 0 before and after the sweep as the control. Two modes across offsets within one process point at
// placement; one mode per process points elsewhere (clocks, the host, the process's other buffers). Not a test of
// hawk's kernels.
//
//   build-gpu/bench/probes/least_workspace_placement_probe [OUT.txt]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "../rglru/bench_rglru_support.cuh"
#include "hawk/rglru/rglru.cuh"
#include "probe_support.cuh"

namespace {

using namespace rglru_bench;

//! The fused backward's outputs.
struct Gradients {
  thrust::device_vector<Element> dx;
  thrust::device_vector<float> dWx, dWa, dbx, dba, da_param, dh0;
  explicit Gradients(const Shape& s)
      : dx(static_cast<std::size_t>(s.B * s.L * s.W)),
        dWx(static_cast<std::size_t>(s.W * (s.W / s.H))),
        dWa(static_cast<std::size_t>(s.W * (s.W / s.H))),
        dbx(static_cast<std::size_t>(s.W)),
        dba(static_cast<std::size_t>(s.W)),
        da_param(static_cast<std::size_t>(s.W)),
        dh0(static_cast<std::size_t>(s.B * s.W)) {}
};

template <class T>
unsigned long long bytes_apart(const thrust::device_vector<T>& a, const thrust::device_vector<T>& b) {
  return differing_bytes(thrust::raw_pointer_cast(a.data()), thrust::raw_pointer_cast(b.data()), a.size() * sizeof(T));
}

//! Every output byte set to 0xFF (NaN in every dtype), so that an element the backward leaves unwritten differs.
void poison(Gradients& g) {
  auto fill = [](auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    PROBE_CUDA(cudaMemset(thrust::raw_pointer_cast(v.data()), 0xFF, v.size() * sizeof(T)));
  };
  fill(g.dx);
  fill(g.dWx);
  fill(g.dWa);
  fill(g.dbx);
  fill(g.dba);
  fill(g.da_param);
  fill(g.dh0);
}

unsigned long long bytes_apart(const Gradients& a, const Gradients& b) {
  return bytes_apart(a.dx, b.dx) + bytes_apart(a.dWx, b.dWx) + bytes_apart(a.dWa, b.dWa) + bytes_apart(a.dbx, b.dbx) +
         bytes_apart(a.dba, b.dba) + bytes_apart(a.da_param, b.da_param) + bytes_apart(a.dh0, b.dh0);
}

void check(const hawk::Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, st.to_string().c_str());
    std::exit(2);
  }
}

//! One shape: inputs, the forward's checkpoints, dy, and a sweep of the least workspace's offset.
void probe(const Shape& s, std::int64_t offsets, std::size_t step_bytes, FILE* out) {
  ForwardBuffers b = make_buffers(s, GateMode::kFused, s.B);
  thrust::device_vector<float> checkpoints(static_cast<std::size_t>(
      hawk::rglru::checkpoint_rows(s.B * s.L, s.B, hawk::rglru::kDefaultTimeChunk) * s.W));
  thrust::device_vector<Element> dy = random_buffer<Element>(s.B * s.L * s.W, -1.0f, 1.0f, 991);
  thrust::device_vector<float> dh_final = random_buffer<float>(s.B * s.W, -1.0f, 1.0f, 992);
  ForwardArguments f = arguments(s, GateMode::kFused, ResetMode::kSequenceStart, false, false, b, 0, s.B);
  f.checkpoints = raw(checkpoints);
  f.checkpoint_chunk = hawk::rglru::kDefaultTimeChunk;
  {
    thrust::device_vector<unsigned char> fw(std::max<std::size_t>(1, hawk::rglru::forward_workspace_size(f)));
    check(hawk::rglru::forward(f, raw(fw), fw.size(), nullptr), "forward");
  }
  Gradients reference(s), g(s);
  auto args_for = [&](Gradients& out_g) {
    hawk::rglru::BackwardArguments a = hawk::rglru::backward_arguments_for(f);
    a.dy = raw(dy);
    a.dh_final = raw(dh_final);
    a.dx = raw(out_g.dx);
    a.dWx = raw(out_g.dWx);
    a.dWa = raw(out_g.dWa);
    a.dbx = raw(out_g.dbx);
    a.dba = raw(out_g.dba);
    a.da_param = raw(out_g.da_param);
    a.dh0 = raw(out_g.dh0);
    return a;
  };
  const hawk::rglru::BackwardArguments ref_args = args_for(reference);
  const hawk::rglru::BackwardArguments args = args_for(g);
  const std::size_t one_pass = hawk::rglru::backward_workspace_size(ref_args);
  const std::size_t least = hawk::rglru::backward_min_workspace_size(ref_args);
  if (least >= one_pass) {
    std::fprintf(stderr, "the least workspace (%zu bytes) is not below the one pass's (%zu): no time slices\n", least,
                 one_pass);
    std::exit(2);
  }
  const std::size_t span = std::max(one_pass, least + static_cast<std::size_t>(offsets) * step_bytes);
  thrust::device_vector<unsigned char> workspace(span);
  unsigned char* base = raw(workspace);
  check(hawk::rglru::backward(ref_args, base, one_pass, nullptr), "one-pass backward");
  PROBE_CUDA(cudaDeviceSynchronize());

  char name[96];
  std::snprintf(name, sizeof(name), "(%lld, %lld, %lld, %lld)", static_cast<long long>(s.B),
                static_cast<long long>(s.L), static_cast<long long>(s.W), static_cast<long long>(s.H));
  auto one_pass_us = [&] { return median_us([&] { check(hawk::rglru::backward(args, base, one_pass, nullptr), "bw"); }); };
  const double control_before = one_pass_us();
  std::fprintf(out, "%s one pass (%.1f MB) at offset 0: %.1f us\n", name, one_pass / 1e6, control_before);
  std::vector<double> times;
  for (std::int64_t k = 0; k < offsets; ++k) {
    unsigned char* at = base + static_cast<std::size_t>(k) * step_bytes;
    poison(g);  // the timed calls before left the one-pass bytes in g: each offset's first call must write them all
    check(hawk::rglru::backward(args, at, least, nullptr), "least-workspace backward");
    PROBE_CUDA(cudaDeviceSynchronize());
    const unsigned long long apart = bytes_apart(g, reference);
    const double us = median_us([&] { check(hawk::rglru::backward(args, at, least, nullptr), "bw"); });
    times.push_back(us);
    std::fprintf(out, "%s least workspace (%.1f MB) at offset %6.1f MB: %8.1f us  %s\n", name, least / 1e6,
                 static_cast<double>(k) * step_bytes / 1e6, us, apart == 0 ? "same" : "DIFFER");
    if (apart != 0) std::exit(1);
  }
  const double control_after = one_pass_us();
  std::fprintf(out, "%s one pass at offset 0 again: %.1f us; least workspace over %lld offsets: min %.1f, median %.1f, "
               "max %.1f us\n",
               name, control_after, static_cast<long long>(offsets), quantile(times, 0.0), quantile(times, 0.5),
               quantile(times, 1.0));
  std::fflush(out);
}

}  // namespace

int main(int argc, char** argv) {
  FILE* out = argc > 1 ? std::fopen(argv[1], "w") : stdout;
  if (out == nullptr) {
    std::fprintf(stderr, "cannot open %s\n", argv[1]);
    return 2;
  }
  cudaDeviceProp prop{};
  PROBE_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(out, "%s, L2 %.1f MB\n", prop.name, prop.l2CacheSize / 1e6);
  probe(Shape{1, 8192, 2560, 10, 0}, 32, std::size_t{2} << 20, out);  // offsets 0, 2, ..., 62 MiB
  probe(Shape{1, 65536, 2560, 10, 0}, 12, std::size_t{6} << 20, out);  // offsets 0, 6, ..., 66 MiB
  if (out != stdout) std::fclose(out);
  return 0;
}
