// A configuration the library does not ship, written by the user: block width w = 96 (W = 384, H = 4), a
// width tile of 32 channels, time chunks of 32 tokens, 128 threads, per-token reset flags, fused projections.
// It runs through the explicit operator Forward<Config> (can_implement / workspace_size / run) and is checked
// against the float64 reference. A configuration that cannot work does not compile: e.g. WidthTile = 64 here
// fails with "ForwardConfig: WidthTile must divide BlockWidth, ...". Exit: 0 match, 1 mismatch, 77 no GPU.
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

using Element = __half;
using MyConfig = hawk::rglru::ForwardConfig<Element, /*BlockWidth=*/96, /*WidthTile=*/32, /*TimeChunk=*/32,
                                            /*ProducerThreads=*/128, hawk::rglru::ResetFlags,
                                            hawk::rglru::GateMode::kFused>;
using MyForward = hawk::rglru::Forward<MyConfig>;

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
  const std::int64_t W = 384, H = 4, w = W / H;
  const std::vector<std::int64_t> lengths = {100, 7, 250};  // a packed batch
  std::mt19937 rng(11);

  hawk::reference::RglruParams params;
  params.width = W;
  params.num_blocks = H;
  params.Wx = random_values<Element>(H * w * w, 2.0 / std::sqrt(double(w)), rng);
  params.Wa = random_values<Element>(H * w * w, 2.0 / std::sqrt(double(w)), rng);
  params.bx = random_values<float>(H * w, 0.5, rng);
  params.ba = random_values<float>(H * w, 0.5, rng);
  params.a_param = random_values<float>(W, 1.0, rng);
  hawk::reference::RglruInputs inputs;
  inputs.cu_seqlens = {0};
  for (auto len : lengths) inputs.cu_seqlens.push_back(inputs.cu_seqlens.back() + len);
  const std::int64_t T = inputs.cu_seqlens.back(), N = static_cast<std::int64_t>(lengths.size());
  inputs.x = random_values<Element>(T * W, 1.0, rng);
  inputs.h0 = random_values<float>(N * W, 1.0, rng);
  inputs.reset.assign(T, 0);
  for (std::int64_t t = 0; t < T; t += 37) inputs.reset[t] = 1;  // documents starting mid-sequence

  auto x = upload<Element>(inputs.x);
  auto Wx = upload<Element>(params.Wx), Wa = upload<Element>(params.Wa);
  auto bx = upload<float>(params.bx), ba = upload<float>(params.ba), a_param = upload<float>(params.a_param);
  auto h0 = upload<float>(inputs.h0);
  thrust::device_vector<std::uint8_t> reset(inputs.reset.begin(), inputs.reset.end());
  std::vector<std::int32_t> cu(inputs.cu_seqlens.begin(), inputs.cu_seqlens.end());
  thrust::device_vector<std::int32_t> cu_seqlens(cu.begin(), cu.end());
  thrust::device_vector<Element> y(T * W);
  thrust::device_vector<float> h_final(N * W);

  hawk::rglru::ForwardArguments args;
  args.shape.num_sequences = N;
  args.shape.num_tokens = T;
  args.shape.width = W;
  args.shape.num_blocks = H;
  args.shape.cu_seqlens = thrust::raw_pointer_cast(cu_seqlens.data());
  args.dtype = hawk::DType::kFloat16;
  args.mode = hawk::rglru::GateMode::kFused;
  args.reset_mode = hawk::rglru::ResetMode::kFlags;
  args.x = thrust::raw_pointer_cast(x.data());
  args.Wx = thrust::raw_pointer_cast(Wx.data());
  args.Wa = thrust::raw_pointer_cast(Wa.data());
  args.bx = thrust::raw_pointer_cast(bx.data());
  args.ba = thrust::raw_pointer_cast(ba.data());
  args.a_param = thrust::raw_pointer_cast(a_param.data());
  args.reset = thrust::raw_pointer_cast(reset.data());
  args.h0 = thrust::raw_pointer_cast(h0.data());
  args.h_final = thrust::raw_pointer_cast(h_final.data());
  args.y = thrust::raw_pointer_cast(y.data());

  const hawk::Status can = MyForward::can_implement(args);
  if (!can.ok()) {
    std::printf("can_implement: %s\n", can.to_string().c_str());
    return 1;
  }
  // Packed batches validate cu_seqlens on the device: that needs a small workspace.
  thrust::device_vector<unsigned char> workspace(MyForward::workspace_size(args));
  const hawk::Status status = MyForward::run(args, thrust::raw_pointer_cast(workspace.data()), workspace.size(), nullptr);
  if (!status.ok() || cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("run: %s\n", status.to_string().c_str());
    return 1;
  }

  const auto want = hawk::reference::rglru_forward(params, inputs);
  thrust::host_vector<Element> got(y);
  thrust::host_vector<float> h_got(h_final);
  double diff2 = 0, ref2 = 0, hdiff2 = 0, href2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = hawk::to_float(got[i]) - want.y[i];
    diff2 += d * d;
    ref2 += want.y[i] * want.y[i];
  }
  for (std::size_t i = 0; i < h_got.size(); ++i) {
    const double d = h_got[i] - want.h_final[i];
    hdiff2 += d * d;
    href2 += want.h_final[i] * want.h_final[i];
  }
  const double rel = std::sqrt(diff2 / ref2), hrel = std::sqrt(hdiff2 / href2);
  std::printf("custom ForwardConfig<fp16, w=%d, WidthTile=%d, TimeChunk=%d, ProducerThreads=%d, %s>: %zu bytes of shared "
              "memory; y rel L2 = %.2e, h_final rel L2 = %.2e\n",
              MyConfig::kBlockWidth, MyConfig::kWidthTile, MyConfig::kTimeChunk, MyConfig::kProducerThreads,
              MyConfig::ResetPolicy::kName, MyConfig::kSharedBytes, rel, hrel);
  return rel <= 1e-3 && hrel <= 1e-4 ? 0 : 1;
}
