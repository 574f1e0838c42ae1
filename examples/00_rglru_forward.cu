// RG-LRU forward through the default dispatch: a bf16 batch of 2 sequences (L = 300, W = 512, H = 4), fused
// gate projections, a reset at each sequence start (training's segment_pos == 0), checked against the float64
// reference. Exit codes: 0 match, 1 mismatch or error, 77 no GPU.
#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "hawk/reference/rglru.hpp"
#include "hawk/rglru/rglru.cuh"

namespace {

using Element = __nv_bfloat16;

// Random values rounded to T, kept as the doubles the device will see.
template <class T>
std::vector<double> random_values(std::size_t n, double bound, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-bound, bound);
  std::vector<double> v(n);
  for (auto& value : v) value = hawk::to_float(hawk::from_float<T>(static_cast<float>(dist(rng))));
  return v;
}

template <class T>
thrust::device_vector<T> upload(const std::vector<double>& v) {
  thrust::host_vector<T> host(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) host[i] = hawk::from_float<T>(static_cast<float>(v[i]));
  return thrust::device_vector<T>(host);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  const std::int64_t B = 2, L = 300, W = 512, H = 4, w = W / H;
  std::mt19937 rng(2024);

  // Parameters and inputs (RecurrentGemma layout: Wx, Wa [H, w, w] indexed [k, in, out]).
  hawk::reference::RglruParams params;
  params.width = W;
  params.num_blocks = H;
  params.Wx = random_values<Element>(H * w * w, 2.0 / std::sqrt(double(w)), rng);
  params.Wa = random_values<Element>(H * w * w, 2.0 / std::sqrt(double(w)), rng);
  params.bx = random_values<float>(H * w, 0.5, rng);
  params.ba = random_values<float>(H * w, 0.5, rng);
  params.a_param = random_values<float>(W, 1.0, rng);
  hawk::reference::RglruInputs inputs;
  inputs.cu_seqlens = hawk::reference::dense_cu_seqlens(B, L);
  inputs.x = random_values<Element>(B * L * W, 1.0, rng);
  inputs.reset = hawk::reference::reset_at_sequence_starts(inputs.cu_seqlens);

  auto x = upload<Element>(inputs.x);
  auto Wx = upload<Element>(params.Wx), Wa = upload<Element>(params.Wa);
  auto bx = upload<float>(params.bx), ba = upload<float>(params.ba), a_param = upload<float>(params.a_param);
  thrust::device_vector<Element> y(B * L * W);
  thrust::device_vector<float> h_final(B * W);

  hawk::rglru::ForwardArguments args;
  args.shape.num_sequences = B;
  args.shape.seq_len = L;
  args.shape.num_tokens = B * L;
  args.shape.width = W;
  args.shape.num_blocks = H;
  args.dtype = hawk::DType::kBFloat16;
  args.mode = hawk::rglru::GateMode::kFused;
  args.reset_mode = hawk::rglru::ResetMode::kSequenceStart;
  args.x = thrust::raw_pointer_cast(x.data());
  args.Wx = thrust::raw_pointer_cast(Wx.data());
  args.Wa = thrust::raw_pointer_cast(Wa.data());
  args.bx = thrust::raw_pointer_cast(bx.data());
  args.ba = thrust::raw_pointer_cast(ba.data());
  args.a_param = thrust::raw_pointer_cast(a_param.data());
  args.y = thrust::raw_pointer_cast(y.data());
  args.h_final = thrust::raw_pointer_cast(h_final.data());

  // Workspace: none for a dense batch without a state pool, but ask rather than assume.
  thrust::device_vector<unsigned char> workspace(hawk::rglru::forward_workspace_size(args));
  const hawk::Status status =
      hawk::rglru::forward(args, thrust::raw_pointer_cast(workspace.data()), workspace.size(), /*stream=*/nullptr);
  if (!status.ok()) {
    std::printf("forward failed: %s\n", status.to_string().c_str());
    return 1;
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;

  const auto want = hawk::reference::rglru_forward(params, inputs);
  thrust::host_vector<Element> got(y);
  double diff2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = hawk::to_float(got[i]) - want.y[i];
    diff2 += d * d;
    ref2 += want.y[i] * want.y[i];
  }
  const double rel = std::sqrt(diff2 / ref2);
  std::printf("rglru forward (bf16, fused, B=%lld L=%lld W=%lld H=%lld): y rel L2 error vs float64 = %.2e\n",
              static_cast<long long>(B), static_cast<long long>(L), static_cast<long long>(W),
              static_cast<long long>(H), rel);
  return rel <= 5e-3 ? 0 : 1;
}
