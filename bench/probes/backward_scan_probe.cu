// Where does the backward's scan spend its time, and does a wider width tile pay (issue 17)? At the four
// benchmark shapes (bf16, fused, canonical; gate-logits mode at the seed shape and one long sequence) this probe
// - runs the default backward (hawk::rglru::backward) once as the reference;
// - for the shipped width tile and others, runs Backward<BackwardConfig<ForwardConfig<bf16, w, WidthTile, 64,
//   256, ...>, 1, DaParamRowStep>> with the chunked and with the sequential scan (gate-logits mode: w = 0 and the
//   chunked scan, which kAuto always runs there), compares every output byte (dx, dWx, dWa, dbx, dba or dgx, dga;
//   d a_param, dh0) with the reference (with the shipped d a_param grouping, neither the width
//   tile nor the scan kernel may change a bit; the names of differing outputs are printed), and times the whole
//   backward (CUDA events, 3 warm-up calls, the median of 20; only the scan differs between the rows);
// - traces one call of each chunked scan: the kernel's timeline hook (HAWK_BACKWARD_SCAN_TRACE) stores
//   %globaltimer at eight points of every ticket: taken (0), inputs landed (1), projection and gates done (2), the
//   replay done (3), the carry in hand (4), the carry published (5), row gradients written (6), the d a_param row
//   written (7). Printed: medians and 90th percentiles of each interval, the chain's hop (publish to publish of
//   successive chunks of one (sequence, tile)) and the share of the CTA slots the tickets kept busy.
// The hook's null check stays in the timed calls (a load and a branch at each of the eight points), so the chunked
// rows time a hair more than the library's kernel. Not a test of hawk's kernels.
//
//   [HAWK_PROBE_FILTER=TEXT] [HAWK_PROBE_DUMP=PREFIX] build-gpu/bench/probes/backward_scan_probe [OUT.json]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

__device__ unsigned long long* g_backward_scan_trace = nullptr;
constexpr int kTraceSlots = 8;

__device__ __forceinline__ unsigned long long probe_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

#define HAWK_BACKWARD_SCAN_TRACE(event, ticket)                                                  \
  do {                                                                                           \
    if (g_backward_scan_trace != nullptr) g_backward_scan_trace[(ticket)*kTraceSlots + (event)] = probe_now(); \
  } while (0)

#include "../rglru/bench_rglru_support.cuh"
#include "hawk/rglru/rglru.cuh"
#include "probe_support.cuh"

namespace {

using namespace rglru_bench;

using hawk::rglru::BackwardScan;

//! The backward with scan tiles of WidthTile channels and Threads threads, d a_param grouped every DaParamRowStep
//! tokens (the shipped forward's tiles' grouping, so that every variant must give the shipped bytes: 64 at w = 256,
//! 32 at w = 128, 16 at w = 64).
template <int BlockWidth, int WidthTile, int DaParamRowStep, int Threads = 256>
using Config = hawk::rglru::BackwardConfig<
    hawk::rglru::ForwardConfig<Element, BlockWidth, WidthTile, hawk::rglru::kDefaultTimeChunk, Threads,
                               hawk::rglru::ResetAtSequenceStart, GateMode::kFused, 2>,
    1, DaParamRowStep>;

//! The gate-logits backward with scan tiles of WidthTile channels, d a_param grouped as the shipped 32-channel
//! tiles group it (every 32 tokens). The paired forward's stages do not enter the backward.
template <int WidthTile>
using LogitsConfig = hawk::rglru::BackwardConfig<
    hawk::rglru::ForwardConfig<Element, 0, WidthTile, hawk::rglru::kDefaultTimeChunk, 256,
                               hawk::rglru::ResetAtSequenceStart, GateMode::kGateLogits, 2>,
    1, 32>;

//! The outputs of one backward call.
struct Gradients {
  thrust::device_vector<Element> dx, dgx, dga;  // dgx, dga: gate-logits mode
  thrust::device_vector<float> dWx, dWa, dbx, dba, da_param, dh0;  // dWx .. dba: fused mode
  Gradients(GateMode mode, std::int64_t T, std::int64_t W, std::int64_t H, std::int64_t N)
      : dx(static_cast<std::size_t>(T * W)),
        dgx(mode == GateMode::kGateLogits ? static_cast<std::size_t>(T * W) : 0),
        dga(mode == GateMode::kGateLogits ? static_cast<std::size_t>(T * W) : 0),
        dWx(mode == GateMode::kFused ? static_cast<std::size_t>(W * (W / H)) : 0),
        dWa(mode == GateMode::kFused ? static_cast<std::size_t>(W * (W / H)) : 0),
        dbx(mode == GateMode::kFused ? static_cast<std::size_t>(W) : 0),
        dba(mode == GateMode::kFused ? static_cast<std::size_t>(W) : 0),
        da_param(static_cast<std::size_t>(W)),
        dh0(static_cast<std::size_t>(N * W)) {}
};

template <class T>
bool same_bytes(const thrust::device_vector<T>& a, const thrust::device_vector<T>& b) {
  return differing_bytes(thrust::raw_pointer_cast(a.data()), thrust::raw_pointer_cast(b.data()),
                         a.size() * sizeof(T)) == 0;
}

//! The names of the outputs whose bytes differ ("" when none).
std::string differing(const Gradients& a, const Gradients& b) {
  std::string names;
  auto note = [&](bool same, const char* name) {
    if (!same) names += names.empty() ? name : std::string(" ") + name;
  };
  note(same_bytes(a.dx, b.dx), "dx");
  note(same_bytes(a.dgx, b.dgx), "dgx");
  note(same_bytes(a.dga, b.dga), "dga");
  note(same_bytes(a.dWx, b.dWx), "dWx");
  note(same_bytes(a.dWa, b.dWa), "dWa");
  note(same_bytes(a.dbx, b.dbx), "dbx");
  note(same_bytes(a.dba, b.dba), "dba");
  note(same_bytes(a.da_param, b.da_param), "da_param");
  note(same_bytes(a.dh0, b.dh0), "dh0");
  return names;
}

//! One problem: inputs, the forward's checkpoints, dy, and the reference gradients of the default backward.
struct Problem {
  Shape s;
  GateMode mode;
  ForwardBuffers b;
  thrust::device_vector<float> checkpoints;
  thrust::device_vector<Element> dy;
  thrust::device_vector<float> dh_final;
  Gradients reference;
  std::vector<std::string> rows;
  bool failed = false;

  explicit Problem(const Shape& shape, GateMode gate_mode = GateMode::kFused)
      : s(shape),
        mode(gate_mode),
        b(make_buffers(shape, gate_mode, shape.B)),
        checkpoints(static_cast<std::size_t>(
            hawk::rglru::checkpoint_rows(shape.B * shape.L, shape.B, hawk::rglru::kDefaultTimeChunk) * shape.W)),
        dy(random_buffer<Element>(shape.B * shape.L * shape.W, -1.0f, 1.0f, 991)),
        dh_final(random_buffer<float>(shape.B * shape.W, -1.0f, 1.0f, 992)),
        reference(gate_mode, shape.B * shape.L, shape.W, shape.H, shape.B) {
    ForwardArguments f = forward_args();
    thrust::device_vector<unsigned char> workspace(std::max<std::size_t>(1, hawk::rglru::forward_workspace_size(f)));
    check(hawk::rglru::forward(f, raw(workspace), workspace.size(), nullptr), "forward");
    const hawk::rglru::BackwardArguments a = backward_args(reference);
    thrust::device_vector<unsigned char> bw(hawk::rglru::backward_workspace_size(a));
    check(hawk::rglru::backward(a, raw(bw), bw.size(), nullptr), "default backward");
    PROBE_CUDA(cudaDeviceSynchronize());
    if (const char* prefix = std::getenv("HAWK_PROBE_DUMP")) dump(prefix);
  }

  //! HAWK_PROBE_DUMP=PREFIX: the default forward's and backward's outputs (y, the final state, the checkpoints,
  //! every gradient), byte for byte, into PREFIX_B_L_W_H_mode.bin, so that two builds' bits can be compared (cmp).
  void dump(const char* prefix) {
    char name[512];
    std::snprintf(name, sizeof(name), "%s_%lld_%lld_%lld_%lld_%s.bin", prefix, static_cast<long long>(s.B),
                  static_cast<long long>(s.L), static_cast<long long>(s.W), static_cast<long long>(s.H),
                  mode == GateMode::kFused ? "fused" : "logits");
    FILE* f = std::fopen(name, "wb");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot open %s\n", name);
      std::exit(2);
    }
    auto write = [&](const auto& v) {
      using T = typename std::decay_t<decltype(v)>::value_type;
      std::vector<T> host(v.size());
      thrust::copy(v.begin(), v.end(), host.begin());
      std::fwrite(host.data(), sizeof(T), host.size(), f);
    };
    write(b.y[0]);
    write(b.h[0]);
    write(checkpoints);
    for (const auto* v : {&reference.dx, &reference.dgx, &reference.dga}) write(*v);
    for (const auto* v : {&reference.dWx, &reference.dWa, &reference.dbx, &reference.dba, &reference.da_param,
                          &reference.dh0})
      write(*v);
    std::fclose(f);
  }

  void check(const hawk::Status& st, const char* what) {
    if (!st.ok()) {
      std::fprintf(stderr, "%s: %s\n", what, st.to_string().c_str());
      std::exit(2);
    }
  }

  ForwardArguments forward_args() {
    ForwardArguments a = arguments(s, mode, ResetMode::kSequenceStart, false, false, b, 0, s.B);
    a.checkpoints = raw(checkpoints);
    a.checkpoint_chunk = hawk::rglru::kDefaultTimeChunk;
    return a;
  }

  hawk::rglru::BackwardArguments backward_args(Gradients& g) {
    hawk::rglru::BackwardArguments a = hawk::rglru::backward_arguments_for(forward_args());
    a.dy = raw(dy);
    a.dh_final = raw(dh_final);
    a.dx = raw(g.dx);
    if (mode == GateMode::kGateLogits) {
      a.dgx = raw(g.dgx);
      a.dga = raw(g.dga);
    } else {
      a.dWx = raw(g.dWx);
      a.dWa = raw(g.dWa);
      a.dbx = raw(g.dbx);
      a.dba = raw(g.dba);
    }
    a.da_param = raw(g.da_param);
    a.dh0 = raw(g.dh0);
    return a;
  }

  //! Times Backward<Cfg, Scan>, compares its bytes with the reference, and (chunked) traces one call.
  template <class Cfg, BackwardScan Scan>
  void variant(const char* name) {
    char label[160];
    std::snprintf(label, sizeof(label), "(%lld,%lld,%lld,%lld) w=%d WidthTile %d %s", static_cast<long long>(s.B),
                  static_cast<long long>(s.L), static_cast<long long>(s.W), static_cast<long long>(s.H),
                  Cfg::kBlockWidth, Cfg::kWidthTile, name);
    const char* filter = std::getenv("HAWK_PROBE_FILTER");
    if (filter != nullptr && std::strstr(label, filter) == nullptr) return;
    using Op = hawk::rglru::Backward<Cfg, Scan>;
    Gradients g(mode, s.B * s.L, s.W, s.H, s.B);
    const hawk::rglru::BackwardArguments a = backward_args(g);
    thrust::device_vector<unsigned char> workspace(Op::workspace_size(a));
    auto call = [&] { check(Op::run(a, raw(workspace), workspace.size(), nullptr), label); };
    const double backward_us = median_us(call);
    const std::string differ = differing(g, reference);
    const bool same = differ.empty();
    failed = failed || !same;
    std::string trace_text, trace_json;
    if (Scan == BackwardScan::kChunked) trace<Cfg>(call, trace_text, trace_json);
    std::fprintf(stderr, "%-62s backward %9.1f us  bytes %s%s%s\n", label, backward_us,
                 same ? "equal" : "DIFFER in ", differ.c_str(), trace_text.c_str());
    char json[1536];
    std::snprintf(json, sizeof(json),
                  "{\"row\": \"%s\", \"backward_us\": %.2f, \"same_bytes\": %s, \"differing\": \"%s\"%s}", label,
                  backward_us, same ? "true" : "false", differ.c_str(), trace_json.c_str());
    rows.push_back(json);
  }

  template <class Cfg, class Call>
  void trace(Call& call, std::string& text, std::string& json) {
    constexpr int kC = Cfg::kTimeChunk;
    const std::int64_t chunks = (s.L + kC - 1) / kC, tiles = s.W / Cfg::kWidthTile;
    const std::int64_t per_row = s.B * tiles, tickets = chunks * per_row;
    thrust::device_vector<unsigned long long> buffer(static_cast<std::size_t>(tickets) * kTraceSlots, 0ull);
    unsigned long long* pointer = raw(buffer);
    PROBE_CUDA(cudaMemcpyToSymbol(g_backward_scan_trace, &pointer, sizeof(pointer)));
    call();
    PROBE_CUDA(cudaDeviceSynchronize());
    unsigned long long* none = nullptr;
    PROBE_CUDA(cudaMemcpyToSymbol(g_backward_scan_trace, &none, sizeof(none)));
    std::vector<unsigned long long> t(buffer.size());
    thrust::copy(buffer.begin(), buffer.end(), t.begin());
    unsigned long long origin = ~0ull, end = 0;
    double busy = 0.0;
    std::vector<double> load, gates, replay, wait, reverse, gradients, partial, life, hop, seen;
    for (std::int64_t k = 0; k < tickets; ++k) {
      const unsigned long long* e = &t[k * kTraceSlots];
      origin = std::min(origin, e[0]);
      end = std::max(end, e[7]);
      busy += (e[7] - e[0]) * 1e-3;
      load.push_back((e[1] - e[0]) * 1e-3);
      gates.push_back((e[2] - e[1]) * 1e-3);
      replay.push_back((e[3] - e[2]) * 1e-3);
      wait.push_back(e[4] > e[2] ? (e[4] - e[2]) * 1e-3 : 0.0);
      reverse.push_back((e[5] - e[4]) * 1e-3);
      gradients.push_back((e[6] - std::max(e[3], e[5])) * 1e-3);
      partial.push_back((e[7] - e[6]) * 1e-3);
      life.push_back((e[7] - e[0]) * 1e-3);
      const std::int64_t successor = k - per_row;  // chunk j + 1 of the same (sequence, tile): dense, chunk-major
      if (successor >= 0) {
        const unsigned long long* f = &t[successor * kTraceSlots];
        hop.push_back(e[5] > f[5] ? (e[5] - f[5]) * 1e-3 : 0.0);
        seen.push_back(e[4] > std::max(f[5], e[2]) ? (e[4] - std::max(f[5], e[2])) * 1e-3 : 0.0);
      }
    }
    int per_sm = 0, sms = 0;
    constexpr std::size_t kShared = hawk::rglru::backward_detail::ScanLayout<Cfg, true>::kSharedBytes;
    PROBE_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hawk::rglru::chunked_backward_scan_kernel<Cfg>,
                                                             Cfg::kThreads, kShared));
    PROBE_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const double span = (end - origin) * 1e-3;
    const double slots_busy = busy / (span * per_sm * sms);
    char line[1024];
    std::snprintf(line, sizeof(line),
                  "\n    scan kernel %.1f us, %d CTAs/SM, slots busy %.2f; median/p90 us: load %.2f/%.2f  gates "
                  "%.2f/%.2f  replay %.2f/%.2f  carry wait %.2f/%.2f  reverse %.2f/%.2f  gradients %.2f/%.2f  "
                  "partial %.2f/%.2f  life %.2f/%.2f  hop %.2f/%.2f  carry seen after publish %.2f/%.2f",
                  span, per_sm, slots_busy, quantile(load, 0.5), quantile(load, 0.9), quantile(gates, 0.5),
                  quantile(gates, 0.9), quantile(replay, 0.5), quantile(replay, 0.9), quantile(wait, 0.5),
                  quantile(wait, 0.9), quantile(reverse, 0.5), quantile(reverse, 0.9), quantile(gradients, 0.5),
                  quantile(gradients, 0.9), quantile(partial, 0.5), quantile(partial, 0.9), quantile(life, 0.5),
                  quantile(life, 0.9), quantile(hop, 0.5), quantile(hop, 0.9), quantile(seen, 0.5),
                  quantile(seen, 0.9));
    text = line;
    char j[1024];
    std::snprintf(j, sizeof(j),
                  ", \"scan_kernel_us\": %.2f, \"ctas_per_sm\": %d, \"slots_busy\": %.3f, \"load_us\": %.3f, "
                  "\"gates_us\": %.3f, \"replay_us\": %.3f, \"carry_wait_us\": %.3f, \"reverse_us\": %.3f, "
                  "\"gradients_us\": %.3f, \"partial_us\": %.3f, \"life_us\": %.3f, \"life_p90_us\": %.3f, "
                  "\"hop_us\": %.3f, \"carry_seen_us\": %.3f",
                  span, per_sm, slots_busy, quantile(load, 0.5), quantile(gates, 0.5), quantile(replay, 0.5),
                  quantile(wait, 0.5), quantile(reverse, 0.5), quantile(gradients, 0.5), quantile(partial, 0.5),
                  quantile(life, 0.5), quantile(life, 0.9), quantile(hop, 0.5), quantile(seen, 0.5));
    json = j;
  }
};

template <int W, int WidthTile, int DaParamRowStep, int Threads = 256>
void both_scans(Problem& p) {
  using Cfg = Config<W, WidthTile, DaParamRowStep, Threads>;
  p.variant<Cfg, BackwardScan::kChunked>(Threads == 256 ? "chunked" : "chunked, 128 threads");
  p.variant<Cfg, BackwardScan::kSequential>(Threads == 256 ? "sequential" : "sequential, 128 threads");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> rows;
  bool failed = false;
  auto collect = [&](Problem& p) {
    rows.insert(rows.end(), p.rows.begin(), p.rows.end());
    failed = failed || p.failed;
  };
  {
    Problem p(Shape{4, 2048, 2048, 16, 0});
    both_scans<128, 32, 32>(p);  // shipped
    both_scans<128, 64, 32>(p);
    // Not yet run (added 2026-12-03 after w = 64's narrower tiles won): 16-channel tiles of 128 threads, whose row
    // step (128 / 4 = 32) is the shipped one's, so the same bits with half the shared memory per CTA.
    both_scans<128, 16, 32, 128>(p);
    collect(p);
  }
  {
    Problem p(Shape{16, 1024, 1024, 16, 0});
    both_scans<64, 64, 16>(p);  // shipped (the forward's tiles): both scans compute dx (kDxInScan)
    // Shipped from 2026-12-03 to the thirty-first session, now the compact configuration: 32-channel tiles of 128
    // threads, the same grouping; the backward alone 404.5 against 426.4 us through the sequential scans
    // (bench/results/2026-12-03-h200-1f8890f-probes).
    both_scans<64, 32, 16, 128>(p);
    collect(p);
  }
  {
    // Four long sequences: kAuto runs the sequential scan here (320 CTAs of 32 channels, one per SM; 640 of 16, two
    // per SM), the case the one-sequence shapes do not measure.
    Problem p(Shape{4, 4096, 2560, 10, 0});
    both_scans<256, 32, 64>(p);  // shipped since 2026-12-03
    both_scans<256, 16, 64>(p);
    collect(p);
  }
  // Gate-logits mode (kAuto: always the chunked scan): the seed shape, whose forward+backward target is 100 us,
  // and one long sequence; 64-channel tiles with the shipped grouping (128 channels exceed 227 KB).
  for (const Shape& shape : {Shape{4, 2048, 2048, 16, 0}, Shape{1, 8192, 2560, 10, 0}}) {
    Problem p(shape, GateMode::kGateLogits);
    p.variant<LogitsConfig<32>, BackwardScan::kChunked>("logits chunked");  // shipped
    p.variant<LogitsConfig<64>, BackwardScan::kChunked>("logits chunked");
    collect(p);
  }
  for (std::int64_t L : {8192, 65536}) {
    Problem p(Shape{1, L, 2560, 10, 0});
    both_scans<256, 32, 64>(p);  // shipped since 2026-12-03
    both_scans<256, 16, 64>(p);  // shipped before
    // Not yet run: the same tiles with 128 threads (row steps 16 and 32, the shipped grouping of 64 tokens).
    both_scans<256, 32, 64, 128>(p);
    both_scans<256, 16, 64, 128>(p);
    // (64-channel tiles lost at both shapes on 2026-12-03, and with the 16-channel grouping their sequential
    // kernel's d a_param shares no longer fit its shared memory.)
    collect(p);
  }
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    if (f == nullptr) return 2;
    std::fprintf(f, "{\"probe\": \"backward_scan\", \"rows\": [");
    for (std::size_t i = 0; i < rows.size(); ++i) std::fprintf(f, "%s%s", i == 0 ? "" : ", ", rows[i].c_str());
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return failed ? 1 : 0;
}
