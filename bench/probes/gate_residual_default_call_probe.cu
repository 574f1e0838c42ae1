// Where does the gate-residual default call spend the GPU time that the uniform layout does not? (issue 14: the
// binding's default call, layout "arbitrary" with validation, must come within 1.15x of the uniform layout's graph
// time.) The binding's shapes: N = 32768 rows of D = 3072 bf16, bf16 gate, int64 idx = r / 3, fp32 dgate.
//
// Times, by CUDA-graph replay (median of 31, two input sets rotated so that nothing stays in the 60 MB L2):
//   uniform     forward + backward, kUniform, validation off        (the comparator of issue 14)
//   default     forward + backward, kArbitrary, validation on        (hawk_torch.gate_residual's default call)
//   arbitrary   the same on a shuffled idx (the table path really runs)
// and each call's backward alone. With --profile it then runs one eager default and one eager uniform call between
// cudaProfilerStart / Stop, for `ncu --profile-from-start off --metrics gpu__time_duration.sum` to list per kernel.
// Not a test of hawk's kernels (their bits are tested elsewhere).
//
//   build-gpu/bench/probes/gate_residual_default_call_probe [--profile] [OUT.json]
#include <cuda_bf16.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cub/device/device_radix_sort.cuh>

#include "hawk/gate_residual/gate_residual.cuh"
#include "probe_support.cuh"

namespace {

namespace gr = hawk::gate_residual;
using E = __nv_bfloat16;
using I = std::int64_t;

constexpr std::int64_t kRows = 32768, kDim = 3072, kRowsPerGroup = 3;
constexpr std::int64_t kGroups = (kRows + kRowsPerGroup - 1) / kRowsPerGroup;

template <class T>
T* device_array(std::size_t n) {
  T* p = nullptr;
  PROBE_CUDA(cudaMalloc(&p, n * sizeof(T)));
  return p;
}

struct Set {
  E *residual, *y, *out, *dout, *dy, *gate;
  float* dgate;
};

Set make_set(std::uint32_t seed) {
  const std::size_t rows = kRows * kDim, gates = kGroups * kDim;
  Set s{device_array<E>(rows), device_array<E>(rows), device_array<E>(rows), device_array<E>(rows),
        device_array<E>(rows), device_array<E>(gates), device_array<float>(gates)};
  fill_bf16_kernel<<<1024, 256>>>(s.residual, rows, seed + 1, 4.0f);
  fill_bf16_kernel<<<1024, 256>>>(s.y, rows, seed + 2, 4.0f);
  fill_bf16_kernel<<<1024, 256>>>(s.dout, rows, seed + 3, 4.0f);
  fill_bf16_kernel<<<1024, 256>>>(s.gate, gates, seed + 4, 4.0f);
  PROBE_CUDA(cudaGetLastError());
  return s;
}

struct Call {
  const char* name;
  gr::IndexLayout layout;
  bool validate;
  const I* idx;
};

gr::ProblemShape shape_of(bool validate) {
  gr::ProblemShape shape;
  shape.num_rows = kRows;
  shape.dim = kDim;
  shape.num_gate_rows = kGroups;
  shape.dtype = hawk::DType::kBFloat16;
  shape.gate_dtype = hawk::DType::kBFloat16;
  shape.index_type = hawk::IndexType::kInt64;
  shape.validate_indices = validate;
  return shape;
}

//! What both directions take alike: the shape, the layout the call declares, y, gate and idx.
template <class Arguments>
Arguments common_args(const Call& c, const Set& s) {
  Arguments a;
  a.shape = shape_of(c.validate);
  a.layout = c.layout;
  a.rows_per_group = c.layout == gr::IndexLayout::kUniform ? kRowsPerGroup : 0;
  a.y = s.y;
  a.gate = s.gate;
  a.idx = c.idx;
  return a;
}

gr::ForwardArguments forward_args(const Call& c, const Set& s) {
  gr::ForwardArguments a = common_args<gr::ForwardArguments>(c, s);
  a.residual = s.residual;
  a.out = s.out;
  return a;
}

gr::BackwardArguments backward_args(const Call& c, const Set& s) {
  gr::BackwardArguments a = common_args<gr::BackwardArguments>(c, s);
  a.dout = s.dout;
  a.dy = s.dy;
  a.dgate = s.dgate;
  a.dgate_type = gr::DgateType::kFloat32;
  return a;
}

using Forward = gr::Forward<E, E, I>;
using Backward = gr::Backward<E, E, I>;

void check(const hawk::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, status.message().c_str());
    std::exit(2);
  }
}

struct Workspaces {
  void* forward;
  std::size_t forward_bytes;
  void* backward;
  std::size_t backward_bytes;
};

void issue(const Call& c, const Set& s, const Workspaces& w, bool with_forward, cudaStream_t stream) {
  if (with_forward) check(Forward::run(forward_args(c, s), w.forward, w.forward_bytes, stream), "forward");
  check(Backward::run(backward_args(c, s), w.backward, w.backward_bytes, stream), "backward");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

//! Median µs per item of replaying what `capture` issues on `stream` (`items` calls per replay), 31 replays after 3.
template <class Capture>
double replay_median_us(cudaStream_t stream, int items, Capture&& capture) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  PROBE_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  capture();
  PROBE_CUDA(cudaStreamEndCapture(stream, &graph));
  PROBE_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) PROBE_CUDA(cudaGraphLaunch(exec, stream));
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));
  std::vector<double> us;
  for (int r = 0; r < 31; ++r) {
    PROBE_CUDA(cudaEventRecord(start, stream));
    PROBE_CUDA(cudaGraphLaunch(exec, stream));
    PROBE_CUDA(cudaEventRecord(stop, stream));
    PROBE_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    PROBE_CUDA(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(1000.0 * ms / items);
  }
  PROBE_CUDA(cudaEventDestroy(start));
  PROBE_CUDA(cudaEventDestroy(stop));
  PROBE_CUDA(cudaGraphExecDestroy(exec));
  PROBE_CUDA(cudaGraphDestroy(graph));
  return median(us);
}

//! Median µs of one call, from a graph holding the call on each input set in turn.
double graph_us(const Call& c, const std::vector<Set>& sets, const Workspaces& w, bool with_forward,
                cudaStream_t stream) {
  return replay_median_us(stream, static_cast<int>(sets.size()), [&] {
    for (const Set& s : sets) issue(c, s, w, with_forward, stream);
  });
}

//! Median µs of CUB's stable radix sort of (key, row) pairs over kRows rows and key_bits(G) bits, by graph
//! replay: the chunk table's sort with 32-bit keys (what hawk runs) against 16-bit keys (enough for G <= 65536).
template <class Key>
double sort_us(cudaStream_t stream) {
  const int bits = gr::detail::key_bits(kGroups);
  std::vector<Key> keys_host(kRows);
  std::vector<std::int32_t> rows_host(kRows);
  std::mt19937 rng(7);
  for (std::int64_t r = 0; r < kRows; ++r) {
    keys_host[r] = static_cast<Key>(rng() % kGroups);
    rows_host[r] = static_cast<std::int32_t>(r);
  }
  Key* keys = device_array<Key>(kRows);
  Key* sorted_keys = device_array<Key>(kRows);
  std::int32_t* rows = device_array<std::int32_t>(kRows);
  std::int32_t* sorted_rows = device_array<std::int32_t>(kRows);
  PROBE_CUDA(cudaMemcpy(keys, keys_host.data(), kRows * sizeof(Key), cudaMemcpyHostToDevice));
  PROBE_CUDA(cudaMemcpy(rows, rows_host.data(), kRows * sizeof(std::int32_t), cudaMemcpyHostToDevice));
  // A pageable copy may return before its DMA lands, on the legacy stream, which `stream` (non-blocking) does not
  // wait for: the keys and rows are in place before the first replay.
  PROBE_CUDA(cudaDeviceSynchronize());
  std::size_t bytes = 0;
  PROBE_CUDA(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, sorted_keys, rows, sorted_rows,
                                             static_cast<int>(kRows), 0, bits, stream));
  void* storage = device_array<unsigned char>(bytes);
  return replay_median_us(stream, 10, [&] {
    for (int i = 0; i < 10; ++i)
      PROBE_CUDA(cub::DeviceRadixSort::SortPairs(storage, bytes, keys, sorted_keys, rows, sorted_rows,
                                                 static_cast<int>(kRows), 0, bits, stream));
  });
}

}  // namespace

int main(int argc, char** argv) {
  bool profile = false;
  const char* json_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profile") == 0) profile = true;
    else json_path = argv[i];
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gate_residual_default_call_probe: no CUDA device\n");
    return 77;
  }
  cudaStream_t stream;
  PROBE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  std::vector<I> uniform_host(kRows), shuffled_host(kRows);
  for (std::int64_t r = 0; r < kRows; ++r) uniform_host[r] = r / kRowsPerGroup;
  shuffled_host = uniform_host;
  std::shuffle(shuffled_host.begin(), shuffled_host.end(), std::mt19937_64(20261130));
  I* uniform_idx = device_array<I>(kRows);
  I* shuffled_idx = device_array<I>(kRows);
  PROBE_CUDA(cudaMemcpy(uniform_idx, uniform_host.data(), kRows * sizeof(I), cudaMemcpyHostToDevice));
  PROBE_CUDA(cudaMemcpy(shuffled_idx, shuffled_host.data(), kRows * sizeof(I), cudaMemcpyHostToDevice));
  const std::vector<Set> sets{make_set(11), make_set(23)};

  const Call calls[] = {{"uniform", gr::IndexLayout::kUniform, false, uniform_idx},
                        {"default", gr::IndexLayout::kArbitrary, true, uniform_idx},
                        {"arbitrary", gr::IndexLayout::kArbitrary, true, shuffled_idx}};
  Workspaces w{};
  for (const Call& c : calls) {
    w.forward_bytes = std::max(w.forward_bytes, Forward::workspace_size(forward_args(c, sets[0])));
    w.backward_bytes = std::max(w.backward_bytes, Backward::workspace_size(backward_args(c, sets[0])));
  }
  w.forward = device_array<unsigned char>(std::max<std::size_t>(w.forward_bytes, 256));
  w.backward = device_array<unsigned char>(std::max<std::size_t>(w.backward_bytes, 256));
  // The index copies and the sets' fills ran on the legacy stream, which the non-blocking `stream` does not wait for.
  PROBE_CUDA(cudaDeviceSynchronize());
  // Each call once, synchronised, with its verdict: idx is what the call claims.
  for (const Call& c : calls) {
    issue(c, sets[0], w, true, stream);
    PROBE_CUDA(cudaStreamSynchronize(stream));
    if (!hawk::read_device_checks(w.backward, stream).ok()) {
      std::fprintf(stderr, "%s: the device checks failed\n", c.name);
      return 2;
    }
  }

  std::string json = "{\"probe\": \"gate_residual_default_call\", \"N\": 32768, \"D\": 3072, \"rows_per_group\": 3, "
                     "\"timing\": \"CUDA-graph replay, median of 31, us per call\", \"calls\": [";
  std::printf("%-10s %12s %12s\n", "call", "fwd+bwd us", "bwd us");
  double uniform_fwd_bwd = 0;
  for (const Call& c : calls) {
    const double fwd_bwd = graph_us(c, sets, w, true, stream);
    const double bwd = graph_us(c, sets, w, false, stream);
    if (c.layout == gr::IndexLayout::kUniform) uniform_fwd_bwd = fwd_bwd;
    std::printf("%-10s %12.1f %12.1f   (%.3fx of uniform fwd+bwd)\n", c.name, fwd_bwd, bwd, fwd_bwd / uniform_fwd_bwd);
    char row[256];
    std::snprintf(row, sizeof(row),
                  "%s{\"call\": \"%s\", \"fwd_bwd_us\": %.2f, \"bwd_us\": %.2f, \"over_uniform\": %.4f}",
                  c.name == calls[0].name ? "" : ", ", c.name, fwd_bwd, bwd, fwd_bwd / uniform_fwd_bwd);
    json += row;
  }
  const double sort32 = sort_us<std::uint32_t>(stream), sort16 = sort_us<std::uint16_t>(stream);
  std::printf("CUB SortPairs of %lld (key, row) pairs over %d bits: 32-bit keys %.1f us, 16-bit keys %.1f us\n",
              static_cast<long long>(kRows), gr::detail::key_bits(kGroups), sort32, sort16);
  char sorts[160];
  std::snprintf(sorts, sizeof(sorts), "], \"sort_pairs_us\": {\"key32\": %.2f, \"key16\": %.2f", sort32, sort16);
  json += sorts;
  json += "}}\n";
  if (json_path != nullptr) {
    if (FILE* f = std::fopen(json_path, "w")) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  if (profile) {
    PROBE_CUDA(cudaDeviceSynchronize());
    PROBE_CUDA(cudaProfilerStart());
    issue(calls[1], sets[0], w, true, stream);
    issue(calls[0], sets[1], w, true, stream);
    PROBE_CUDA(cudaStreamSynchronize(stream));
    PROBE_CUDA(cudaProfilerStop());
  }
  return 0;
}
