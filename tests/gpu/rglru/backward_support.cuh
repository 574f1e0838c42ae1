#pragma once
// Shared by the RG-LRU backward tests: upstream gradients, device buffers for the backward's outputs, one
// forward (with checkpoints) + backward call through an explicit configuration or the default dispatch, and the
// comparison with the float64 reference fed exactly the rounded inputs. Builds on support.cuh.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "support.cuh"
#include "hawk/rglru/operators/backward.cuh"
#include "hawk/rglru/backward_dispatch.cuh"

namespace rglru_backward_test {

using hawk::rglru::BackwardArguments;
using hawk::rglru::GateMode;
using hawk::rglru::ResetMode;
using rglru_test::DeviceProblem;
using rglru_test::Problem;

//! The shipped forward configuration for (E, Policy, Mode, w); the backward under test is the shipped one paired
//! with it, DefaultBackwardConfig<it>::type (BackwardConfig<it> but for 16-bit w = 256's wider scan tiles).
template <class E, class Policy, GateMode Mode, int BlockWidth>
using ShippedForward =
    typename std::conditional<Mode == GateMode::kFused, hawk::rglru::DefaultFusedConfig<E, BlockWidth, Policy>,
                              hawk::rglru::DefaultGateLogitsConfig<E, Policy>>::type::type;

//! True under compute-sanitizer (bench/run-on-gpu.sh --sanitize): the longest cases are skipped there.
inline bool sanitizing() { return std::getenv("HAWK_SANITIZE") != nullptr; }

//! dy [T, W] (rounded to E) and dh_final [N, W] (fp32; empty = absent).
struct Upstream {
  std::vector<double> dy, dh_final;
};

template <class E>
Upstream make_upstream(const Problem& p, bool with_dh_final) {
  const auto T = static_cast<std::size_t>(p.num_tokens());
  const auto W = static_cast<std::size_t>(p.width);
  const auto N = static_cast<std::size_t>(p.num_sequences());
  Upstream u;
  u.dy = hawk_test::quantize<E>(hawk_test::random_uniform(T * W, -1.0, 1.0, hawk_test::fresh_seed()));
  if (with_dh_final)
    u.dh_final = hawk_test::quantize<float>(hawk_test::random_uniform(N * W, -1.0, 1.0, hawk_test::fresh_seed()));
  return u;
}

//! The gradients of a finished backward, as doubles, and their raw device bytes (for bitwise comparisons).
struct HostGradients {
  std::vector<double> dx, dgx, dga, dWx, dbx, dWa, dba, da_param, dh0;
  std::vector<unsigned char> dx_bytes, dgx_bytes, dga_bytes, dWx_bytes, dbx_bytes, dWa_bytes, dba_bytes,
      da_param_bytes, dh0_bytes;

  //! Every gradient's bytes, in a fixed order (the row gradients first).
  std::vector<unsigned char> all_bytes() const {
    std::vector<unsigned char> all;
    for (const auto* part : {&dx_bytes, &dgx_bytes, &dga_bytes, &dh0_bytes, &dWx_bytes, &dbx_bytes, &dWa_bytes,
                             &dba_bytes, &da_param_bytes})
      all.insert(all.end(), part->begin(), part->end());
    return all;
  }
};

//! The backward's inputs and outputs on the device, outputs poisoned (all-ones bytes = NaN).
template <class E>
struct DeviceGradients {
  thrust::device_vector<E> dy, dx, dgx, dga;
  thrust::device_vector<float> dh_final, dWx, dbx, dWa, dba, da_param, dh0;
  thrust::device_vector<unsigned char> workspace;
  bool with_dh0 = true;

  DeviceGradients(const Problem& p, const Upstream& u, bool want_dh0 = true) : with_dh0(want_dh0) {
    const auto T = static_cast<std::size_t>(p.num_tokens());
    const auto W = static_cast<std::size_t>(p.width);
    const auto N = static_cast<std::size_t>(p.num_sequences());
    const auto w = static_cast<std::size_t>(p.block_width());
    const auto H = static_cast<std::size_t>(p.num_blocks);
    dy = hawk_test::to_device<E>(u.dy);
    if (!u.dh_final.empty()) dh_final = hawk_test::to_device<float>(u.dh_final);
    dx.resize(T * W);
    if (p.mode == GateMode::kGateLogits) {
      dgx.resize(T * W);
      dga.resize(T * W);
    } else {
      dWx.resize(H * w * w);
      dWa.resize(H * w * w);
      dbx.resize(W);
      dba.resize(W);
    }
    da_param.resize(W);
    if (want_dh0) dh0.resize(N * W);
    for (auto* v : {&dx, &dgx, &dga}) hawk_test::poison(*v);
    for (auto* v : {&dWx, &dbx, &dWa, &dba, &da_param, &dh0}) hawk_test::poison(*v);
  }

  //! Backward arguments for the forward `d` just ran (its checkpoints).
  BackwardArguments arguments(const Problem& p, DeviceProblem<E>& d) {
    BackwardArguments a = hawk::rglru::backward_arguments_for(d.arguments(p));
    a.dy = hawk_test::raw(dy);
    a.dh_final = dh_final.empty() ? nullptr : hawk_test::raw(dh_final);
    a.dx = hawk_test::raw(dx);
    if (p.mode == GateMode::kGateLogits) {
      a.dgx = hawk_test::raw(dgx);
      a.dga = hawk_test::raw(dga);
    } else {
      a.dWx = hawk_test::raw(dWx);
      a.dbx = hawk_test::raw(dbx);
      a.dWa = hawk_test::raw(dWa);
      a.dba = hawk_test::raw(dba);
    }
    a.da_param = hawk_test::raw(da_param);
    a.dh0 = with_dh0 ? hawk_test::raw(dh0) : nullptr;
    return a;
  }

  HostGradients download() const {
    HostGradients h;
    h.dx = hawk_test::to_host(dx);
    h.dgx = hawk_test::to_host(dgx);
    h.dga = hawk_test::to_host(dga);
    h.dWx = hawk_test::to_host(dWx);
    h.dbx = hawk_test::to_host(dbx);
    h.dWa = hawk_test::to_host(dWa);
    h.dba = hawk_test::to_host(dba);
    h.da_param = hawk_test::to_host(da_param);
    h.dh0 = hawk_test::to_host(dh0);
    h.dx_bytes = hawk_test::bytes_of(dx);
    h.dgx_bytes = hawk_test::bytes_of(dgx);
    h.dga_bytes = hawk_test::bytes_of(dga);
    h.dWx_bytes = hawk_test::bytes_of(dWx);
    h.dbx_bytes = hawk_test::bytes_of(dbx);
    h.dWa_bytes = hawk_test::bytes_of(dWa);
    h.dba_bytes = hawk_test::bytes_of(dba);
    h.da_param_bytes = hawk_test::bytes_of(da_param);
    h.dh0_bytes = hawk_test::bytes_of(dh0);
    return h;
  }
};

//! Run Backward<DefaultBackwardConfig<ForwardConfig>::type, Scan> (or the default dispatch when ForwardConfig is
//! void) with the workspace it asks for (`least`: the least it accepts, which takes time slices where it can),
//! and wait.
template <class ForwardConfig, hawk::rglru::BackwardScan Scan = hawk::rglru::BackwardScan::kAuto>
hawk::Status run_backward(const BackwardArguments& args, thrust::device_vector<unsigned char>& workspace,
                          bool least = false) {
  hawk::Status status;
  if constexpr (std::is_void<ForwardConfig>::value) {
    static_assert(Scan == hawk::rglru::BackwardScan::kAuto, "run_backward: the default dispatch chooses its scan");
    workspace.resize((least ? hawk::rglru::backward_min_workspace_size(args)
                            : hawk::rglru::backward_workspace_size(args)) + 1);
    status = hawk::rglru::backward(args, hawk_test::raw(workspace), workspace.size(), nullptr);
  } else {
    using Op = hawk::rglru::Backward<typename hawk::rglru::DefaultBackwardConfig<ForwardConfig>::type, Scan>;
    workspace.resize((least ? Op::min_workspace_size(args) : Op::workspace_size(args)) + 1);
    status = Op::run(args, hawk_test::raw(workspace), workspace.size(), nullptr);
  }
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  return status;
}

//! Backward<BackwardConfig, Scan> of `p` with upstream `u` after the forward `d` just ran (its checkpoints), into
//! fresh poisoned outputs; the call must succeed. Returns every gradient (for bitwise comparisons between
//! configurations).
template <class BackwardConfig, hawk::rglru::BackwardScan Scan, class E>
HostGradients run_backward_config(const Problem& p, const Upstream& u, DeviceProblem<E>& d) {
  DeviceGradients<E> g(p, u);
  using Op = hawk::rglru::Backward<BackwardConfig, Scan>;
  const BackwardArguments args = g.arguments(p, d);
  g.workspace.resize(Op::workspace_size(args) + 1);
  const hawk::Status status = Op::run(args, hawk_test::raw(g.workspace), g.workspace.size(), nullptr);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  INFO("backward: " << status.to_string());
  REQUIRE(status.ok());
  return g.download();
}

//! Forward (with checkpoints) then backward of `p` with upstream `u`; both must succeed.
template <class E, class ForwardConfig>
HostGradients forward_backward(const Problem& p, const Upstream& u, bool want_dh0 = true) {
  const std::int64_t chunk = hawk::rglru::kDefaultTimeChunk;
  DeviceProblem<E> d(p, chunk);
  const hawk::Status forward_status = rglru_test::run_forward<ForwardConfig>(d.arguments(p), d.workspace);
  INFO("forward: " << forward_status.to_string());
  REQUIRE(forward_status.ok());
  DeviceGradients<E> g(p, u, want_dh0);
  const hawk::Status status = run_backward<ForwardConfig>(g.arguments(p, d), g.workspace);
  INFO("backward: " << status.to_string());
  REQUIRE(status.ok());
  return g.download();
}

//! Tolerance on ‖got − want‖ / ‖want‖ of fp32 parameter gradients: tf32 products (1 pass) for bf16 / fp16,
//! 3xTF32 for fp32.
template <class E>
constexpr double parameter_tolerance() {
  return sizeof(E) == 4 ? 1e-4 : 1e-3;
}

inline void check_close(const char* name, const std::vector<double>& got, const std::vector<double>& want,
                        double tolerance) {
  const auto c = hawk_test::compare(got, want);
  INFO(name << ": " << c.describe() << " (tolerance " << tolerance << ")");
  CHECK(c.non_finite == 0);
  CHECK(c.relative_l2 <= tolerance);
}

//! Compare every gradient of the mode with the float64 reference (fed the same rounded inputs).
template <class E>
void check_against_reference(const Problem& p, const Upstream& u, const HostGradients& got, bool with_dh0 = true) {
  const auto want = hawk::reference::rglru_backward(p.params, rglru_test::reference_inputs(p), u.dy, u.dh_final);
  check_close("dx", got.dx, want.dx, hawk_test::storage_tolerance<E>());
  if (p.mode == GateMode::kGateLogits) {
    check_close("dgx", got.dgx, want.dgx, hawk_test::storage_tolerance<E>());
    check_close("dga", got.dga, want.dga, hawk_test::storage_tolerance<E>());
  } else {
    check_close("dWx", got.dWx, want.dWx, parameter_tolerance<E>());
    check_close("dbx", got.dbx, want.dbx, parameter_tolerance<E>());
    check_close("dWa", got.dWa, want.dWa, parameter_tolerance<E>());
    check_close("dba", got.dba, want.dba, parameter_tolerance<E>());
  }
  check_close("da_param", got.da_param, want.da_param, parameter_tolerance<E>());
  if (with_dh0) check_close("dh0", got.dh0, want.dh0, 1e-4);
}

//! One forward of `p` (with checkpoints), then the backward with the scan kernel `Scan` forced.
template <class E, class ForwardConfig, hawk::rglru::BackwardScan Scan>
HostGradients backward_with_scan(const Problem& p, const Upstream& u, DeviceProblem<E>& d, bool want_dh0,
                                 bool least_workspace = false) {
  DeviceGradients<E> g(p, u, want_dh0);
  const hawk::Status status = run_backward<ForwardConfig, Scan>(g.arguments(p, d), g.workspace, least_workspace);
  INFO("backward: " << status.to_string());
  REQUIRE(status.ok());
  return g.download();
}

//! One problem through the shipped configuration's forward and the backward paired with it: the chunked scan against the
//! reference, and the sequential scan bitwise equal to it, every gradient; where the chunked backward can take time
//! slices (one long dense sequence in fused mode), also in slices with its least workspace, bitwise equal.
template <class E, class Policy, GateMode Mode, int BlockWidth>
void check_one(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0, bool with_dh_final,
               std::int64_t blocks = 2, bool with_dh0 = true) {
  using Forward = ShippedForward<E, Policy, Mode, BlockWidth>;
  using hawk::rglru::BackwardScan;
  INFO("mode=" << rglru_test::mode_name(Mode) << " policy=" << Policy::kName << " w=" << BlockWidth
               << " WidthTile=" << Forward::kWidthTile << " h0=" << with_h0 << " dh_final=" << with_dh_final
               << " dh0=" << with_dh0 << " packed=" << packed << " N=" << lengths.size()
               << " first length=" << lengths.front());
  const Problem p =
      rglru_test::make_problem<E>(blocks * BlockWidth, blocks, lengths, packed, Mode, Policy::kMode, with_h0);
  const Upstream u = make_upstream<E>(p, with_dh_final);
  DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk);
  const hawk::Status forward_status = rglru_test::run_forward<Forward>(d.arguments(p), d.workspace);
  INFO("forward: " << forward_status.to_string());
  REQUIRE(forward_status.ok());
  const HostGradients chunked = backward_with_scan<E, Forward, BackwardScan::kChunked>(p, u, d, with_dh0);
  check_against_reference<E>(p, u, chunked, with_dh0);
  const HostGradients sequential = backward_with_scan<E, Forward, BackwardScan::kSequential>(p, u, d, with_dh0);
  CHECK(chunked.all_bytes() == sequential.all_bytes());
  using Chunked = hawk::rglru::Backward<typename hawk::rglru::DefaultBackwardConfig<Forward>::type, BackwardScan::kChunked>;
  DeviceGradients<E> probe(p, u, with_dh0);
  const BackwardArguments args = probe.arguments(p, d);
  if (Chunked::can_take_time_slices(args)) {
    REQUIRE(Chunked::min_workspace_size(args) < Chunked::workspace_size(args));
    const HostGradients sliced = backward_with_scan<E, Forward, BackwardScan::kChunked>(p, u, d, with_dh0, true);
    CHECK(sliced.all_bytes() == chunked.all_bytes());
  }
}

template <class E, class Policy, GateMode Mode, int BlockWidth>
void check_lengths_and_states() {
  for (int states = 0; states < 2; ++states) {
    const bool with_h0 = states == 1, with_dh_final = states == 0;
    for (std::int64_t L : {1, 2, 17}) check_one<E, Policy, Mode, BlockWidth>({L, L}, false, with_h0, with_dh_final);
    // Under compute-sanitizer (HAWK_SANITIZE) 300 tokens instead of 1000: still several checkpoint chunks of every
    // size (64, 128, 256) and a partial last one, at a third of the instrumented accesses (racecheck of these
    // cases ran past 240 s at 1000).
    check_one<E, Policy, Mode, BlockWidth>({sanitizing() ? 300 : 1000}, false, with_h0, with_dh_final);
    // Packed: neighbours of different lengths, an empty sequence (dh0 = dh_final), a chunk-sized one, a chunk + 2.
    check_one<E, Policy, Mode, BlockWidth>({17, 0, 64, 1, 130}, true, with_h0, with_dh_final);
  }
  // dh0 not asked for.
  check_one<E, Policy, Mode, BlockWidth>({65, 3}, true, true, true, 2, false);
}

template <class E, class Policy>
void check_policy() {
  check_lengths_and_states<E, Policy, GateMode::kFused, 64>();
  check_lengths_and_states<E, Policy, GateMode::kFused, 128>();
  check_lengths_and_states<E, Policy, GateMode::kFused, 256>();
  check_lengths_and_states<E, Policy, GateMode::kGateLogits, 64>();
  // Gate-logits configurations accept any H: one block of 96.
  check_one<E, Policy, GateMode::kGateLogits, 96>({300, 300}, false, true, true, 1);
}

}  // namespace rglru_backward_test

//! The per-dtype backward tests: every shipped configuration of the dtype against the float64 reference.
#define HAWK_RGLRU_BACKWARD_DTYPE_TESTS(E, NAME)                                                                    \
  TEST_CASE("backward matches the float64 reference gradients without resets, every mode, block width, length, "   \
            "h0 and dh_final (" NAME ")",                                                                           \
            "[rglru][backward][" NAME "]") {                                                                        \
    rglru_backward_test::check_policy<E, hawk::rglru::NoReset>();                                                   \
  }                                                                                                                 \
  TEST_CASE("backward matches the float64 reference gradients with a reset at each sequence start (" NAME ")",     \
            "[rglru][backward][" NAME "]") {                                                                        \
    rglru_backward_test::check_policy<E, hawk::rglru::ResetAtSequenceStart>();                                      \
  }                                                                                                                 \
  TEST_CASE("backward matches the float64 reference gradients with per-token resets at t=0, mid-chunk, chunk "     \
            "edges and consecutive tokens (" NAME ")",                                                              \
            "[rglru][backward][" NAME "]") {                                                                        \
    rglru_backward_test::check_policy<E, hawk::rglru::ResetFlags>();                                                \
  }                                                                                                                 \
  TEST_CASE("backward matches the float64 reference gradients on a long sequence, L = 4099 (" NAME ")",            \
            "[rglru][backward][" NAME "]") {                                                                        \
    if (rglru_backward_test::sanitizing()) return;                                                                  \
    rglru_backward_test::check_one<E, hawk::rglru::ResetFlags, hawk::rglru::GateMode::kFused, 128>({4099}, false,  \
                                                                                                   true, true);     \
    rglru_backward_test::check_one<E, hawk::rglru::NoReset, hawk::rglru::GateMode::kGateLogits, 128>(              \
        {4099}, false, false, true);                                                                                \
  }
