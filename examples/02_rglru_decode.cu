// Prefill, then token-by-token decode from a state pool, as an inference engine does it, and the proof that
// the two agree bit for bit with running the whole sequence in one call (split invariance, SPEC §3).
//
// 4 sequences live in rows {6, 2, 0, 5} of a pool of 8 fp32 states. Prefill writes their states into the pool
// (state_index); each decode step reads and updates the pool in place (h0 == h_final) for one new token per
// sequence, with reset_mode kNone (the tokens continue the cached state). Exit: 0 bitwise equal, 1 not, 77 no GPU.
#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "hawk/rglru/rglru.cuh"

namespace {

using Element = __nv_bfloat16;

template <class T>
thrust::device_vector<T> random_device(std::size_t n, float bound, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-bound, bound);
  thrust::host_vector<T> host(n);
  for (auto& value : host) value = hawk::from_float<T>(dist(rng));
  return thrust::device_vector<T>(host);
}

template <class T>
T* raw(thrust::device_vector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}

bool check(const char* what, hawk::Status status) {
  if (!status.ok()) std::printf("%s failed: %s\n", what, status.to_string().c_str());
  return status.ok();
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  const std::int64_t N = 4, L = 48, prefill = 20, W = 512, H = 2, w = W / H, pool_rows = 8;
  const std::vector<std::int32_t> slots = {6, 2, 0, 5};
  std::mt19937 rng(7);
  auto Wx = random_device<Element>(H * w * w, 0.1f, rng), Wa = random_device<Element>(H * w * w, 0.1f, rng);
  auto bx = random_device<float>(H * w, 0.5f, rng), ba = random_device<float>(H * w, 0.5f, rng);
  auto a_param = random_device<float>(W, 1.0f, rng);
  auto x = random_device<Element>(N * L * W, 1.0f, rng);  // [N, L, W]
  thrust::device_vector<std::int32_t> state_index(slots.begin(), slots.end());
  // The device checks of state_index (range, padding -1, no row named twice) live in this workspace: its first
  // word holds the verdict of the last call (hawk::read_device_checks), and no call synchronises to get it.
  thrust::device_vector<unsigned char> workspace;
  // Sized before each call (the argument list of a call is evaluated in no fixed order, so not inside it).
  auto size_workspace = [&](const hawk::rglru::ForwardArguments& a) {
    workspace.resize(std::max<std::size_t>(1, hawk::rglru::forward_workspace_size(a)));
  };

  auto base = [&] {
    hawk::rglru::ForwardArguments a;
    a.shape.num_sequences = N;
    a.shape.width = W;
    a.shape.num_blocks = H;
    a.dtype = hawk::DType::kBFloat16;
    a.mode = hawk::rglru::GateMode::kFused;
    a.Wx = raw(Wx);
    a.Wa = raw(Wa);
    a.bx = raw(bx);
    a.ba = raw(ba);
    a.a_param = raw(a_param);
    return a;
  };

  // 1. The whole sequences in one call: the training-time view.
  thrust::device_vector<Element> y_once(N * L * W);
  thrust::device_vector<float> h_once(N * W);
  {
    auto a = base();
    a.shape.seq_len = L;
    a.shape.num_tokens = N * L;
    a.reset_mode = hawk::rglru::ResetMode::kSequenceStart;
    a.x = raw(x);
    a.y = raw(y_once);
    a.h_final = raw(h_once);
    size_workspace(a);
    if (!check("one-call forward", hawk::rglru::forward(a, raw(workspace), workspace.size(), nullptr))) return 1;
  }

  // 2. Prefill the first `prefill` tokens into the pool, then decode the rest one token at a time.
  thrust::device_vector<float> pool = random_device<float>(pool_rows * W, 1.0f, rng);  // stale rows elsewhere
  thrust::device_vector<Element> x_step(N * W), y_step(N * W), y_prefill(N * prefill * W);
  thrust::device_vector<Element> x_prefill(N * prefill * W);
  thrust::host_vector<Element> x_host(x), y_decoded(N * L * W);
  for (std::int64_t n = 0; n < N; ++n)  // gather [N, prefill, W] from [N, L, W]
    thrust::copy(x.begin() + n * L * W, x.begin() + (n * L + prefill) * W, x_prefill.begin() + n * prefill * W);
  {
    auto a = base();
    a.shape.seq_len = prefill;
    a.shape.num_tokens = N * prefill;
    a.shape.num_state_rows = pool_rows;
    a.reset_mode = hawk::rglru::ResetMode::kSequenceStart;
    a.x = raw(x_prefill);
    a.y = raw(y_prefill);
    a.h_final = raw(pool);
    a.state_index = raw(state_index);
    size_workspace(a);
    if (!check("prefill", hawk::rglru::forward(a, raw(workspace), workspace.size(), nullptr))) return 1;
    if (!check("prefill's device checks", hawk::read_device_checks(raw(workspace), nullptr))) return 1;
    thrust::host_vector<Element> y_host(y_prefill);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t i = 0; i < prefill * W; ++i) y_decoded[n * L * W + i] = y_host[n * prefill * W + i];
  }
  for (std::int64_t t = prefill; t < L; ++t) {
    for (std::int64_t n = 0; n < N; ++n)
      thrust::copy(x.begin() + (n * L + t) * W, x.begin() + (n * L + t + 1) * W, x_step.begin() + n * W);
    auto a = base();
    a.shape.seq_len = 1;
    a.shape.num_tokens = N;
    a.shape.num_state_rows = pool_rows;
    a.reset_mode = hawk::rglru::ResetMode::kNone;
    a.x = raw(x_step);
    a.y = raw(y_step);
    a.h0 = raw(pool);       // read the cached state ...
    a.h_final = raw(pool);  // ... and update it in place
    a.state_index = raw(state_index);
    size_workspace(a);
    if (!check("decode step", hawk::rglru::decode(a, raw(workspace), workspace.size(), nullptr))) return 1;
    thrust::host_vector<Element> y_host(y_step);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t c = 0; c < W; ++c) y_decoded[(n * L + t) * W + c] = y_host[n * W + c];
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  if (!check("last decode step's device checks", hawk::read_device_checks(raw(workspace), nullptr))) return 1;

  // 3. Bitwise comparison: every y, and every sequence's state in its pool row.
  thrust::host_vector<Element> y_once_host(y_once);
  thrust::host_vector<float> h_once_host(h_once), pool_host(pool);
  const bool y_equal = std::memcmp(y_once_host.data(), y_decoded.data(), y_decoded.size() * sizeof(Element)) == 0;
  bool states_equal = true;
  for (std::int64_t n = 0; n < N; ++n)
    states_equal = states_equal && std::memcmp(&h_once_host[n * W], &pool_host[slots[n] * W], W * sizeof(float)) == 0;
  std::printf("prefill %lld tokens + %lld decode steps vs one call of %lld tokens: y %s, final states %s\n",
              static_cast<long long>(prefill), static_cast<long long>(L - prefill), static_cast<long long>(L),
              y_equal ? "bitwise equal" : "DIFFER", states_equal ? "bitwise equal" : "DIFFER");
  return y_equal && states_equal ? 0 : 1;
}
