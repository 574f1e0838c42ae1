// Which forward configuration to ship next, at the issue-16 shapes, bf16, a reset at each sequence start, forward
// only: candidate sequential ForwardConfigs (width tile, producer threads, stages; what forward() runs) against
// DefaultFusedConfig, then candidate ChunkedForwardConfigs (width tile, chunk, sub-chunk, threads) against
// DefaultChunkedConfig. Every configuration gives the same bits (tests/gpu/rglru/forward_chunked_test.cu proves
// it for several), so the choice is about time only.
//
// Protocol as bench_rglru (bench_rglru_support.cuh): CUDA events, warm-up, AB/BA rounds against the shipped
// configuration, 20 back-to-back calls per sample, inputs rotated beyond the L2. JSON to stdout and argv[1];
// a table on stderr. HAWK_SWEEP_FILTER=TEXT times only the rows whose candidate contains TEXT (e.g.
// "gates in smem"); the others are left out of the output.

#include <thrust/device_vector.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_rglru_support.cuh"
#include "hawk/rglru/rglru.cuh"

namespace {

using namespace rglru_bench;
using hawk::rglru::ChunkedForwardConfig;
using Policy = hawk::rglru::ResetAtSequenceStart;
constexpr GateMode kFused = GateMode::kFused;
constexpr GateMode kLogits = GateMode::kGateLogits;

struct Row {
  std::string shape, mode, config;
  double candidate_us = 0, shipped_us = 0;
  std::string status;
};

template <class Config>
std::string config_name() {
  return "WidthTile " + std::to_string(Config::kWidthTile) + ", Chunk " + std::to_string(Config::kChunk) +
         ", SubChunk " + std::to_string(Config::kSubChunk) + ", Threads " + std::to_string(Config::kThreads) +
         ", smem " + std::to_string(Config::kSharedBytes / 1024) + " KB" + (Config::kBulkLoads ? ", bulk loads" : "");
}

template <class Config>
std::string sequential_config_name() {
  return "sequential: WidthTile " + std::to_string(Config::kWidthTile) + ", Threads " +
         std::to_string(Config::kProducerThreads) + ", Stages " + std::to_string(Config::kStages) +
         (Config::kGatesInRegisters ? ", gates in registers" : ", gates in smem") + ", smem " +
         std::to_string(Config::kSharedBytes / 1024) + " KB";
}

#if defined(HAWK_BUILD_SM90A)
template <class Config>
std::string wgmma_config_name() {
  return "wgmma chunked against the previous forward(): Chunk " + std::to_string(Config::kChunk) + ", Threads " +
         std::to_string(Config::kThreads) + ", smem " + std::to_string(Config::kSharedBytes / 1024) + " KB";
}

//! What forward() ran for sequential configuration Seq before the Hopper chunked forward (the chunked or the
//! sequential forward, as detail::runs_chunked decides), as an operator.
template <class Seq>
struct PreviousForwardOp {
  static std::size_t workspace_size(const ForwardArguments& a) { return hawk::rglru::forward_workspace_size(a); }
  static hawk::Status run(const ForwardArguments& a, void* workspace, std::size_t bytes, cudaStream_t stream) {
    using Chunked = hawk::rglru::ChunkedForward<typename hawk::rglru::DefaultChunkedConfig<Seq>::type>;
    if (hawk::rglru::detail::runs_chunked<Seq>(a, bytes)) return Chunked::run(a, workspace, bytes, stream);
    return hawk::rglru::Forward<Seq>::run(a, workspace, bytes, stream);
  }
};
#endif

//! The status of a row HAWK_SWEEP_FILTER leaves out (not timed, not reported).
const char* const kNotSelected = "not selected";

//! Times operator CandidateOp against ShippedOp at shape s, AB/BA, unless HAWK_SWEEP_FILTER leaves it out.
template <class CandidateOp, class ShippedOp>
Row compare_ops(const char* shape_name, const Shape& s, GateMode mode, std::string config) {
  Row row;
  row.shape = shape_name;
  row.mode = mode == kFused ? "fused" : "gate_logits";
  row.config = std::move(config);
  const char* filter = std::getenv("HAWK_SWEEP_FILTER");
  if (filter != nullptr && row.config.find(filter) == std::string::npos) {
    row.status = kNotSelected;
    return row;
  }
  ForwardBuffers b = make_buffers(s, mode, s.B);
  // The forward alone: a reset at each sequence start, no h0, no checkpoints.
  auto args_for = [&](int set) {
    return arguments(s, mode, ResetMode::kSequenceStart, /*with_h0=*/false, /*decode=*/false, b, set, s.B);
  };
  const hawk::Status can = CandidateOp::can_implement(args_for(0));
  if (!can.ok()) {
    row.status = "cannot run: " + can.to_string();
    return row;
  }
  thrust::device_vector<unsigned char> workspace(
      std::max<std::size_t>(std::max<std::size_t>(CandidateOp::workspace_size(args_for(0)), ShippedOp::workspace_size(args_for(0))), 1));
  bool failed = false;
  auto run = [&](auto op, int rep) {
    using Op = decltype(op);
    const hawk::Status status = Op::run(args_for(rep % b.sets), raw(workspace), workspace.size(), nullptr);
    failed = failed || !status.ok();
  };
  const auto times = time_ab([&](int rep) { run(CandidateOp{}, rep); }, [&](int rep) { run(ShippedOp{}, rep); }, 20);
  row.candidate_us = 1000.0 * times.first.median();
  row.shipped_us = 1000.0 * times.second.median();
  row.status = failed ? "a call failed" : "ok";
  return row;
}

//! A chunked Candidate against the shipped chunked configuration Shipped.
template <class Candidate, class Shipped>
Row compare(const char* shape_name, const Shape& s, GateMode mode) {
  return compare_ops<hawk::rglru::ChunkedForward<Candidate>, hawk::rglru::ChunkedForward<Shipped>>(
      shape_name, s, mode, config_name<Candidate>());
}

//! A sequential Candidate (ForwardConfig) against the shipped sequential configuration Shipped, which is what
//! forward() runs.
template <class Candidate, class Shipped>
Row compare_sequential(const char* shape_name, const Shape& s) {
  return compare_ops<hawk::rglru::Forward<Candidate>, hawk::rglru::Forward<Shipped>>(
      shape_name, s, Candidate::kFused ? kFused : kLogits, sequential_config_name<Candidate>());
}

//! The shipped chunked configuration Chunked as candidate against the shipped sequential configuration
//! Sequential (what forward() runs): where the chunked forward pays.
template <class Chunked, class Sequential>
Row compare_chunked_with_sequential(const char* shape_name, const Shape& s, GateMode mode) {
  return compare_ops<hawk::rglru::ChunkedForward<Chunked>, hawk::rglru::Forward<Sequential>>(
      shape_name, s, mode, "chunked against sequential: " + config_name<Chunked>());
}

template <int BlockWidth, int WidthTile, int Chunk, int SubChunk, int Threads = 256>
using Fused = ChunkedForwardConfig<Element, BlockWidth, WidthTile, Chunk, SubChunk, Threads, Policy, kFused>;
template <int WidthTile, int Chunk, int SubChunk, int Threads = 256>
using Logits = ChunkedForwardConfig<Element, 0, WidthTile, Chunk, SubChunk, Threads, Policy, kLogits>;
template <class Sequential>
using Shipped = typename hawk::rglru::DefaultChunkedConfig<Sequential>::type;
template <int BlockWidth, int WidthTile, int Threads = 256, int Stages = 2>
using Seq = hawk::rglru::ForwardConfig<Element, BlockWidth, WidthTile, hawk::rglru::kDefaultTimeChunk, Threads, Policy,
                                       kFused, Stages>;
template <int WidthTile, int Threads = 256, int Stages = 4>
using SeqLogitsCandidate = hawk::rglru::ForwardConfig<Element, 0, WidthTile, hawk::rglru::kDefaultTimeChunk, Threads,
                                                      Policy, kLogits, Stages>;

}  // namespace

int main(int argc, char** argv) {
  const Shape seed{4, 2048, 2048, 16, 40.0};       // w = 128
  const Shape small{16, 1024, 1024, 16, 30.0};     // w = 64
  const Shape prefill{1, 8192, 2560, 10, 80.0};    // w = 256 (RecurrentGemma-2B)
  using ShippedW128 = Shipped<hawk::rglru::DefaultFusedConfig<Element, 128, Policy>::type>;
  using ShippedW64 = Shipped<hawk::rglru::DefaultFusedConfig<Element, 64, Policy>::type>;
  using ShippedW256 = Shipped<hawk::rglru::DefaultFusedConfig<Element, 256, Policy>::type>;
  using ShippedLogits = Shipped<hawk::rglru::DefaultGateLogitsConfig<Element, Policy>::type>;

  using SeqW128 = hawk::rglru::DefaultFusedConfig<Element, 128, Policy>::type;
  using SeqW64 = hawk::rglru::DefaultFusedConfig<Element, 64, Policy>::type;
  using SeqW256 = hawk::rglru::DefaultFusedConfig<Element, 256, Policy>::type;

  std::vector<Row> rows;
  // The sequential forward (what forward() runs), gates in registers (block/fused_gates.cuh): candidates whose
  // smaller footprint fits 3 CTAs per SM (width tile 16 at w = 128, 32 at w = 64: 63-64 KB), more or fewer
  // producer warps now that the projection and the gate math no longer meet at a barrier, 3 stages, and more
  // CTAs for the one-sequence shape. Every one gives the shipped bits (forward_chunked_test.cu).
  rows.push_back(compare_sequential<Seq<128, 16>, SeqW128>("(4,2048,2048,16)", seed));
  rows.push_back(compare_sequential<Seq<128, 16, 128>, SeqW128>("(4,2048,2048,16)", seed));
  rows.push_back(compare_sequential<Seq<128, 32, 128>, SeqW128>("(4,2048,2048,16)", seed));
  rows.push_back(compare_sequential<Seq<128, 32, 512>, SeqW128>("(4,2048,2048,16)", seed));
  rows.push_back(compare_sequential<Seq<128, 32, 256, 3>, SeqW128>("(4,2048,2048,16)", seed));
  rows.push_back(compare_sequential<Seq<128, 64>, SeqW128>("(4,2048,2048,16)", seed));
  rows.push_back(compare_sequential<Seq<64, 32>, SeqW64>("(16,1024,1024,16)", small));
  rows.push_back(compare_sequential<Seq<64, 32, 128>, SeqW64>("(16,1024,1024,16)", small));
  rows.push_back(compare_sequential<Seq<64, 64, 512>, SeqW64>("(16,1024,1024,16)", small));
  rows.push_back(compare_sequential<Seq<256, 8, 128>, SeqW256>("(1,8192,2560,10)", prefill));
  rows.push_back(compare_sequential<Seq<256, 16, 128>, SeqW256>("(1,8192,2560,10)", prefill));
  rows.push_back(compare_sequential<Seq<256, 16, 256, 3>, SeqW256>("(1,8192,2560,10)", prefill));
  // Fused, w = 128, at the seed shape.
  rows.push_back(compare<Fused<128, 64, 128, 64>, ShippedW128>("(4,2048,2048,16)", seed, kFused));
  rows.push_back(compare<Fused<128, 32, 256, 64>, ShippedW128>("(4,2048,2048,16)", seed, kFused));
  rows.push_back(compare<Fused<128, 32, 128, 32>, ShippedW128>("(4,2048,2048,16)", seed, kFused));
  rows.push_back(compare<Fused<128, 16, 128, 32, 128>, ShippedW128>("(4,2048,2048,16)", seed, kFused));
  // Fused, w = 64.
  rows.push_back(compare<Fused<64, 32, 128, 64>, ShippedW64>("(16,1024,1024,16)", small, kFused));
  rows.push_back(compare<Fused<64, 64, 64, 64>, ShippedW64>("(16,1024,1024,16)", small, kFused));
  rows.push_back(compare<Fused<64, 64, 256, 64>, ShippedW64>("(16,1024,1024,16)", small, kFused));
  // Fused, w = 256, one long sequence.
  rows.push_back(compare<Fused<256, 64, 128, 32>, ShippedW256>("(1,8192,2560,10)", prefill, kFused));
  rows.push_back(compare<Fused<256, 32, 256, 32>, ShippedW256>("(1,8192,2560,10)", prefill, kFused));
  rows.push_back(compare<Fused<256, 32, 64, 32>, ShippedW256>("(1,8192,2560,10)", prefill, kFused));
  rows.push_back(compare<Fused<256, 32, 128, 16, 128>, ShippedW256>("(1,8192,2560,10)", prefill, kFused));
  rows.push_back(compare<Fused<128, 64, 256, 32>, ShippedW128>("(4,2048,2048,16)", seed, kFused));
  // The shipped chunked configuration against the shipped sequential one (where forward() should switch): the
  // issue-16 shapes and fewer, longer sequences, fused and gate-logits.
  const Shape longest{1, 65536, 2560, 10, 640.0};
  const Shape one_seed{1, 2048, 2048, 16, 0.0};
  const Shape two_long{2, 4096, 2560, 10, 0.0};
  const Shape four_long{4, 8192, 2560, 10, 0.0};
  const Shape eight_w128{8, 4096, 2048, 16, 0.0};
  for (const auto& [name, shape] : {std::pair<const char*, Shape>{"(4,2048,2048,16)", seed},
                                    std::pair<const char*, Shape>{"(1,2048,2048,16)", one_seed},
                                    std::pair<const char*, Shape>{"(8,4096,2048,16)", eight_w128}}) {
    rows.push_back(compare_chunked_with_sequential<ShippedW128, SeqW128>(name, shape, kFused));
  }
  rows.push_back(compare_chunked_with_sequential<ShippedW64, SeqW64>("(16,1024,1024,16)", small, kFused));
  for (const auto& [name, shape] : {std::pair<const char*, Shape>{"(1,8192,2560,10)", prefill},
                                    std::pair<const char*, Shape>{"(2,4096,2560,10)", two_long},
                                    std::pair<const char*, Shape>{"(4,8192,2560,10)", four_long},
                                    std::pair<const char*, Shape>{"(1,65536,2560,10)", longest}}) {
    rows.push_back(compare_chunked_with_sequential<ShippedW256, SeqW256>(name, shape, kFused));
  }
  using SeqLogits = hawk::rglru::DefaultGateLogitsConfig<Element, Policy>::type;
  for (const auto& [name, shape] : {std::pair<const char*, Shape>{"(4,2048,2048,16)", seed},
                                    std::pair<const char*, Shape>{"(1,8192,2560,10)", prefill},
                                    std::pair<const char*, Shape>{"(1,65536,2560,10)", longest}}) {
    rows.push_back(compare_chunked_with_sequential<ShippedLogits, SeqLogits>(name, shape, kLogits));
  }
  // Gate-logits mode, the sequential forward (what forward() runs there; 60% of copy at the seed shape, 28% at
  // one long sequence): more CTAs (width tiles of 16 and 8), more or fewer producer warps, deeper pipelines.
  for (const auto& [name, shape] : {std::pair<const char*, Shape>{"(4,2048,2048,16)", seed},
                                    std::pair<const char*, Shape>{"(16,1024,1024,16)", small},
                                    std::pair<const char*, Shape>{"(1,8192,2560,10)", prefill}}) {
    rows.push_back(compare_sequential<SeqLogitsCandidate<16, 128>, SeqLogits>(name, shape));
    rows.push_back(compare_sequential<SeqLogitsCandidate<16, 256>, SeqLogits>(name, shape));
    rows.push_back(compare_sequential<SeqLogitsCandidate<32, 256, 6>, SeqLogits>(name, shape));
    rows.push_back(compare_sequential<SeqLogitsCandidate<32, 512>, SeqLogits>(name, shape));
    rows.push_back(compare_sequential<SeqLogitsCandidate<64, 256>, SeqLogits>(name, shape));
  }
  rows.push_back(compare_sequential<SeqLogitsCandidate<8, 128>, SeqLogits>("(1,8192,2560,10)", prefill));
  // Gate-logits mode, chunked candidates.
  for (const auto& [name, shape] : {std::pair<const char*, Shape>{"(4,2048,2048,16)", seed},
                                    std::pair<const char*, Shape>{"(1,8192,2560,10)", prefill}}) {
    rows.push_back(compare<Logits<64, 128, 64>, ShippedLogits>(name, shape, kLogits));
    rows.push_back(compare<Logits<32, 256, 64>, ShippedLogits>(name, shape, kLogits));
    rows.push_back(compare<Logits<32, 128, 32>, ShippedLogits>(name, shape, kLogits));
    rows.push_back(compare<Logits<16, 128, 64>, ShippedLogits>(name, shape, kLogits));
  }

  // Bulk loads (one warp's bulk copies on transaction barriers) against every thread's cp.async, the shipped
  // chunked configurations otherwise unchanged, where forward() runs the chunked kernel and at the seed shape.
  using BulkW128 = ShippedW128::WithBulkLoads;
  using BulkW256 = ShippedW256::WithBulkLoads;
  using BulkW64 = ShippedW64::WithBulkLoads;
  rows.push_back(compare<BulkW128, ShippedW128>("(1,2048,2048,16)", one_seed, kFused));
  rows.push_back(compare<BulkW128, ShippedW128>("(4,2048,2048,16)", seed, kFused));
  rows.push_back(compare<BulkW64, ShippedW64>("(16,1024,1024,16)", small, kFused));
  rows.push_back(compare<BulkW256, ShippedW256>("(1,8192,2560,10)", prefill, kFused));
  rows.push_back(compare<BulkW256, ShippedW256>("(2,4096,2560,10)", two_long, kFused));
  rows.push_back(compare<BulkW256, ShippedW256>("(1,65536,2560,10)", longest, kFused));

#if defined(HAWK_BUILD_SM90A)
  // The Hopper chunked forward (tensor copies, wgmma; sm_90a builds) at chunks of 64, 128 and 256 tokens against
  // what forward() ran before it, at the issue-16 shapes and a few with fewer or more sequences.
  {
    using hawk::rglru::WgmmaChunkedForward;
    using hawk::rglru::WgmmaChunkedForwardConfig;
    auto wgmma_rows = [&](const char* name, const Shape& shape, auto width) {
      constexpr int w = decltype(width)::value;
      using C64 = WgmmaChunkedForwardConfig<Element, w, 64, Policy>;
      using C128 = WgmmaChunkedForwardConfig<Element, w, 128, Policy>;
      using C256 = WgmmaChunkedForwardConfig<Element, w, 256, Policy>;
      using Previous = PreviousForwardOp<typename hawk::rglru::DefaultFusedConfig<Element, w, Policy>::type>;
      rows.push_back(compare_ops<WgmmaChunkedForward<C64>, Previous>(name, shape, kFused, wgmma_config_name<C64>()));
      rows.push_back(compare_ops<WgmmaChunkedForward<C128>, Previous>(name, shape, kFused, wgmma_config_name<C128>()));
      rows.push_back(compare_ops<WgmmaChunkedForward<C256>, Previous>(name, shape, kFused, wgmma_config_name<C256>()));
      using Persistent = hawk::rglru::WgmmaPersistentForwardConfig<Element, w, Policy>;
      rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<Persistent>, Previous>(
          name, shape, kFused, "wgmma persistent against the previous forward(): Chunk 192, Threads 512, smem " +
                                   std::to_string(Persistent::kSharedBytes / 1024) + " KB"));
      // The scan-priority experiments, where the persistent kernel runs (w = 256): the producers start a ticket only
      // once the chain is done with the last (quiet), or pause while the chain scans (yield).
      if constexpr (w == 256) {
        using hawk::rglru::ScanPriority;
        using Quiet = hawk::rglru::WgmmaPersistentForwardConfig<Element, w, Policy, 144, ScanPriority::kQuiet>;
        rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<Quiet>, Previous>(
            name, shape, kFused, "wgmma persistent against the previous forward(): Chunk 192, quiet chain"));
        using Yield = hawk::rglru::WgmmaPersistentForwardConfig<Element, w, Policy, 144, ScanPriority::kYield>;
        rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<Yield>, Previous>(
            name, shape, kFused,
            "wgmma persistent against the previous forward(): Chunk 192, producers yield to the scan"));
        // The two-pass chains: the carry published after a pass that stores nothing, then h kept in the tile
        // (carry first) or y and the checkpoints stored by the chain (direct y).
        using hawk::rglru::ChainScan;
        using CarryFirst = hawk::rglru::WgmmaPersistentForwardConfig<Element, w, Policy, 144, ScanPriority::kShare,
                                                                     ChainScan::kCarryFirst>;
        rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<CarryFirst>, Previous>(
            name, shape, kFused, "wgmma persistent against the previous forward(): Chunk 192, carry first"));
        using DirectY = hawk::rglru::WgmmaPersistentForwardConfig<Element, w, Policy, 144, ScanPriority::kShare,
                                                                  ChainScan::kCarryFirstDirectY>;
        rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<DirectY>, Previous>(
            name, shape, kFused, "wgmma persistent against the previous forward(): Chunk 192, carry first, direct y"));
        // Three scan buffers (loads two batches ahead; shipped before a520f21): at the chain's 80 registers ptxas
        // then keeps every token pair's h in the same two registers; against the shipped two.
        using ThreeBuffers = hawk::rglru::WgmmaPersistentForwardConfig<Element, w, Policy, 144, ScanPriority::kShare,
                                                                       ChainScan::kKeep, 3>;
        rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<ThreeBuffers>,
                                   hawk::rglru::WgmmaPersistentForward<Persistent>>(
            name, shape, kFused, "wgmma persistent experiment against the shipped one: three scan buffers"));
        // The transfer-pair chain (not bitwise: modes.hpp's ChainScan::kTransferPair): the hop's critical path is
        // one multiply-add once the chunk's pair is known; against the shipped exact chain.
        using TransferPair = hawk::rglru::WgmmaPersistentForwardConfig<Element, w, Policy, 144, ScanPriority::kShare,
                                                                       ChainScan::kTransferPair>;
        rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<TransferPair>,
                                   hawk::rglru::WgmmaPersistentForward<Persistent>>(
            name, shape, kFused, "wgmma persistent experiment against the shipped one: transfer-pair chain"));
      }
    };
    using W64 = std::integral_constant<int, 64>;
    using W128 = std::integral_constant<int, 128>;
    using W256 = std::integral_constant<int, 256>;
    wgmma_rows("(4,2048,2048,16)", seed, W128{});
    wgmma_rows("(1,2048,2048,16)", one_seed, W128{});
    wgmma_rows("(8,4096,2048,16)", eight_w128, W128{});
    wgmma_rows("(16,1024,1024,16)", small, W64{});
    wgmma_rows("(1,8192,2560,10)", prefill, W256{});
    wgmma_rows("(2,4096,2560,10)", two_long, W256{});
    wgmma_rows("(4,8192,2560,10)", four_long, W256{});
    wgmma_rows("(1,65536,2560,10)", longest, W256{});
    // Gate-logits mode: the persistent kernel (no products; PersistentGateLogitsForwardConfig) against the
    // sequential gate-logits forward, what forward() ran there before.
    using LogitsPersistent = hawk::rglru::PersistentGateLogitsForwardConfig<Element, Policy>;
    using SeqLogitsShipped = hawk::rglru::DefaultGateLogitsConfig<Element, Policy>::type;
    for (const auto& [name, shape] : {std::pair<const char*, Shape>{"(4,2048,2048,16)", seed},
                                      std::pair<const char*, Shape>{"(16,1024,1024,16)", small},
                                      std::pair<const char*, Shape>{"(1,8192,2560,10)", prefill},
                                      std::pair<const char*, Shape>{"(1,2048,2048,16)", one_seed},
                                      std::pair<const char*, Shape>{"(2,4096,2560,10)", two_long},
                                      std::pair<const char*, Shape>{"(4,8192,2560,10)", four_long},
                                      std::pair<const char*, Shape>{"(8,4096,2048,16)", eight_w128},
                                      std::pair<const char*, Shape>{"(1,65536,2560,10)", longest}}) {
      rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<LogitsPersistent>,
                                 hawk::rglru::Forward<SeqLogitsShipped>>(
          name, shape, kLogits,
          "gate-logits persistent against sequential: Chunk 192, Threads 512, smem " +
              std::to_string(LogitsPersistent::kSharedBytes / 1024) + " KB"));
    }
    // Its experiments against it: the chain warps with 152 or 128 registers (producers 120, shipped before 3048053,
    // or 128; the shipped 144 leaves the chain 80, enough with two scan buffers: docs/PERFORMANCE_NOTES.md), and the
    // carry published after a first pass that stores nothing.
    using LogitsP120 = hawk::rglru::PersistentGateLogitsForwardConfig<Element, Policy, 120>;
    using LogitsP128 = hawk::rglru::PersistentGateLogitsForwardConfig<Element, Policy, 128>;
    using LogitsCarryFirst =
        hawk::rglru::PersistentGateLogitsForwardConfig<Element, Policy, 120, hawk::rglru::ChainScan::kCarryFirst>;
    using LogitsThreeBuffers =
        hawk::rglru::PersistentGateLogitsForwardConfig<Element, Policy, 120, hawk::rglru::ChainScan::kKeep, 3>;
    using LogitsTransferPair =
        hawk::rglru::PersistentGateLogitsForwardConfig<Element, Policy, 120, hawk::rglru::ChainScan::kTransferPair>;
    using LogitsShippedOp = hawk::rglru::WgmmaPersistentForward<LogitsPersistent>;
    for (const auto& [name, shape] : {std::pair<const char*, Shape>{"(1,8192,2560,10)", prefill},
                                      std::pair<const char*, Shape>{"(2,4096,2560,10)", two_long},
                                      std::pair<const char*, Shape>{"(4,8192,2560,10)", four_long},
                                      std::pair<const char*, Shape>{"(1,65536,2560,10)", longest},
                                      std::pair<const char*, Shape>{"(4,2048,2048,16)", seed}}) {
      rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<LogitsP120>, LogitsShippedOp>(
          name, shape, kLogits, "gate-logits persistent experiment against it: producers 120, chain 152 registers"));
      rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<LogitsP128>, LogitsShippedOp>(
          name, shape, kLogits, "gate-logits persistent experiment against it: producers 128, chain 128 registers"));
      rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<LogitsCarryFirst>, LogitsShippedOp>(
          name, shape, kLogits, "gate-logits persistent experiment against it: carry first"));
      rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<LogitsThreeBuffers>, LogitsShippedOp>(
          name, shape, kLogits, "gate-logits persistent experiment against it: three scan buffers"));
      rows.push_back(compare_ops<hawk::rglru::WgmmaPersistentForward<LogitsTransferPair>, LogitsShippedOp>(
          name, shape, kLogits, "gate-logits persistent experiment against it: transfer-pair chain"));
    }
    // The edges of forward()'s rules: sequences of 129-192 tokens on average (one chunk each: sequences_span_chunks),
    // and gate-logits grids near the three-quarter line of sequential_waves_underfilled. The sequential gate-logits
    // grid has N · W / 32 CTAs, 264 at a time on an H200 (two of 86 KB per SM): (3, 160) 240 CTAs, one wave at
    // 0.91 (sequential); (7, 4096) 560 in 3 waves at 0.71 (persistent); (13, 2048) 1040 in 4 at 0.98 (sequential).
    // The rows compare both kernels whichever forward() runs.
    const Shape short_few{3, 160, 2560, 10, 0.0};
    const Shape short_many{32, 160, 2560, 10, 0.0};  // fused: persistent at w = 256; gate-logits: sequential
    const Shape two_waves{7, 4096, 2560, 10, 0.0};
    const Shape three_waves{13, 2048, 2560, 10, 0.0};
    using FusedPersistentW256 =
        hawk::rglru::WgmmaPersistentForward<hawk::rglru::WgmmaPersistentForwardConfig<Element, 256, Policy>>;
    using PreviousW256 = PreviousForwardOp<SeqW256>;
    for (const auto& [name, shape] : {std::pair<const char*, Shape>{"(3,160,2560,10)", short_few},
                                      std::pair<const char*, Shape>{"(32,160,2560,10)", short_many}}) {
      rows.push_back(compare_ops<FusedPersistentW256, PreviousW256>(
          name, shape, kFused, "dispatch edges: wgmma persistent against the sequential forward"));
    }
    for (const auto& [name, shape] : {std::pair<const char*, Shape>{"(3,160,2560,10)", short_few},
                                      std::pair<const char*, Shape>{"(7,4096,2560,10)", two_waves},
                                      std::pair<const char*, Shape>{"(13,2048,2560,10)", three_waves}}) {
      rows.push_back(compare_ops<LogitsShippedOp, hawk::rglru::Forward<SeqLogitsShipped>>(
          name, shape, kLogits, "dispatch edges: gate-logits persistent against sequential"));
    }
  }
#endif

  rows.erase(std::remove_if(rows.begin(), rows.end(), [](const Row& r) { return r.status == kNotSelected; }),
             rows.end());

  cudaDeviceProp properties{};
  BENCH_CUDA(cudaGetDeviceProperties(&properties, 0));
  const char* commit = std::getenv("HAWK_COMMIT");
  std::string json = "{\n  \"benchmark\": \"rglru_forward_config_sweep\",\n  \"gpu\": \"" + std::string(properties.name) +
                     "\",\n  \"commit\": \"" + (commit ? commit : "unknown") +
                     "\",\n  \"protocol\": \"bf16, ResetAtSequenceStart, forward only; medians of 20 samples of 20 "
                     "calls, AB/BA against the shipped configuration of the same kind (sequential or chunked; a "
                     "candidate named 'X against Y' runs against Y)\",\n";
  if (const char* filter = std::getenv("HAWK_SWEEP_FILTER")) json += "  \"filter\": \"" + std::string(filter) + "\",\n";
  json += "  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    json += "    {\"shape\": \"" + r.shape + "\", \"mode\": \"" + r.mode + "\", \"candidate\": \"" + r.config +
            "\", \"candidate_us\": " + number(r.candidate_us) + ", \"shipped_us\": " + number(r.shipped_us) +
            ", \"status\": \"" + r.status + "\"}" + (i + 1 < rows.size() ? ",\n" : "\n");
  }
  json += "  ]\n}\n";
  std::fputs(json.c_str(), stdout);
  if (argc > 1) {
    if (FILE* f = std::fopen(argv[1], "w")) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  std::fprintf(stderr, "%-18s %-11s %-80s %10s %10s %7s\n", "shape", "mode", "candidate", "cand. us", "shipped us",
               "ratio");
  for (const Row& r : rows)
    std::fprintf(stderr, "%-18s %-11s %-80s %10.1f %10.1f %7.2f %s\n", r.shape.c_str(), r.mode.c_str(),
                 r.config.c_str(), r.candidate_us, r.shipped_us, r.candidate_us > 0 ? r.shipped_us / r.candidate_us : 0.0,
                 r.status == "ok" ? "" : r.status.c_str());
  return 0;
}
