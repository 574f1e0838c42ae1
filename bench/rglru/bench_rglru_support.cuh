#pragma once
// Shared by the RG-LRU benchmarks (bench_rglru.cu, sweep_rglru_forward_configs.cu): random inputs on the device,
// CUDA-event timing with AB/BA rounds, the seed-000 JSON pieces, and the rotated buffers of one problem.

#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "hawk/rglru/rglru.cuh"

namespace rglru_bench {

using Element = __nv_bfloat16;
using hawk::rglru::ForwardArguments;
using hawk::rglru::GateMode;
using hawk::rglru::ResetMode;

#define BENCH_CUDA(call)                                                                        \
  do {                                                                                          \
    const cudaError_t e = (call);                                                               \
    if (e != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e));                    \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

// ---- inputs ----------------------------------------------------------------------------------------------------

//! Uniform values in [lo, hi) from a hash of the index: fast, reproducible, never all zeros.
template <class T>
__global__ void fill_random_kernel(T* out, std::int64_t n, std::uint64_t seed, float lo, float hi) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
    out[i] = hawk::from_float<T>(lo + (hi - lo) * u);
  }
}

template <class T>
thrust::device_vector<T> random_buffer(std::int64_t n, float lo, float hi, std::uint64_t seed) {
  thrust::device_vector<T> v(static_cast<std::size_t>(n));
  fill_random_kernel<T><<<1024, 256>>>(thrust::raw_pointer_cast(v.data()), n, seed, lo, hi);
  BENCH_CUDA(cudaGetLastError());
  return v;
}

template <class T>
T* raw(thrust::device_vector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}

// ---- statistics and JSON ---------------------------------------------------------------------------------------

struct Samples {
  std::vector<double> all;                  // ms, in the order taken
  std::vector<std::vector<double>> rounds;  // per round
  std::vector<int> order_index;             // per round: 0 = measured first (A), 1 = baseline first (B)

  double median() const {
    std::vector<double> s = all;
    std::sort(s.begin(), s.end());
    const std::size_t n = s.size();
    return n == 0 ? 0 : (n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]));
  }
  double min() const { return all.empty() ? 0 : *std::min_element(all.begin(), all.end()); }
  double max() const { return all.empty() ? 0 : *std::max_element(all.begin(), all.end()); }
  double mean() const { return all.empty() ? 0 : std::accumulate(all.begin(), all.end(), 0.0) / all.size(); }
};

inline std::string number(double v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.9g", v);
  return text;
}

inline std::string list(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + number(v[i]);
  return s + "]";
}

inline std::string samples_json(const Samples& s) {
  return "{\"samples_ms\": " + list(s.all) + ", \"median_ms\": " + number(s.median()) + ", \"minimum_ms\": " +
         number(s.min()) + ", \"maximum_ms\": " + number(s.max()) + ", \"mean_ms\": " + number(s.mean()) + "}";
}

inline std::string rounds_json(const Samples& s, const char* key) {
  std::string out = "[";
  for (std::size_t r = 0; r < s.rounds.size(); ++r)
    out += std::string(r ? ", " : "") + "{\"round\": " + std::to_string(r) + ", \"order_index\": " +
           std::to_string(s.order_index[r]) + ", \"" + key + "\": " + list(s.rounds[r]) + "}";
  return out + "]";
}

// ---- timing ----------------------------------------------------------------------------------------------------

constexpr int kRounds = 2;
constexpr int kSamplesPerRound = 10;
constexpr int kWarmup = 5;

//! One sample: the mean time in ms of `reps` calls of `op(rep)` timed with CUDA events.
inline double time_once(const std::function<void(int)>& op, int reps) {
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  BENCH_CUDA(cudaEventRecord(start));
  for (int r = 0; r < reps; ++r) op(r);
  BENCH_CUDA(cudaEventRecord(stop));
  BENCH_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
  BENCH_CUDA(cudaEventDestroy(start));
  BENCH_CUDA(cudaEventDestroy(stop));
  return ms / reps;
}

//! AB/BA: in round 0 `a` is sampled before `b` each time, in round 1 after. Returns both sample sets.
inline std::pair<Samples, Samples> time_ab(const std::function<void(int)>& a, const std::function<void(int)>& b, int reps) {
  for (int w = 0; w < kWarmup; ++w) {
    a(w);
    b(w);
  }
  BENCH_CUDA(cudaDeviceSynchronize());
  Samples sa, sb;
  for (int round = 0; round < kRounds; ++round) {
    sa.rounds.emplace_back();
    sb.rounds.emplace_back();
    sa.order_index.push_back(round % 2);
    sb.order_index.push_back(1 - round % 2);
    for (int i = 0; i < kSamplesPerRound; ++i) {
      double ta, tb;
      if (round % 2 == 0) {
        ta = time_once(a, reps);
        tb = time_once(b, reps);
      } else {
        tb = time_once(b, reps);
        ta = time_once(a, reps);
      }
      sa.all.push_back(ta);
      sa.rounds.back().push_back(ta);
      sb.all.push_back(tb);
      sb.rounds.back().push_back(tb);
    }
  }
  return {sa, sb};
}

// ---- problems --------------------------------------------------------------------------------------------------

struct Shape {
  std::int64_t B, L, W, H;
  double fused_target_us;  // issue 4 target for bf16 fused (0 = none)
};

//! The benchmark's four shapes by the names the Nsight Compute drivers take (profile_rglru_forward,
//! profile_rglru_backward): seed (4, 2048, 2048, 16), long (1, 8192, 2560, 10), batch (16, 1024, 1024, 16),
//! longest (1, 65536, 2560, 10). False for any other name.
inline bool shape_named(const char* name, Shape& s) {
  const std::string n = name;
  if (n == "seed") s = {4, 2048, 2048, 16, 0};
  else if (n == "long") s = {1, 8192, 2560, 10, 0};
  else if (n == "batch") s = {16, 1024, 1024, 16, 0};
  else if (n == "longest") s = {1, 65536, 2560, 10, 0};
  else return false;
  return true;
}

//! Device buffers of one problem, rotated over `sets` copies of everything a call reads and writes.
struct ForwardBuffers {
  int sets = 1;
  std::vector<thrust::device_vector<Element>> x, gx, ga, y;
  thrust::device_vector<Element> Wx, Wa;
  thrust::device_vector<float> bx, ba, a_param;
  std::vector<thrust::device_vector<float>> h;  // h0 / h_final (in place) for decode; final state otherwise
  thrust::device_vector<std::int32_t> state_index;
  std::size_t bytes = 0;  // device bytes allocated for this problem
};

//! Enough sets that one pass over them exceeds the 60 MB L2 twice over (at most 16).
inline int rotation_sets(std::size_t bytes_per_call) {
  const std::size_t target = 120u << 20;
  return static_cast<int>(std::min<std::size_t>(16, std::max<std::size_t>(2, (target + bytes_per_call - 1) / bytes_per_call)));
}

inline ForwardBuffers make_buffers(const Shape& s, GateMode mode, std::int64_t state_rows) {
  ForwardBuffers b;
  const std::int64_t T = s.B * s.L, w = s.W / s.H;
  const std::size_t per_call = static_cast<std::size_t>(T * s.W) * sizeof(Element) * (mode == GateMode::kFused ? 2 : 4);
  b.sets = rotation_sets(per_call);
  std::uint64_t seed = 1;
  for (int i = 0; i < b.sets; ++i) {
    b.x.push_back(random_buffer<Element>(T * s.W, -1.0f, 1.0f, seed++));
    if (mode == GateMode::kGateLogits) {
      b.gx.push_back(random_buffer<Element>(T * s.W, -3.0f, 3.0f, seed++));
      b.ga.push_back(random_buffer<Element>(T * s.W, -3.0f, 3.0f, seed++));
    }
    b.y.push_back(random_buffer<Element>(T * s.W, -1.0f, 1.0f, seed++));
    b.h.push_back(random_buffer<float>(state_rows * s.W, -1.0f, 1.0f, seed++));
  }
  const float scale = 2.0f / std::sqrt(static_cast<float>(w));
  b.Wx = random_buffer<Element>(s.H * w * w, -scale, scale, seed++);
  b.Wa = random_buffer<Element>(s.H * w * w, -scale, scale, seed++);
  b.bx = random_buffer<float>(s.W, -0.5f, 0.5f, seed++);
  b.ba = random_buffer<float>(s.W, -0.5f, 0.5f, seed++);
  b.a_param = random_buffer<float>(s.W, -1.0f, 1.0f, seed++);
  std::vector<std::int32_t> slots(static_cast<std::size_t>(s.B));
  for (std::int64_t n = 0; n < s.B; ++n) slots[static_cast<std::size_t>(n)] = static_cast<std::int32_t>((n * 7) % state_rows);
  b.state_index = thrust::device_vector<std::int32_t>(slots.begin(), slots.end());
  b.bytes = b.sets * (per_call + static_cast<std::size_t>(state_rows * s.W) * 4) +
            2 * static_cast<std::size_t>(s.H * w * w) * sizeof(Element) + 3 * static_cast<std::size_t>(s.W) * 4;
  BENCH_CUDA(cudaDeviceSynchronize());
  return b;
}

//! Forward arguments for set `set` of the buffers: the forward alone, or a decode step from the state pool.
inline ForwardArguments arguments(const Shape& s, GateMode mode, ResetMode reset_mode, bool with_h0, bool decode,
                                  ForwardBuffers& b, int set, std::int64_t state_rows) {
  ForwardArguments a;
  a.shape.num_sequences = s.B;
  a.shape.seq_len = s.L;
  a.shape.num_tokens = s.B * s.L;
  a.shape.width = s.W;
  a.shape.num_blocks = s.H;
  a.shape.validate_device_inputs = false;  // timed calls: the caller guarantees the indices (checked rows say so)
  a.dtype = hawk::DType::kBFloat16;
  a.mode = mode;
  a.reset_mode = reset_mode;
  a.x = raw(b.x[set]);
  if (mode == GateMode::kGateLogits) {
    a.gx = raw(b.gx[set]);
    a.ga = raw(b.ga[set]);
  } else {
    a.Wx = raw(b.Wx);
    a.Wa = raw(b.Wa);
    a.bx = raw(b.bx);
    a.ba = raw(b.ba);
  }
  a.a_param = raw(b.a_param);
  a.y = raw(b.y[set]);
  a.h_final = raw(b.h[set]);
  if (with_h0) a.h0 = raw(b.h[set]);  // in place
  if (decode) {
    a.state_index = raw(b.state_index);
    a.shape.num_state_rows = state_rows;
  }
  return a;
}

}  // namespace rglru_bench
