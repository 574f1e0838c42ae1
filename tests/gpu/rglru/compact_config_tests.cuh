#pragma once
// The compact configurations (include/hawk/rglru/compact_config.cuh), which the default dispatch runs where a GPU's
// shared memory cannot hold a shipped one, give every bit of the shipped configuration they replace: the forward
// (y, h_final, the decay output, the checkpoints) through the sequential and the chunked kernels, the decode step,
// and every gradient of the backward through both scans; at every tail (L = 1, 2, odd, not a multiple of the chunk;
// packed with an empty sequence; resets at t = 0, mid-chunk, at chunk edges, consecutive). One case per family also
// meets the float64 reference. Control: the compact forward on inputs with one x moved must differ from the shipped
// forward on the original inputs (the comparison can fail). Instantiated once per dtype (compact_<dtype>_test.cu).
#include <algorithm>

#include "backward_support.cuh"
#include "hawk/rglru/compact_config.cuh"
#include "hawk/rglru/dispatch.cuh"

namespace rglru_compact_test {

using namespace rglru_backward_test;
using hawk::rglru::BackwardScan;
using rglru_test::ForwardOutputs;

//! The configurations of one (E, Policy, Mode, w): the shipped ones the default dispatch runs and their compact ones.
template <class E, class Policy, GateMode Mode, int BlockWidth>
struct Family {
  using Shipped = ShippedForward<E, Policy, Mode, BlockWidth>;
  using ShippedChunked = typename hawk::rglru::DefaultChunkedConfig<Shipped>::type;
  using Compact = hawk::rglru::detail::CompactForwardFamily<Shipped>;
  using ShippedBackward = typename hawk::rglru::DefaultBackwardConfig<Shipped>::type;
  using CompactBackward = typename hawk::rglru::CompactBackwardConfig<ShippedBackward>::type;
  static constexpr bool kForwardDiffers = !std::is_same<typename Compact::Sequential, Shipped>::value;
  static constexpr bool kChunkedDiffers = !std::is_same<typename Compact::Chunked, ShippedChunked>::value;
  static constexpr bool kBackwardDiffers = !std::is_same<CompactBackward, ShippedBackward>::value;
  static constexpr std::int64_t kWidth = Mode == GateMode::kFused ? 2 * BlockWidth : 256;
};

//! Forward and backward of one problem through the shipped and the compact configurations, compared bytewise.
template <class E, class Policy, GateMode Mode, int BlockWidth>
void check_family(const std::vector<std::int64_t>& lengths, bool packed, bool with_h0, bool against_reference) {
  using F = Family<E, Policy, Mode, BlockWidth>;
  static_assert(F::kForwardDiffers || F::kBackwardDiffers, "a family without compact configurations");
  INFO("mode=" << rglru_test::mode_name(Mode) << " policy=" << Policy::kName << " w=" << BlockWidth
               << " packed=" << packed << " h0=" << with_h0 << " N=" << lengths.size()
               << " first length=" << lengths.front());
  const Problem p = rglru_test::make_problem<E>(F::kWidth, 2, lengths, packed, Mode, Policy::kMode, with_h0);

  // ---- forward (the shipped one's outputs, and its checkpoints for the backward below) ----
  DeviceProblem<E> shipped(p, hawk::rglru::kDefaultTimeChunk);
  thrust::device_vector<float> shipped_decay(static_cast<std::size_t>(p.num_sequences() * p.width));
  hawk_test::poison(shipped_decay);
  const ForwardOutputs want =
      rglru_test::run_forward_on<E, hawk::rglru::Forward<typename F::Shipped>>(p, shipped, shipped_decay);
  if constexpr (F::kForwardDiffers) {
    DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk);
    thrust::device_vector<float> decay(static_cast<std::size_t>(p.num_sequences() * p.width));
    hawk_test::poison(decay);
    const ForwardOutputs got =
        rglru_test::run_forward_on<E, hawk::rglru::Forward<typename F::Compact::Sequential>>(p, d, decay);
    CHECK(got == want);
    if (against_reference) rglru_test::check_against_reference<E>(p, d);
  }
  if constexpr (F::kChunkedDiffers)
    CHECK(rglru_test::run_forward_outputs<E, hawk::rglru::ChunkedForward<typename F::Compact::Chunked>>(p) == want);

  // ---- backward (from the shipped forward's checkpoints) ----
  if constexpr (F::kBackwardDiffers) {
    const Upstream u = make_upstream<E>(p, true);
    using ShippedBackward = typename F::ShippedBackward;
    using Compact = typename F::CompactBackward;
    const std::vector<unsigned char> want_gradients =
        run_backward_config<ShippedBackward, BackwardScan::kSequential>(p, u, shipped).all_bytes();
    const HostGradients compact = run_backward_config<Compact, BackwardScan::kSequential>(p, u, shipped);
    CHECK(compact.all_bytes() == want_gradients);
    CHECK(run_backward_config<Compact, BackwardScan::kChunked>(p, u, shipped).all_bytes() == want_gradients);
    if (against_reference) check_against_reference<E>(p, u, compact);
  }
}

//! The control: the compact forward (or, where the forward is shipped, the compact backward) on inputs with one x
//! moved gives other bytes than the shipped configuration on the original inputs.
template <class E, class Policy, GateMode Mode, int BlockWidth>
void check_control() {
  using F = Family<E, Policy, Mode, BlockWidth>;
  const Problem p = rglru_test::make_problem<E>(F::kWidth, 2, {130, 65}, true, Mode, Policy::kMode, true);
  const Problem changed = rglru_test::with_one_x_changed(p);
  if constexpr (F::kForwardDiffers) {
    const ForwardOutputs want = rglru_test::run_forward_outputs<E, hawk::rglru::Forward<typename F::Shipped>>(p);
    const ForwardOutputs got =
        rglru_test::run_forward_outputs<E, hawk::rglru::Forward<typename F::Compact::Sequential>>(changed);
    CHECK_FALSE(got.y == want.y);
  } else {
    const Upstream u = make_upstream<E>(p, true);
    DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk), dc(changed, hawk::rglru::kDefaultTimeChunk);
    REQUIRE(rglru_test::run_forward<typename F::Shipped>(d.arguments(p), d.workspace).ok());
    REQUIRE(rglru_test::run_forward<typename F::Shipped>(dc.arguments(changed), dc.workspace).ok());
    using Shipped = typename F::ShippedBackward;
    using Compact = typename F::CompactBackward;
    const HostGradients shipped = run_backward_config<Shipped, BackwardScan::kSequential>(p, u, d);
    const HostGradients compact = run_backward_config<Compact, BackwardScan::kSequential>(changed, u, dc);
    CHECK_FALSE(compact.dx_bytes == shipped.dx_bytes);
  }
}

//! The control of the backward's grouping: the compact backward with twice the shipped DaParamRowStep must change
//! d a_param's bytes and nothing else (the comparisons see the grouping, the one knob that could change bits).
template <class E, class Policy, int BlockWidth>
void check_grouping_control() {
  using F = Family<E, Policy, GateMode::kFused, BlockWidth>;
  using Compact = typename F::CompactBackward;
  using Regrouped = hawk::rglru::BackwardConfig<typename Compact::PairedForward, Compact::kTf32Passes,
                                                2 * Compact::kDaParamRowStep, Compact::kWeightGradStep,
                                                Compact::kDxStep>;
  const Problem p = rglru_test::make_problem<E>(F::kWidth, 2, {300, 129}, true, GateMode::kFused, Policy::kMode, true);
  const Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk);
  REQUIRE(rglru_test::run_forward<typename F::Shipped>(d.arguments(p), d.workspace).ok());
  const HostGradients compact = run_backward_config<Compact, BackwardScan::kSequential>(p, u, d);
  const HostGradients regrouped = run_backward_config<Regrouped, BackwardScan::kSequential>(p, u, d);
  CHECK(regrouped.da_param_bytes != compact.da_param_bytes);
  std::vector<unsigned char> compact_rest = compact.all_bytes(), regrouped_rest = regrouped.all_bytes();
  compact_rest.resize(compact_rest.size() - compact.da_param_bytes.size());  // all_bytes ends with d a_param's
  regrouped_rest.resize(regrouped_rest.size() - regrouped.da_param_bytes.size());
  CHECK(!compact_rest.empty());
  CHECK(regrouped_rest == compact_rest);
}

//! The default dispatch (forward(), backward(), with the workspaces their size functions ask for) gives the shipped
//! configurations' bytes: in a normal build it runs them; in a build capped at 99 KB (HAWK_SHARED_MEMORY_LIMIT) it
//! runs the compact ones, fp32 fused w = 256 through the chunked forward and the chunked scan only.
template <class E, class Policy, GateMode Mode, int BlockWidth>
void check_dispatch(const std::vector<std::int64_t>& lengths, bool packed) {
  using F = Family<E, Policy, Mode, BlockWidth>;
  INFO("dispatch: mode=" << rglru_test::mode_name(Mode) << " policy=" << Policy::kName << " w=" << BlockWidth
                         << " packed=" << packed << " first length=" << lengths.front());
  const Problem p = rglru_test::make_problem<E>(F::kWidth, 2, lengths, packed, Mode, Policy::kMode, true);
  const Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> shipped(p, hawk::rglru::kDefaultTimeChunk), dispatched(p, hawk::rglru::kDefaultTimeChunk);
  REQUIRE(rglru_test::run_forward<typename F::Shipped>(shipped.arguments(p), shipped.workspace).ok());
  const hawk::rglru::ForwardArguments args = dispatched.arguments(p);
  dispatched.workspace.resize(std::max(dispatched.workspace.size(), hawk::rglru::forward_workspace_size(args)));
  const hawk::Status status = rglru_test::run_forward<void>(args, dispatched.workspace);
  INFO("forward(): " << status.to_string());
  REQUIRE(status.ok());
  CHECK(hawk_test::bytes_of(dispatched.y) == hawk_test::bytes_of(shipped.y));
  CHECK(hawk_test::bytes_of(dispatched.h_final) == hawk_test::bytes_of(shipped.h_final));
  CHECK(hawk_test::bytes_of(dispatched.checkpoints) == hawk_test::bytes_of(shipped.checkpoints));
  const HostGradients want = run_backward_config<typename F::ShippedBackward, BackwardScan::kSequential>(p, u, shipped);
  DeviceGradients<E> g(p, u);
  const hawk::Status backward_status = run_backward<void>(g.arguments(p, dispatched), g.workspace);
  INFO("backward(): " << backward_status.to_string());
  REQUIRE(backward_status.ok());
  CHECK(g.download().all_bytes() == want.all_bytes());
}

//! decode() through the default dispatch, in place on the state pool (h_final = h0), against the shipped forward into
//! a separate h_final: the same y and states. With several tokens per sequence it is not the decode step's shape, so
//! a build capped at 99 KB runs fp32 w = 256 through the chunked forward here.
template <class E, class Policy, int BlockWidth>
void check_decode_dispatch(std::int64_t tokens_per_sequence) {
  using F = Family<E, Policy, GateMode::kFused, BlockWidth>;
  static_assert(Policy::kMode != ResetMode::kSequenceStart, "decode continues cached states");
  INFO("decode(): policy=" << Policy::kName << " w=" << BlockWidth << " tokens per sequence=" << tokens_per_sequence);
  const Problem p = rglru_test::make_problem<E>(F::kWidth, 2, std::vector<std::int64_t>(5, tokens_per_sequence),
                                                false, GateMode::kFused, Policy::kMode, true);
  DeviceProblem<E> shipped(p, hawk::rglru::kDefaultTimeChunk), dispatched(p, hawk::rglru::kDefaultTimeChunk);
  hawk::rglru::ForwardArguments want_args = shipped.arguments(p);
  want_args.checkpoints = nullptr;
  REQUIRE(rglru_test::run_forward<typename F::Shipped>(want_args, shipped.workspace).ok());
  hawk::rglru::ForwardArguments args = dispatched.arguments(p);
  args.checkpoints = nullptr;
  args.h_final = hawk_test::raw(dispatched.h0);  // the pool, updated in place
  args.h0 = args.h_final;
  dispatched.workspace.resize(std::max(dispatched.workspace.size(), hawk::rglru::forward_workspace_size(args)));
  const hawk::Status status =
      hawk::rglru::decode(args, hawk_test::raw(dispatched.workspace), dispatched.workspace.size(), nullptr);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  INFO(status.to_string());
  REQUIRE(status.ok());
  CHECK(hawk_test::bytes_of(dispatched.y) == hawk_test::bytes_of(shipped.y));
  CHECK(hawk_test::bytes_of(dispatched.h0) == hawk_test::bytes_of(shipped.h_final));
}

//! The decode step (one token for each of 70 sequences, cached states) through the shipped and the compact
//! configurations: the same y and new states.
template <class E, class Policy, int BlockWidth>
void check_decode() {
  using F = Family<E, Policy, GateMode::kFused, BlockWidth>;
  static_assert(Policy::kMode != ResetMode::kSequenceStart, "decode continues cached states");
  const Problem p = rglru_test::make_problem<E>(F::kWidth, 2, std::vector<std::int64_t>(70, 1), false,
                                                GateMode::kFused, Policy::kMode, true);
  auto run = [&](auto config) {
    using Config = decltype(config);
    DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk);
    hawk::rglru::ForwardArguments a = d.arguments(p);
    a.checkpoints = nullptr;
    const hawk::Status status =
        hawk::rglru::DecodeStep<Config>::run(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    INFO(status.to_string());
    REQUIRE(status.ok());
    std::vector<unsigned char> bytes = hawk_test::bytes_of(d.y);
    const std::vector<unsigned char> states = hawk_test::bytes_of(d.h_final);
    bytes.insert(bytes.end(), states.begin(), states.end());
    return bytes;
  };
  CHECK(run(typename F::Compact::Sequential{}) == run(typename F::Shipped{}));
}

}  // namespace rglru_compact_test
