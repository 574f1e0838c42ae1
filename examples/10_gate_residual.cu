// hawk gate-residual in a few lines: out = residual + gate[idx] * y, then dy and dgate, with the default
// dispatch, checked against the float64 reference. Copy this into your project and replace the inputs.
//
// The shapes are a small diffusion-transformer step: N = 1024 tokens of width D = 1152, gate rows per
// (sample, modality): G = 12, idx arbitrary (so the backward sorts rows by gate row, deterministically).
#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "hawk/gate_residual/gate_residual.cuh"
#include "hawk/reference/gate_residual.hpp"

namespace gr = hawk::gate_residual;

#define CHECK_STATUS(expr)                                                          \
  do {                                                                              \
    const hawk::Status status_ = (expr);                                            \
    if (!status_.ok()) {                                                            \
      std::fprintf(stderr, "%s failed: %s\n", #expr, status_.to_string().c_str());  \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

// Host values rounded to bf16 (what the device holds), kept as double for the reference.
static std::vector<double> random_bf16(std::size_t n, double lo, double hi, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = __bfloat162float(__float2bfloat16_rn(static_cast<float>(dist(rng))));
  return v;
}

static thrust::device_vector<__nv_bfloat16> to_device(const std::vector<double>& v) {
  thrust::host_vector<__nv_bfloat16> h(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) h[i] = __float2bfloat16_rn(static_cast<float>(v[i]));
  return thrust::device_vector<__nv_bfloat16>(h);
}

static double max_relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  const std::int64_t N = 1024, D = 1152, G = 12;
  std::mt19937 rng(2024);
  const auto residual = random_bf16(N * D, -2, 2, rng), y = random_bf16(N * D, -2, 2, rng),
             dout = random_bf16(N * D, -2, 2, rng), gate = random_bf16(G * D, -1.5, 1.5, rng);
  std::vector<std::int64_t> idx(N);
  std::uniform_int_distribution<std::int64_t> pick(0, G - 1);
  for (auto& i : idx) i = pick(rng);

  auto d_residual = to_device(residual), d_y = to_device(y), d_dout = to_device(dout), d_gate = to_device(gate);
  thrust::device_vector<std::int64_t> d_idx(idx.begin(), idx.end());
  thrust::device_vector<__nv_bfloat16> d_out(N * D), d_dy(N * D);
  thrust::device_vector<float> d_dgate(G * D);  // fp32 gradient of the bf16 gate

  // 1. Describe the problem: shapes, runtime dtypes, device pointers.
  gr::ProblemShape shape;
  shape.num_rows = N;
  shape.dim = D;
  shape.num_gate_rows = G;
  shape.dtype = hawk::DType::kBFloat16;
  shape.gate_dtype = hawk::DType::kBFloat16;
  shape.index_type = hawk::IndexType::kInt64;

  gr::ForwardArguments fwd;
  fwd.shape = shape;
  fwd.residual = thrust::raw_pointer_cast(d_residual.data());
  fwd.y = thrust::raw_pointer_cast(d_y.data());
  fwd.gate = thrust::raw_pointer_cast(d_gate.data());
  fwd.idx = thrust::raw_pointer_cast(d_idx.data());
  fwd.out = thrust::raw_pointer_cast(d_out.data());

  gr::BackwardArguments bwd;
  bwd.shape = shape;
  bwd.layout = gr::IndexLayout::kArbitrary;  // kUniform / kContiguousSegments are faster when they hold
  bwd.dout = thrust::raw_pointer_cast(d_dout.data());
  bwd.y = fwd.y;
  bwd.gate = fwd.gate;
  bwd.idx = fwd.idx;
  bwd.dy = thrust::raw_pointer_cast(d_dy.data());
  bwd.dgate = thrust::raw_pointer_cast(d_dgate.data());
  // dres is dout itself: no buffer needed.

  // 2. Ask for the workspace (hawk never allocates), then run. Both calls check idx on the device first.
  const std::size_t bytes = std::max(gr::forward_workspace_size(fwd), gr::backward_workspace_size(bwd));
  thrust::device_vector<unsigned char> workspace(bytes);
  void* ws = thrust::raw_pointer_cast(workspace.data());
  CHECK_STATUS(gr::forward(fwd, ws, bytes, /*stream=*/0));
  CHECK_STATUS(gr::backward(bwd, ws, bytes, /*stream=*/0));
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;

  // 3. Check against the float64 reference.
  const auto out_ref = hawk::reference::gate_residual_forward(residual, y, gate, idx, N, D, G);
  const auto grads = hawk::reference::gate_residual_backward(dout, y, gate, idx, N, D, G);
  thrust::host_vector<__nv_bfloat16> h_out(d_out), h_dy(d_dy);
  thrust::host_vector<float> h_dgate(d_dgate);
  std::vector<double> out(N * D), dy(N * D), dgate(G * D);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = __bfloat162float(h_out[i]);
    dy[i] = __bfloat162float(h_dy[i]);
  }
  for (std::size_t i = 0; i < dgate.size(); ++i) dgate[i] = h_dgate[i];
  const double e_out = max_relative_error(out, out_ref), e_dy = max_relative_error(dy, grads.dy),
               e_dgate = max_relative_error(dgate, grads.dgate);
  std::printf("relative L2 error vs float64: out %.2e, dy %.2e, dgate %.2e\n", e_out, e_dy, e_dgate);

  // 4. Bad input is a Status, not a crash: an index outside [0, G) is caught on the device and nothing is
  //    written. run() does not wait for that check (it works inside CUDA graphs); the verdict stays in the
  //    workspace until it is reused, and read_device_checks() fetches it (set shape.wait_for_device_checks to
  //    have forward() return it instead).
  d_idx[5] = G;
  CHECK_STATUS(gr::forward(fwd, ws, bytes, 0));
  const hawk::Status bad = hawk::read_device_checks(ws, 0);
  std::printf("idx out of range -> %s\n", bad.to_string().c_str());

  const bool ok = e_out < 5e-3 && e_dy < 5e-3 && e_dgate < 1e-5 && bad.code() == hawk::StatusCode::kIndexOutOfRange;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
