// RG-LRU benchmark (issue 4): the forward through the default dispatch, bf16, at the shapes of GPU.md, fused
// and gate-logits, canonical (ResetAtSequenceStart) and restricted (NoReset, no h0: Fattori's contract), plus
// decode (256 sequences, W = 2560, H = 10, one token from a state pool, in place). The gate-logits rows are
// compared with a device-to-device copy of the same bytes (x, gx, ga read, y written) timed in the same run.
//
// Protocol: CUDA events; warm-up; every sample is the mean of `reps` back-to-back calls; two rounds in AB/BA
// order (the measured operation and its copy baseline alternate which goes first); inputs and outputs rotated
// over enough buffer sets to exceed the 60 MB L2; inputs random on the device (never zeros).
// JSON (seed 000 schema: samples, median/min/max/mean, rounds, peak memory) to stdout and to argv[1] if given;
// a short table last, on stderr.
//
// Structure: one function per measurement (`measure_forward`, `measure_copy`), one row builder per kind of row;
// the backward appends its own section (`backward_rows`) next to `forward_rows` in main().

#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "bench_rglru_support.cuh"
#include "hawk/rglru/rglru.cuh"

namespace {

using namespace rglru_bench;

// ---- measurements ----------------------------------------------------------------------------------------------

struct Measurement {
  Samples op, copy;
  std::size_t peak_bytes = 0;
  std::size_t bytes_moved = 0;  // bytes the operation must move (gate-logits: x, gx, ga read + y written)
};

//! The forward at one shape, mode and contract, against a copy of the bytes it must move.
//! `checked`: the device checks of state_index on (decode rows only), as a serving engine that keeps them runs.
Measurement measure_forward(const Shape& s, GateMode mode, ResetMode reset_mode, bool with_h0, bool decode,
                            bool checked = false) {
  const std::int64_t state_rows = decode ? 2 * s.B : s.B;
  std::size_t free_before = 0, free_after = 0, total = 0;
  BENCH_CUDA(cudaMemGetInfo(&free_before, &total));
  ForwardBuffers b = make_buffers(s, mode, state_rows);
  const std::size_t tokens = static_cast<std::size_t>(s.B * s.L * s.W);
  Measurement m;
  m.bytes_moved = tokens * sizeof(Element) * (mode == GateMode::kGateLogits ? 4 : 2);
  // The copy baseline: half the moved bytes read and written (so it moves the same total).
  thrust::device_vector<unsigned char> copy_dst(m.bytes_moved / 2);
  std::vector<thrust::device_vector<unsigned char>> copy_sources;
  for (int i = 0; i < b.sets; ++i) copy_sources.emplace_back(m.bytes_moved / 2, static_cast<unsigned char>(i + 1));
  BENCH_CUDA(cudaDeviceSynchronize());
  BENCH_CUDA(cudaMemGetInfo(&free_after, &total));
  // Device memory this measurement holds (buffer sets of the operation and of its copy baseline).
  m.peak_bytes = free_before > free_after ? free_before - free_after : b.bytes;

  bool failed = false;
  thrust::device_vector<unsigned char> workspace;
  auto args_of = [&](int set) {
    ForwardArguments a = arguments(s, mode, reset_mode, with_h0, decode, b, set, state_rows);
    a.shape.validate_device_inputs = checked;
    return a;
  };
  workspace.resize(std::max<std::size_t>(1, hawk::rglru::forward_workspace_size(args_of(0))));
  if (checked) {  // the slots must pass the checks, or the timed calls would time kernels that write nothing
    ForwardArguments a = args_of(0);
    a.shape.wait_for_device_checks = true;
    const hawk::Status verdict = hawk::rglru::decode(a, raw(workspace), workspace.size(), nullptr);
    if (!verdict.ok()) {
      std::fprintf(stderr, "checked decode failed: %s\n", verdict.to_string().c_str());
      std::exit(1);
    }
  }
  auto op = [&](int rep) {
    const int set = rep % b.sets;
    const ForwardArguments a = args_of(set);
    // Decode rows go through hawk::rglru::decode, as a serving engine would (one token per sequence: DecodeStep).
    // Checked rows run the device checks (a small kernel and a memset; no synchronisation).
    const hawk::Status status = decode ? hawk::rglru::decode(a, raw(workspace), workspace.size(), nullptr)
                                       : hawk::rglru::forward(a, raw(workspace), workspace.size(), nullptr);
    if (!status.ok() && !failed) {
      std::fprintf(stderr, "%s failed: %s\n", decode ? "decode" : "forward", status.to_string().c_str());
      failed = true;
    }
  };
  auto copy = [&](int rep) {
    const int set = rep % b.sets;
    BENCH_CUDA(cudaMemcpyAsync(raw(copy_dst), raw(copy_sources[static_cast<std::size_t>(set)]), m.bytes_moved / 2,
                               cudaMemcpyDeviceToDevice, nullptr));
  };
  const int reps = decode ? 200 : 20;
  auto timed = time_ab(op, copy, reps);
  if (failed) std::exit(1);
  m.op = timed.first;
  m.copy = timed.second;
  return m;
}

// ---- rows ------------------------------------------------------------------------------------------------------

struct TableLine {
  std::string name;
  double median_us, target_us, gbps, copy_fraction;
  bool met;
};

std::string forward_row(const char* implementation, const Shape& s, GateMode mode, const char* contract,
                        const Measurement& m, double target_us, double target_copy_fraction,
                        std::vector<TableLine>& table) {
  const double median_ms = m.op.median();
  const double gbps = m.bytes_moved / (median_ms * 1e-3) / 1e9;
  const double copy_gbps = m.bytes_moved / (m.copy.median() * 1e-3) / 1e9;
  const double fraction = gbps / copy_gbps;
  bool met = true;
  if (target_us > 0) met = met && median_ms * 1e3 <= target_us;
  if (target_copy_fraction > 0) met = met && fraction >= target_copy_fraction;
  const bool has_target = target_us > 0 || target_copy_fraction > 0;
  std::ostringstream row;
  row << "{\"implementation\": \"" << implementation << "\", \"dtype\": \"bf16\", \"mode\": \""
      << (mode == GateMode::kFused ? "fused" : "gate_logits") << "\", \"contract\": \"" << contract
      << "\", \"shape\": {\"batch\": " << s.B << ", \"length\": " << s.L << ", \"width\": " << s.W
      << ", \"heads\": " << s.H << "}, \"forward\": " << samples_json(m.op)
      << ", \"rounds\": " << rounds_json(m.op, "forward_ms")
      << ", \"copy_same_bytes\": " << samples_json(m.copy) << ", \"copy_rounds\": " << rounds_json(m.copy, "copy_ms")
      << ", \"bytes_moved\": " << m.bytes_moved << ", \"gbps\": " << number(gbps) << ", \"copy_gbps\": "
      << number(copy_gbps) << ", \"fraction_of_copy\": " << number(fraction)
      << ", \"peak_allocated_delta_bytes\": " << m.peak_bytes;
  if (target_us > 0) row << ", \"target_us\": " << number(target_us);
  if (target_copy_fraction > 0) row << ", \"target_fraction_of_copy\": " << number(target_copy_fraction);
  if (has_target) row << ", \"target_met\": " << (met ? "true" : "false");
  row << "}";
  char name[160];
  std::snprintf(name, sizeof(name), "%s %s (%lld,%lld,%lld,%lld)", mode == GateMode::kFused ? "fused" : "logits",
                contract, static_cast<long long>(s.B), static_cast<long long>(s.L), static_cast<long long>(s.W),
                static_cast<long long>(s.H));
  table.push_back({name, median_ms * 1e3, target_us, gbps, fraction, has_target ? met : true});
  return row.str();
}

//! Every forward row of issue 4.
std::vector<std::string> forward_rows(std::vector<TableLine>& table) {
  // Fused targets of issue 16 (the chunked forward); (1, 65536, 2560, 10) is one long RecurrentGemma-2B sequence.
  const Shape shapes[] = {{4, 2048, 2048, 16, 40.0},
                          {1, 8192, 2560, 10, 80.0},
                          {16, 1024, 1024, 16, 30.0},
                          {1, 65536, 2560, 10, 640.0}};
  std::vector<std::string> rows;
  for (const Shape& s : shapes) {
    for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
      const bool fused = mode == GateMode::kFused;
      const auto canonical = measure_forward(s, mode, ResetMode::kSequenceStart, false, false);
      rows.push_back(forward_row("hawk_canonical", s, mode, "canonical (reset at t=0)", canonical,
                                 fused ? s.fused_target_us : 0, fused ? 0 : 0.85, table));
      const auto restricted = measure_forward(s, mode, ResetMode::kNone, false, false);
      rows.push_back(forward_row("hawk_restricted", s, mode, "restricted (no reset, no h0)", restricted,
                                 fused ? s.fused_target_us : 0, fused ? 0 : 0.85, table));
    }
  }
  // Decode: 256 sequences, one token each, state pool of 512 rows updated in place through state_index.
  const Shape decode{256, 1, 2560, 10, 0.0};
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    const auto m = measure_forward(decode, mode, ResetMode::kNone, true, true);
    rows.push_back(forward_row("hawk_decode", decode, mode, "decode (L=1, state pool, in place)", m, 0, 0, table));
    // The same with the device checks of state_index on (range, padding, duplicate slots): their cost.
    const auto checked = measure_forward(decode, mode, ResetMode::kNone, true, true, true);
    rows.push_back(forward_row("hawk_decode_checked", decode, mode, "decode, device checks on", checked, 0, 0, table));
  }
  return rows;
}

// ---- forward + backward (issue 5; added by the backward's owner) --------------------------------------------------
//
// fwd+bwd = forward with checkpoints + hawk::rglru::backward (dy given, no dh_final), timed AB/BA against the
// forward alone (also with checkpoints) in the same run. peak_allocated_delta_bytes = what one training step
// allocates beyond its inputs (x, gx/ga or the weights, dy): y, the checkpoints, the final state, dx (dgx, dga),
// the parameter gradients and the backward's workspace (fused: 12·T·W bytes of fp32 gate gradients + partials).

struct BackwardBuffers {
  std::vector<thrust::device_vector<Element>> dy, dx, dgx, dga;
  thrust::device_vector<float> checkpoints, dWx, dbx, dWa, dba, da_param;
  thrust::device_vector<unsigned char> workspace;
};

std::string forward_backward_rounds_json(const Samples& forward, const Samples& both) {
  std::string out = "[";
  for (std::size_t r = 0; r < both.rounds.size(); ++r)
    out += std::string(r ? ", " : "") + "{\"round\": " + std::to_string(r) + ", \"order_index\": " +
           std::to_string(both.order_index[r]) + ", \"forward_ms\": " + list(forward.rounds[r]) +
           ", \"forward_backward_ms\": " + list(both.rounds[r]) + "}";
  return out + "]";
}

std::string backward_row(const Shape& s, GateMode mode, ResetMode reset_mode, double target_us,
                         std::vector<TableLine>& table) {
  const bool fused = mode == GateMode::kFused;
  const bool canonical = reset_mode == ResetMode::kSequenceStart;
  const std::int64_t T = s.B * s.L, w = s.W / s.H;
  ForwardBuffers b = make_buffers(s, mode, s.B);
  BackwardBuffers g;
  std::uint64_t seed = 1000;
  for (int i = 0; i < b.sets; ++i) {
    g.dy.push_back(random_buffer<Element>(T * s.W, -1.0f, 1.0f, seed++));
    g.dx.emplace_back(static_cast<std::size_t>(T * s.W));
    if (!fused) {
      g.dgx.emplace_back(static_cast<std::size_t>(T * s.W));
      g.dga.emplace_back(static_cast<std::size_t>(T * s.W));
    }
  }
  const std::int64_t chunk = hawk::rglru::kDefaultTimeChunk;
  g.checkpoints.resize(static_cast<std::size_t>(hawk::rglru::checkpoint_rows(T, s.B, chunk) * s.W));
  if (fused) {
    g.dWx.resize(static_cast<std::size_t>(s.H * w * w));
    g.dWa.resize(static_cast<std::size_t>(s.H * w * w));
    g.dbx.resize(static_cast<std::size_t>(s.W));
    g.dba.resize(static_cast<std::size_t>(s.W));
  }
  g.da_param.resize(static_cast<std::size_t>(s.W));

  auto forward_args = [&](int set) {
    ForwardArguments a = arguments(s, mode, reset_mode, false, false, b, set, s.B);
    a.checkpoints = raw(g.checkpoints);
    a.checkpoint_chunk = chunk;
    return a;
  };
  auto backward_args = [&](int set) {
    hawk::rglru::BackwardArguments a = hawk::rglru::backward_arguments_for(forward_args(set));
    a.dy = raw(g.dy[static_cast<std::size_t>(set)]);
    a.dx = raw(g.dx[static_cast<std::size_t>(set)]);
    if (fused) {
      a.dWx = raw(g.dWx);
      a.dbx = raw(g.dbx);
      a.dWa = raw(g.dWa);
      a.dba = raw(g.dba);
    } else {
      a.dgx = raw(g.dgx[static_cast<std::size_t>(set)]);
      a.dga = raw(g.dga[static_cast<std::size_t>(set)]);
    }
    a.da_param = raw(g.da_param);
    return a;
  };
  const std::size_t workspace_bytes = hawk::rglru::backward_workspace_size(backward_args(0));
  g.workspace.resize(workspace_bytes);
  // The chunked forward's carries (and device checks) need their own workspace; the same size for every set.
  thrust::device_vector<unsigned char> forward_workspace(
      std::max<std::size_t>(1, hawk::rglru::forward_workspace_size(forward_args(0))));

  bool failed = false;
  auto report = [&](const hawk::Status& status, const char* what) {
    if (!status.ok() && !failed) {
      std::fprintf(stderr, "%s failed: %s\n", what, status.to_string().c_str());
      failed = true;
    }
  };
  auto forward_only = [&](int rep) {
    report(hawk::rglru::forward(forward_args(rep % b.sets), raw(forward_workspace), forward_workspace.size(), nullptr),
           "forward");
  };
  // One training step whose backward gets `backward_bytes` of workspace (below the one-pass size: time slices).
  auto step = [&](int rep, std::size_t backward_bytes) {
    const int set = rep % b.sets;
    report(hawk::rglru::forward(forward_args(set), raw(forward_workspace), forward_workspace.size(), nullptr),
           "forward");
    report(hawk::rglru::backward(backward_args(set), raw(g.workspace), backward_bytes, nullptr), "backward");
  };
  auto forward_backward = [&](int rep) { step(rep, g.workspace.size()); };
  auto timed = time_ab(forward_backward, forward_only, 10);
  if (failed) std::exit(1);
  const Samples& both = timed.first;
  const Samples& forward = timed.second;

  // Canonical fused rows of one long sequence: forward+backward again with the least workspace the backward takes
  // (time slices of 1024 tokens; the same bits, less memory), AB/BA against the one-pass workspace.
  const std::size_t least_bytes = hawk::rglru::backward_min_workspace_size(backward_args(0));
  std::pair<Samples, Samples> least;
  if (canonical && least_bytes < workspace_bytes) {
    least = time_ab([&](int rep) { step(rep, least_bytes); }, forward_backward, s.L * s.B > 100000 ? 2 : 10);
    if (failed) std::exit(1);
  }
  // And with half the one-pass workspace: the longest slices that holds (backward_time_slice_tokens), AB/BA against
  // the least workspace.
  const std::size_t half_bytes = workspace_bytes / 2;
  const std::int64_t half_slice_tokens = hawk::rglru::backward_time_slice_tokens(backward_args(0), half_bytes);
  std::pair<Samples, Samples> half;
  if (!least.first.rounds.empty() && half_bytes > least_bytes) {
    half = time_ab([&](int rep) { step(rep, half_bytes); }, [&](int rep) { step(rep, least_bytes); },
                   s.L * s.B > 100000 ? 2 : 10);
    if (failed) std::exit(1);
  }

  // Canonical rows: the backward alone through its two scan kernels, chunked against sequential (AB/BA; the same
  // bits, so only the time differs), through the configuration the default dispatch picks.
  std::pair<Samples, Samples> scans;
  if (canonical) {
    report(hawk::rglru::detail::visit_default_backward_config(backward_args(0), [&](auto config, auto) -> hawk::Status {
             using Chunked = hawk::rglru::Backward<decltype(config), hawk::rglru::BackwardScan::kChunked>;
             using Sequential = hawk::rglru::Backward<decltype(config), hawk::rglru::BackwardScan::kSequential>;
             scans = time_ab(
                 [&](int rep) {
                   report(Chunked::run(backward_args(rep % b.sets), raw(g.workspace), g.workspace.size(), nullptr),
                          "chunked backward");
                 },
                 [&](int rep) {
                   report(Sequential::run(backward_args(rep % b.sets), raw(g.workspace), g.workspace.size(), nullptr),
                          "sequential backward");
                 },
                 s.L * s.B > 100000 ? 2 : 10);
             return hawk::Status::success();
           }),
           "backward scans");
    if (failed) std::exit(1);
  }

  const std::size_t rows_bytes = static_cast<std::size_t>(T * s.W) * sizeof(Element);
  const std::size_t checkpoint_bytes = g.checkpoints.size() * sizeof(float);
  const std::size_t param_grad_bytes = (g.dWx.size() + g.dWa.size() + g.dbx.size() + g.dba.size() + g.da_param.size()) * 4;
  const std::size_t peak = rows_bytes * (fused ? 2 : 4) /* y, dx (, dgx, dga) */ + checkpoint_bytes +
                           static_cast<std::size_t>(s.B * s.W) * 4 /* final state */ + param_grad_bytes + workspace_bytes;
  // Bytes a fused forward+backward must move at least: x, y (forward); x, dy read, dx written (backward).
  // Gate-logits: x, gx, ga, y; x, gx, ga, dy, dx, dgx, dga.
  const std::size_t bytes_moved = rows_bytes * (fused ? 5 : 11);
  const double median_ms = both.median();
  const bool met = target_us <= 0 || median_ms * 1e3 <= target_us;

  std::ostringstream row;
  row << "{\"implementation\": \"" << (canonical ? "hawk_canonical" : "hawk_restricted")
      << "\", \"dtype\": \"bf16\", \"mode\": \"" << (fused ? "fused" : "gate_logits") << "\", \"contract\": \""
      << (canonical ? "canonical (reset at t=0)" : "restricted (no reset, no h0)") << "\", \"shape\": {\"batch\": " << s.B
      << ", \"length\": " << s.L << ", \"width\": " << s.W << ", \"heads\": " << s.H
      << "}, \"forward\": " << samples_json(forward) << ", \"forward_backward\": " << samples_json(both)
      << ", \"rounds\": " << forward_backward_rounds_json(forward, both)
      << ", \"peak_allocated_delta_bytes\": " << peak << ", \"backward_workspace_bytes\": " << workspace_bytes
      << ", \"checkpoint_bytes\": " << checkpoint_bytes << ", \"bytes_moved_forward_backward\": " << bytes_moved
      << ", \"gbps_forward_backward\": " << number(bytes_moved / (median_ms * 1e-3) / 1e9);
  if (target_us > 0)
    row << ", \"target_forward_backward_us\": " << number(target_us) << ", \"target_met\": " << (met ? "true" : "false");
  if (!least.first.rounds.empty())
    row << ", \"backward_min_workspace_bytes\": " << least_bytes
        << ", \"forward_backward_min_workspace\": " << samples_json(least.first)
        << ", \"forward_backward_against_min_workspace\": " << samples_json(least.second);
  if (!half.first.rounds.empty())
    row << ", \"backward_half_workspace_bytes\": " << half_bytes
        << ", \"backward_half_workspace_slice_tokens\": " << half_slice_tokens
        << ", \"forward_backward_half_workspace\": " << samples_json(half.first)
        << ", \"forward_backward_min_workspace_against_half\": " << samples_json(half.second);
  if (canonical)
    row << ", \"backward_chunked_scan\": " << samples_json(scans.first)
        << ", \"backward_sequential_scan\": " << samples_json(scans.second);
  row << "}";
  char name[160];
  std::snprintf(name, sizeof(name), "fwd+bwd %s %s (%lld,%lld,%lld,%lld)", fused ? "fused" : "logits",
                canonical ? "canonical" : "restricted", static_cast<long long>(s.B), static_cast<long long>(s.L),
                static_cast<long long>(s.W), static_cast<long long>(s.H));
  table.push_back({name, median_ms * 1e3, target_us, bytes_moved / (median_ms * 1e-3) / 1e9, 0.0, met});
  if (!least.first.rounds.empty()) {
    std::snprintf(name, sizeof(name), "fwd+bwd fused, least workspace (%.1f MB) (%lld,%lld,%lld,%lld)",
                  least_bytes / 1e6, static_cast<long long>(s.B), static_cast<long long>(s.L),
                  static_cast<long long>(s.W), static_cast<long long>(s.H));
    table.push_back({name, least.first.median() * 1e3, 0.0, 0.0, 0.0, true});
  }
  if (!half.first.rounds.empty()) {
    std::snprintf(name, sizeof(name), "fwd+bwd fused, half workspace (%.1f MB, slices of %lld) (%lld,%lld,%lld,%lld)",
                  half_bytes / 1e6, static_cast<long long>(half_slice_tokens), static_cast<long long>(s.B),
                  static_cast<long long>(s.L), static_cast<long long>(s.W), static_cast<long long>(s.H));
    table.push_back({name, half.first.median() * 1e3, 0.0, 0.0, 0.0, true});
  }
  if (canonical) {
    std::snprintf(name, sizeof(name), "bwd alone %s chunked scan (%lld,%lld,%lld,%lld)", fused ? "fused" : "logits",
                  static_cast<long long>(s.B), static_cast<long long>(s.L), static_cast<long long>(s.W),
                  static_cast<long long>(s.H));
    table.push_back({name, scans.first.median() * 1e3, 0.0, 0.0, 0.0, true});
    std::snprintf(name, sizeof(name), "bwd alone %s sequential scan (%lld,%lld,%lld,%lld)",
                  fused ? "fused" : "logits", static_cast<long long>(s.B), static_cast<long long>(s.L),
                  static_cast<long long>(s.W), static_cast<long long>(s.H));
    table.push_back({name, scans.second.median() * 1e3, 0.0, 0.0, 0.0, true});
  }
  return row.str();
}

//! Every forward+backward row of issues 5 and 17 (targets: bf16 fused, both contracts).
std::vector<std::string> backward_rows(std::vector<TableLine>& table) {
  // Fused targets of issue 17 (the chunked backward); (1, 65536, 2560, 10) canonical only (each call is milliseconds).
  const Shape shapes[] = {{4, 2048, 2048, 16, 250.0},
                          {1, 8192, 2560, 10, 600.0},
                          {16, 1024, 1024, 16, 200.0},
                          {1, 65536, 2560, 10, 4500.0}};
  std::vector<std::string> rows;
  for (const Shape& s : shapes)
    for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits})
      for (ResetMode reset_mode : {ResetMode::kSequenceStart, ResetMode::kNone})
        if (s.L < 65536 || reset_mode == ResetMode::kSequenceStart)
          rows.push_back(
              backward_row(s, mode, reset_mode, mode == GateMode::kFused ? s.fused_target_us : 0.0, table));
  return rows;
}

// ---- end of the forward + backward section ------------------------------------------------------------------------

std::string today() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof(text), "%Y-%m-%d", std::gmtime(&now));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp properties{};
  BENCH_CUDA(cudaGetDeviceProperties(&properties, 0));
  const char* commit = std::getenv("HAWK_COMMIT");

  std::vector<TableLine> table;
  std::vector<std::string> rows = forward_rows(table);
  // The backward section (fwd+bwd timing) appends its rows here; HAWK_BENCH_FORWARD_ONLY=1 leaves it out (a
  // quick look at the forward).
  const char* forward_only = std::getenv("HAWK_BENCH_FORWARD_ONLY");
  if (forward_only == nullptr || std::string(forward_only) != "1")
    for (std::string& row : backward_rows(table)) rows.push_back(std::move(row));

  std::ostringstream json;
  json << "{\n  \"schema_version\": 1,\n  \"benchmark\": \"rglru\",\n  \"gpu\": \"" << properties.name
       << "\",\n  \"date\": \"" << today() << "\",\n  \"commit\": \"" << (commit ? commit : "unknown")
       << "\",\n  \"protocol\": {\"timing\": \"CUDA events; each sample the mean of back-to-back calls (20, decode "
          "200); "
       << kWarmup << " warm-up calls; " << kRounds << " rounds x " << kSamplesPerRound
       << " samples in AB/BA order against a device-to-device copy of the same bytes\", \"inputs\": \"random on the "
          "device, rotated over sets of buffers larger than twice the L2\", \"dtype\": \"bf16 x/y, fp32 gate math "
          "and carry\", \"dispatch\": \"hawk::rglru::forward (default configurations)\", \"order\": \"AB/BA\"},\n"
          "  \"rows\": [\n";
  for (std::size_t i = 0; i < rows.size(); ++i) json << "    " << rows[i] << (i + 1 < rows.size() ? ",\n" : "\n");
  json << "  ]\n}\n";
  const std::string text = json.str();
  std::fputs(text.c_str(), stdout);
  if (argc > 1) {
    if (FILE* f = std::fopen(argv[1], "w")) {
      std::fputs(text.c_str(), f);
      std::fclose(f);
    }
  }
  std::fprintf(stderr, "\n%-58s %10s %10s %9s %8s %s\n", "rglru forward (bf16)", "median_us", "target_us", "GB/s",
               "of_copy", "met");
  for (const auto& line : table)
    std::fprintf(stderr, "%-58s %10.1f %10s %9.0f %8.2f %s\n", line.name.c_str(), line.median_us,
                 line.target_us > 0 ? number(line.target_us).c_str() : "-", line.gbps, line.copy_fraction,
                 line.met ? "yes" : "NO");
  return 0;
}
