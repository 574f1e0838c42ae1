// Where does a ticket of the persistent Hopper chunked forward (WgmmaPersistentForward, issue 16) spend its time?
// The kernel's timeline hook (HAWK_PERSISTENT_FORWARD_TRACE) is defined here to store %globaltimer at nine points of
// every ticket: the producers start it (0), its products are done (1), its gates are in registers (2), the gate tile
// is free for it (3), the chain has its gates (4), the chain is done (5), the chain has the carry (6), the chain's
// scan is done (7), the producers' first operand stage has landed (8: "products" = the wait for the copies, then the
// products or the logits' read). After warm-up calls, one traced call per
// shape; printed: medians and 90th percentiles of each interval over the tickets, and, for a dense batch, of the
// chain's wait for the predecessor chunk: done(k) - max(done(predecessor), gates(k)); and the scan in SM cycles
// (clock64 at events 6 and 7) with the SM clock it implies. Not a test of hawk's kernels.
//
//   [HAWK_PROBE_FILTER=TEXT] build-gpu/bench/probes/persistent_forward_timeline_probe [OUT.json]
// HAWK_PROBE_FILTER: only the rows whose name contains TEXT (the whole list takes a few minutes).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

__device__ unsigned long long* g_persistent_trace = nullptr;
constexpr int kTraceSlots = 12;  // events 0-7, the CTA, the SM clock (clock64) at events 6 and 7, event 8

__device__ __forceinline__ unsigned long long probe_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

#define HAWK_PERSISTENT_FORWARD_TRACE(event, ticket)                                        \
  do {                                                                                       \
    if (g_persistent_trace != nullptr) {                                                     \
      g_persistent_trace[(ticket) * kTraceSlots + ((event) == 8 ? 11 : (event))] = probe_now(); \
      if ((event) == 0) g_persistent_trace[(ticket) * kTraceSlots + 8] = blockIdx.x;         \
      if ((event) >= 6) g_persistent_trace[(ticket) * kTraceSlots + 3 + (event)] = clock64(); \
    }                                                                                        \
  } while (0)

#include "../rglru/bench_rglru_support.cuh"
#include "hawk/rglru/rglru.cuh"
#include "probe_support.cuh"

namespace {

using namespace rglru_bench;

using hawk::rglru::ChainScan;
using hawk::rglru::ScanPriority;

template <int BlockWidth, ScanPriority Priority = ScanPriority::kShare, ChainScan Scan = ChainScan::kKeep,
          int ScanBuffers = 2>
using Op = hawk::rglru::WgmmaPersistentForward<hawk::rglru::WgmmaPersistentForwardConfig<
    Element, BlockWidth, hawk::rglru::ResetAtSequenceStart, 144, Priority, Scan, ScanBuffers>>;

//! Gate-logits mode (PersistentGateLogitsForwardConfig): "products" is the producers' read of their logits.
template <int ProducerRegisters = 144, int ScanBuffers = 2>
using GateLogitsOp = hawk::rglru::WgmmaPersistentForward<hawk::rglru::PersistentGateLogitsForwardConfig<
    Element, hawk::rglru::ResetAtSequenceStart, ProducerRegisters, ChainScan::kKeep, ScanBuffers>>;

template <class Persistent>
std::string probe_op(const char* name, const Shape& s, GateMode mode) {
  const char* filter = std::getenv("HAWK_PROBE_FILTER");
  if (filter != nullptr && std::strstr(name, filter) == nullptr) return {};  // left out: no row
  ForwardBuffers b = make_buffers(s, mode, s.B);
  const auto args = arguments(s, mode, ResetMode::kSequenceStart, false, false, b, 0, s.B);
  thrust::device_vector<unsigned char> workspace(std::max<std::size_t>(Persistent::workspace_size(args), 1));
  const std::int64_t chunks = (s.L + 191) / 192, tiles = s.W / 64, tickets = s.B * chunks * tiles;
  thrust::device_vector<unsigned long long> trace(static_cast<std::size_t>(tickets) * kTraceSlots, 0ull);
  auto call = [&] {
    const hawk::Status st = Persistent::run(args, raw(workspace), workspace.size(), nullptr);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      std::exit(2);
    }
  };
  for (int i = 0; i < 3; ++i) call();
  PROBE_CUDA(cudaDeviceSynchronize());
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));
  PROBE_CUDA(cudaEventRecord(start));
  call();
  PROBE_CUDA(cudaEventRecord(stop));
  PROBE_CUDA(cudaEventSynchronize(stop));
  float untraced_ms = 0;
  PROBE_CUDA(cudaEventElapsedTime(&untraced_ms, start, stop));
  unsigned long long* pointer = raw(trace);
  PROBE_CUDA(cudaMemcpyToSymbol(g_persistent_trace, &pointer, sizeof(pointer)));
  call();
  PROBE_CUDA(cudaDeviceSynchronize());
  unsigned long long* none = nullptr;
  PROBE_CUDA(cudaMemcpyToSymbol(g_persistent_trace, &none, sizeof(none)));
  std::vector<unsigned long long> t(trace.size());
  thrust::copy(trace.begin(), trace.end(), t.begin());
  unsigned long long origin = ~0ull, end = 0;
  for (std::int64_t k = 0; k < tickets; ++k) {
    origin = std::min(origin, t[k * kTraceSlots]);
    end = std::max(end, t[k * kTraceSlots + 5]);
  }
  std::vector<double> products, copies, gates, wait_free, hand_over, chain, chain_wait, start_lag, carry_seen, scan;
  std::vector<double> scan_cycles;
  double scan_clock_cycles = 0.0, scan_clock_ns = 0.0;  // the SM clock over the scans: cycles per ns
  for (std::int64_t k = 0; k < tickets; ++k) {
    const unsigned long long* e = &t[k * kTraceSlots];
    products.push_back((e[1] - e[0]) * 1e-3);
    if (e[11] >= e[0] && e[11] <= e[1]) copies.push_back((e[11] - e[0]) * 1e-3);
    gates.push_back((e[2] - e[1]) * 1e-3);
    wait_free.push_back(e[3] > e[2] ? (e[3] - e[2]) * 1e-3 : 0.0);
    hand_over.push_back(e[4] > e[3] ? (e[4] - e[3]) * 1e-3 : 0.0);
    chain.push_back((e[5] - e[4]) * 1e-3);
    start_lag.push_back((e[0] - origin) * 1e-3);
    scan.push_back(e[7] > e[6] ? (e[7] - e[6]) * 1e-3 : 0.0);
    if (e[7] > e[6] && e[10] > e[9]) {
      scan_cycles.push_back(static_cast<double>(e[10] - e[9]));
      scan_clock_cycles += static_cast<double>(e[10] - e[9]);
      scan_clock_ns += static_cast<double>(e[7] - e[6]);
    }
    const std::int64_t predecessor = k - s.B * tiles;  // chunk-major dense tickets
    if (predecessor >= 0) {
      const unsigned long long ready = std::max(t[predecessor * kTraceSlots + 5], e[4]);
      chain_wait.push_back(e[5] > ready ? (e[5] - ready) * 1e-3 : 0.0);
      // From the predecessor's scan end (its publish follows) or this chain's gates, whichever is later, to the
      // carry in hand here: the hand-over of the carry through L2 (and the poll's round trip).
      const unsigned long long published = std::max(t[predecessor * kTraceSlots + 7], e[4]);
      carry_seen.push_back(e[6] > published ? (e[6] - published) * 1e-3 : 0.0);
    }
  }
  char line[1024];
  std::snprintf(line, sizeof(line),
                "%-20s kernel %.1f us (untraced %.1f)  median/p90 us: products %.2f/%.2f (of which the wait for the "
                "first stage's copies %.2f/%.2f)  gates %.2f/%.2f  "
                "wait for tile %.2f/%.2f  hand-over %.2f/%.2f  chain %.2f/%.2f  chain after ready %.2f/%.2f  "
                "carry seen after publish %.2f/%.2f  scan %.2f/%.2f  scan cycles %.0f/%.0f (SM clock %.2f GHz)",
                name, (end - origin) * 1e-3, untraced_ms * 1e3, quantile(products, 0.5), quantile(products, 0.9),
                quantile(copies, 0.5), quantile(copies, 0.9), quantile(gates, 0.5), quantile(gates, 0.9),
                quantile(wait_free, 0.5), quantile(wait_free, 0.9),
                quantile(hand_over, 0.5), quantile(hand_over, 0.9), quantile(chain, 0.5), quantile(chain, 0.9),
                quantile(chain_wait, 0.5), quantile(chain_wait, 0.9), quantile(carry_seen, 0.5),
                quantile(carry_seen, 0.9), quantile(scan, 0.5), quantile(scan, 0.9), quantile(scan_cycles, 0.5),
                quantile(scan_cycles, 0.9), scan_clock_ns > 0 ? scan_clock_cycles / scan_clock_ns : 0.0);
  std::fprintf(stderr, "%s\n", line);
  // The first 12 tickets of CTA 0, as a timeline (us from the first start).
  std::string cta0;
  int shown = 0;
  for (std::int64_t k = 0; k < tickets && shown < 12; ++k) {
    if (t[k * kTraceSlots + 8] != 0) continue;
    ++shown;
    char row[256];
    std::snprintf(row, sizeof(row), "  ticket %6lld: start %7.2f products %7.2f gates %7.2f free %7.2f chain %7.2f done %7.2f\n",
                  static_cast<long long>(k), (t[k * kTraceSlots] - origin) * 1e-3,
                  (t[k * kTraceSlots + 1] - origin) * 1e-3, (t[k * kTraceSlots + 2] - origin) * 1e-3,
                  (t[k * kTraceSlots + 3] - origin) * 1e-3, (t[k * kTraceSlots + 4] - origin) * 1e-3,
                  (t[k * kTraceSlots + 5] - origin) * 1e-3);
    cta0 += row;
  }
  std::fprintf(stderr, "%s", cta0.c_str());
  char json[768];
  std::snprintf(json, sizeof(json),
                "{\"shape\": \"%s\", \"kernel_us\": %.2f, \"products_us\": %.3f, \"copies_wait_us\": %.3f, "
                "\"gates_us\": %.3f, \"wait_tile_us\": %.3f, "
                "\"hand_over_us\": %.3f, \"chain_us\": %.3f, \"chain_after_ready_us\": %.3f, \"carry_seen_us\": %.3f, "
                "\"scan_us\": %.3f, \"scan_cycles\": %.0f, \"sm_clock_ghz\": %.3f}",
                name, (end - origin) * 1e-3, quantile(products, 0.5), quantile(copies, 0.5), quantile(gates, 0.5),
                quantile(wait_free, 0.5),
                quantile(hand_over, 0.5), quantile(chain, 0.5), quantile(chain_wait, 0.5), quantile(carry_seen, 0.5),
                quantile(scan, 0.5), quantile(scan_cycles, 0.5),
                scan_clock_ns > 0 ? scan_clock_cycles / scan_clock_ns : 0.0);
  return json;
}

template <int BlockWidth, ScanPriority Priority = ScanPriority::kShare, ChainScan Scan = ChainScan::kKeep>
std::string probe(const char* name, const Shape& s) {
  return probe_op<Op<BlockWidth, Priority, Scan>>(name, s, GateMode::kFused);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> rows;
  rows.push_back(probe<128>("(4,2048,2048,16)", Shape{4, 2048, 2048, 16, 0}));
  rows.push_back(probe<64>("(16,1024,1024,16)", Shape{16, 1024, 1024, 16, 0}));
  rows.push_back(probe<256>("(1,8192,2560,10)", Shape{1, 8192, 2560, 10, 0}));
  rows.push_back(probe<256>("(1,65536,2560,10)", Shape{1, 65536, 2560, 10, 0}));
  rows.push_back(probe_op<GateLogitsOp<>>("(4,2048,2048,16) gate-logits", Shape{4, 2048, 2048, 16, 0}, GateMode::kGateLogits));
  rows.push_back(probe_op<GateLogitsOp<>>("(1,8192,2560,10) gate-logits", Shape{1, 8192, 2560, 10, 0}, GateMode::kGateLogits));
  rows.push_back(
      probe_op<GateLogitsOp<>>("(1,65536,2560,10) gate-logits", Shape{1, 65536, 2560, 10, 0}, GateMode::kGateLogits));
  // The chain warps with 80 registers (producers 144, as the fused kernel's): with three scan buffers ptxas kept
  // every token pair's h in the same two registers, and each step waited for the previous store to read them.
  rows.push_back(probe_op<GateLogitsOp<144>>("(1,65536,2560,10) gate-logits, chain 80 registers",
                                             Shape{1, 65536, 2560, 10, 0}, GateMode::kGateLogits));
  rows.push_back(probe_op<GateLogitsOp<144>>("(4,2048,2048,16) gate-logits, chain 80 registers",
                                             Shape{4, 2048, 2048, 16, 0}, GateMode::kGateLogits));
  // Three scan buffers (loads two batches ahead; shipped before a520f21).
  rows.push_back(probe_op<GateLogitsOp<120, 3>>("(1,65536,2560,10) gate-logits, three scan buffers",
                                                Shape{1, 65536, 2560, 10, 0}, GateMode::kGateLogits));
  rows.push_back(probe_op<Op<256, ScanPriority::kShare, ChainScan::kKeep, 3>>(
      "(1,65536,2560,10) three scan buffers", Shape{1, 65536, 2560, 10, 0}, GateMode::kFused));
  // The transfer-pair chain (not bitwise): the chunk's pair from a zero carry before the wait (so "carry seen after
  // publish" includes that pass where the carry came first), one multiply-add to the publish (its "scan"), the
  // second pass after it (within "chain").
  rows.push_back(probe_op<Op<256, ScanPriority::kShare, ChainScan::kTransferPair>>(
      "(1,65536,2560,10) transfer-pair chain", Shape{1, 65536, 2560, 10, 0}, GateMode::kFused));
  rows.push_back(probe_op<Op<256, ScanPriority::kShare, ChainScan::kTransferPair>>(
      "(1,8192,2560,10) transfer-pair chain", Shape{1, 8192, 2560, 10, 0}, GateMode::kFused));
  // The scan with the producers idle (ScanPriority::kQuiet), now in SM cycles: at e9883ae it took 1.79 us, about
  // 16 cycles a token, where chain_scan_probe's same scan alone on an SM takes 9.8 (bench/results/
  // 2026-12-01-h200-73c2720/). Then the two-pass chains (ChainScan): the carry published after a first pass that
  // stores nothing, then h kept in the tile (carry-first) or y stored by the chain (direct-y).
  rows.push_back(probe<256, ScanPriority::kQuiet>("(1,65536,2560,10) quiet", Shape{1, 65536, 2560, 10, 0}));
  constexpr ScanPriority kShare = ScanPriority::kShare;
  rows.push_back(probe<256, kShare, ChainScan::kCarryFirst>("(1,8192,2560,10) carry-first", Shape{1, 8192, 2560, 10, 0}));
  rows.push_back(
      probe<256, kShare, ChainScan::kCarryFirst>("(1,65536,2560,10) carry-first", Shape{1, 65536, 2560, 10, 0}));
  rows.push_back(
      probe<256, kShare, ChainScan::kCarryFirstDirectY>("(1,8192,2560,10) direct-y", Shape{1, 8192, 2560, 10, 0}));
  rows.push_back(
      probe<256, kShare, ChainScan::kCarryFirstDirectY>("(1,65536,2560,10) direct-y", Shape{1, 65536, 2560, 10, 0}));
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    if (f == nullptr) return 2;
    std::fprintf(f, "{\"probe\": \"persistent_forward_timeline\", \"rows\": [");
    bool first = true;
    for (const std::string& row : rows) {
      if (row.empty()) continue;  // left out by HAWK_PROBE_FILTER
      std::fprintf(f, "%s%s", first ? "" : ", ", row.c_str());
      first = false;
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  return 0;
}
