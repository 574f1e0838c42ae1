// The chunked backward scan (chunked_backward_scan_kernel, Backward<Config, BackwardScan::kChunked>) against the
// sequential one where their paths differ most: a state pool updated in place (dh0 == dh_final: the chunk that
// reads dh_final and the chunk that writes dh0 are different CTAs), padding slots, the device checks off with
// offsets out of range, and out of order (slots without a chunk must still publish, or a waiter would spin for
// ever), and repeat runs.
// Every gradient must be bitwise the sequential scan's, with a control that shows the comparison can fail. (The
// float64 reference and the sequential scan's bits over every dtype, mode, block width, reset policy and length:
// check_one in backward_support.cuh.)
#include "backward_support.cuh"

#include <algorithm>
#include <utility>
#include <vector>

namespace {

using namespace rglru_backward_test;
using hawk::rglru::BackwardScan;
using E = __nv_bfloat16;
using Bytes = std::vector<unsigned char>;

bool poisoned(const Bytes& bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0xFF; });
}

Bytes rows_of(const Bytes& bytes, std::int64_t begin, std::int64_t end, std::size_t row_bytes) {
  return Bytes(bytes.begin() + static_cast<std::ptrdiff_t>(begin * static_cast<std::int64_t>(row_bytes)),
               bytes.begin() + static_cast<std::ptrdiff_t>(end * static_cast<std::int64_t>(row_bytes)));
}

//! What one backward call left behind: every gradient and the state pool it updated in place.
struct Outcome {
  HostGradients gradients;
  Bytes pool;
};

template <class Forward, BackwardScan Scan>
Outcome backward_in_place(const Problem& p, const Upstream& u, DeviceProblem<E>& d,
                          const std::vector<std::int32_t>& slots, const std::vector<double>& pool) {
  DeviceGradients<E> g(p, u);
  thrust::device_vector<std::int32_t> state_index(slots.begin(), slots.end());
  thrust::device_vector<float> dh_pool = hawk_test::to_device<float>(pool);
  BackwardArguments a = g.arguments(p, d);
  a.state_index = hawk_test::raw(state_index);
  a.shape.num_state_rows = static_cast<std::int64_t>(pool.size()) / p.width;
  a.dh_final = hawk_test::raw(dh_pool);
  a.dh0 = hawk_test::raw(dh_pool);
  const hawk::Status status = run_backward<Forward, Scan>(a, g.workspace);
  INFO("backward: " << status.to_string());
  REQUIRE(status.ok());
  return {g.download(), hawk_test::bytes_of(dh_pool)};
}

//! NoReset, so that every dh0 depends on dh_final through every chunk's carry: the pool's rows then show whether
//! the copy of dh_final (the chunk that reads it and the chunk that writes dh0 are different CTAs) works.
template <GateMode Mode>
void check_in_place_pool_and_padding() {
  using Forward = ShippedForward<E, hawk::rglru::NoReset, Mode, 64>;
  INFO("mode=" << rglru_test::mode_name(Mode));
  const std::int64_t W = 128, H = 2, S = 6;
  // Several chunks, an empty sequence, one exactly a chunk, a chunk + 1, one token; slot -1 pads sequence 1.
  const std::vector<std::int64_t> lengths = {300, 0, 64, 129, 1, 200};
  const std::vector<std::int32_t> slots = {4, -1, 0, 2, 5, 1};
  const Problem p = rglru_test::make_problem<E>(W, H, lengths, true, Mode, hawk::rglru::ResetMode::kNone, true);
  Upstream u = make_upstream<E>(p, false);
  const std::vector<double> pool =
      hawk_test::quantize<float>(hawk_test::random_uniform(static_cast<std::size_t>(S * W), -1.0, 1.0,
                                                           hawk_test::fresh_seed()));
  DeviceProblem<E> d(p);
  REQUIRE(rglru_test::run_forward<Forward>(d.arguments(p), d.workspace).ok());

  const Outcome chunked = backward_in_place<Forward, BackwardScan::kChunked>(p, u, d, slots, pool);
  const Outcome sequential = backward_in_place<Forward, BackwardScan::kSequential>(p, u, d, slots, pool);
  CHECK(chunked.gradients.all_bytes() == sequential.gradients.all_bytes());
  CHECK(chunked.pool == sequential.pool);
  // The padded sequence 1 is empty here; sequence 0's rows were written, the pool's row 3 (named by no slot) kept.
  const auto row_bytes = static_cast<std::size_t>(W) * sizeof(E);
  CHECK_FALSE(poisoned(rows_of(chunked.gradients.dx_bytes, 0, 300, row_bytes)));
  const Bytes before = hawk_test::bytes_of(hawk_test::to_device<float>(pool));
  CHECK(rows_of(chunked.pool, 3, 4, W * 4) == rows_of(before, 3, 4, W * 4));
  CHECK_FALSE(rows_of(chunked.pool, 4, 5, W * 4) == rows_of(before, 4, 5, W * 4));  // sequence 0's dh0

  for (int run = 0; run < 3; ++run) {
    INFO("repeat " << run);
    const Outcome again = backward_in_place<Forward, BackwardScan::kChunked>(p, u, d, slots, pool);
    CHECK(again.gradients.all_bytes() == chunked.gradients.all_bytes());
    CHECK(again.pool == chunked.pool);
  }
  // Control: one dy element of sequence 0's third chunk changed: the chunked scan's gradients change.
  auto& value = u.dy[static_cast<std::size_t>(150 * W + 7)];
  value = rglru_test::quantize_nudge<E>(value);
  const Outcome nudged = backward_in_place<Forward, BackwardScan::kChunked>(p, u, d, slots, pool);
  CHECK_FALSE(nudged.gradients.all_bytes() == sequential.gradients.all_bytes());
}

//! The backward of `p` (forward already run into `d`) with the scan `Scan` forced, the packed offsets replaced by
//! `cu` and the device checks off.
template <class Forward, BackwardScan Scan>
HostGradients with_offsets(const Problem& p, const Upstream& u, DeviceProblem<E>& d,
                           thrust::device_vector<std::int32_t>& cu) {
  DeviceGradients<E> g(p, u);
  BackwardArguments b = g.arguments(p, d);
  b.shape.cu_seqlens = hawk_test::raw(cu);
  b.shape.validate_device_inputs = false;
  const hawk::Status status = run_backward<Forward, Scan>(b, g.workspace);
  INFO("backward: " << status.to_string());
  REQUIRE(status.ok());
  return g.download();
}

template <GateMode Mode>
void check_offsets_out_of_range() {
  using Forward = ShippedForward<E, hawk::rglru::ResetAtSequenceStart, Mode, 64>;
  INFO("mode=" << rglru_test::mode_name(Mode));
  const std::int64_t W = 128, H = 2;
  const Problem p = rglru_test::make_problem<E>(W, H, {150, 100, 70}, true, Mode,
                                                hawk::rglru::ResetMode::kSequenceStart, true);
  const Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> d(p);
  REQUIRE(rglru_test::run_forward<Forward>(d.arguments(p), d.workspace).ok());
  // Sequence 1 ends at 400 > T = 320, sequence 2 runs backwards: both skipped; their slots hold no chunk.
  const std::vector<std::int32_t> cu = {0, 150, 400, 320};
  thrust::device_vector<std::int32_t> bad_cu(cu.begin(), cu.end());
  const HostGradients chunked = with_offsets<Forward, BackwardScan::kChunked>(p, u, d, bad_cu);
  const HostGradients sequential = with_offsets<Forward, BackwardScan::kSequential>(p, u, d, bad_cu);
  CHECK(chunked.all_bytes() == sequential.all_bytes());
  const auto row_bytes = static_cast<std::size_t>(W) * sizeof(E);
  CHECK(poisoned(rows_of(chunked.dx_bytes, 150, 320, row_bytes)));
  CHECK_FALSE(poisoned(rows_of(chunked.dx_bytes, 0, 150, row_bytes)));
  CHECK(poisoned(rows_of(chunked.dh0_bytes, 1, 3, static_cast<std::size_t>(W) * 4)));
}

//! Offsets each in range but out of order, the device checks off (unspecified values): sequence 0's chunk 1 then
//! waits on a slot the bisection gives to a skipped sequence, whose CTA must still publish, or the call would never
//! end. Both kernels must return and leave the skipped tokens' rows unwritten.
template <GateMode Mode>
void check_slots_of_skipped_sequences_publish() {
  using Forward = ShippedForward<E, hawk::rglru::ResetFlags, Mode, 64>;
  INFO("mode=" << rglru_test::mode_name(Mode));
  const std::int64_t W = 128, H = 2;
  const Problem p =
      rglru_test::make_problem<E>(W, H, {256, 0, 0, 64}, true, Mode, hawk::rglru::ResetMode::kFlags, true);
  const Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> d(p);
  REQUIRE(rglru_test::run_forward<Forward>(d.arguments(p), d.workspace).ok());
  // First slots cu[n] / 64 + n = 0, 5, 2, 9: slot 2 (sequence 0's chunk 2 by its own offsets) goes to sequence 2,
  // which ends past T and is skipped.
  const std::vector<std::int32_t> cu = {0, 256, 0, 400, 320};
  thrust::device_vector<std::int32_t> bad_cu(cu.begin(), cu.end());
  const auto row_bytes = static_cast<std::size_t>(W) * sizeof(E);
  for (const HostGradients& g : {with_offsets<Forward, BackwardScan::kChunked>(p, u, d, bad_cu),
                                 with_offsets<Forward, BackwardScan::kSequential>(p, u, d, bad_cu)}) {
    CHECK(poisoned(rows_of(g.dx_bytes, 256, 320, row_bytes)));  // sequence 3's tokens: skipped
    CHECK_FALSE(poisoned(rows_of(g.dx_bytes, 0, 64, row_bytes)));  // sequence 0's chunk 0 ran
  }
}

//! On sm_90 the weight gradients start behind the scan and dx behind them (core/dependent_launch.cuh): dW waits for
//! the scan; dx reads what the scan wrote without a wait, scheduled only after every dW CTA has waited. A slip in
//! that order would have dW or dx read workspace rows before the scan wrote them. Here the workspace is filled with
//! 0xFF bytes (NaN rows) before every call, and one long sequence runs beside many short and empty ones, so that
//! most of the scan's CTAs end early and the product kernels' CTAs take their slots long before the scan ends. The
//! first call against the float64 reference; every later one must give its bytes.
template <BackwardScan Scan>
void check_poisoned_workspace_over_repeat_calls() {
  using Forward = ShippedForward<E, hawk::rglru::ResetFlags, GateMode::kFused, 128>;
  using Op = hawk::rglru::Backward<typename hawk::rglru::DefaultBackwardConfig<Forward>::type, Scan>;
  INFO("scan=" << (Scan == BackwardScan::kChunked ? "chunked" : "sequential"));
  std::vector<std::int64_t> lengths{sanitizing() ? 700 : 3001};
  for (int k = 0; k < 40; ++k) lengths.push_back(k % 8 == 3 ? 0 : 1 + (7 * k) % 17);
  const Problem p =
      rglru_test::make_problem<E>(256, 2, lengths, true, GateMode::kFused, hawk::rglru::ResetMode::kFlags, true);
  Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk);
  REQUIRE(rglru_test::run_forward<Forward>(d.arguments(p), d.workspace).ok());
  thrust::device_vector<unsigned char> workspace;
  auto run = [&](const Upstream& up) {
    DeviceGradients<E> g(p, up);
    const BackwardArguments args = g.arguments(p, d);
    workspace.resize(Op::workspace_size(args));
    HAWK_TEST_CUDA(cudaMemset(hawk_test::raw(workspace), 0xFF, workspace.size()));
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    const hawk::Status status = Op::run(args, hawk_test::raw(workspace), workspace.size(), nullptr);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    INFO("backward: " << status.to_string());
    REQUIRE(status.ok());
    return g.download();
  };
  const HostGradients first = run(u);
  check_against_reference<E>(p, u, first);
  const int calls = sanitizing() ? 3 : 20;
  for (int r = 1; r < calls; ++r) {
    INFO("call " << r);
    CHECK(run(u).all_bytes() == first.all_bytes());
  }
  // Negative control: one dy element of the long sequence moved by a few bf16 ulps changes some gradient bytes.
  auto& value = u.dy[static_cast<std::size_t>(1500 % lengths.front() * p.width + 9)];
  value = rglru_test::quantize_nudge<E>(value);
  CHECK_FALSE(run(u).all_bytes() == first.all_bytes());
}

}  // namespace

TEST_CASE("the chunked backward scan gives the sequential scan's bits through a state pool updated in place, "
          "padding slots and repeat runs; a changed dy changes them",
          "[rglru][backward][chunked_scan][state_pool]") {
  check_in_place_pool_and_padding<GateMode::kFused>();
  check_in_place_pool_and_padding<GateMode::kGateLogits>();
}

TEST_CASE("the chunked backward scan with the device checks off: offsets out of range are skipped, their slots "
          "still hand on a carry, and the bits are the sequential scan's",
          "[rglru][backward][chunked_scan][bad_input]") {
  check_offsets_out_of_range<GateMode::kFused>();
  check_offsets_out_of_range<GateMode::kGateLogits>();
}

TEST_CASE("the chunked backward scan with the device checks off and offsets out of order: a skipped sequence's "
          "slot still hands on a carry, and the call ends",
          "[rglru][backward][chunked_scan][bad_input]") {
  check_slots_of_skipped_sequences_publish<GateMode::kFused>();
  check_slots_of_skipped_sequences_publish<GateMode::kGateLogits>();
}

TEST_CASE("the fused backward of one long sequence runs in time slices (the last first) and gives the bits of every "
          "other path: a one-token last slice, a partial last chunk, exactly two slices, resets across slice edges or none, h0, "
          "dh_final and dh0",
          "[rglru][backward][chunked_scan][time_slices]") {
  // kBackwardTimeSliceTokens = 1024: 1025 tokens are two slices, the second of one token; 2048 + 77 three, the last
  // chunk partial. The chunked scan (which slices, and adds dW, db slice by slice) against the float64 reference
  // and, bitwise, the sequential scan (which never slices, and sums every segment's partials at the end).
  static_assert(hawk::rglru::kBackwardTimeSliceTokens == 1024, "the lengths below straddle 1024-token slices");
  check_one<E, hawk::rglru::ResetFlags, GateMode::kFused, 64>({1025}, false, true, true);
  check_one<E, hawk::rglru::ResetFlags, GateMode::kFused, 128>({2048 + 77}, false, true, true);
  check_one<E, hawk::rglru::ResetFlags, GateMode::kFused, 256>({2048 + 77}, false, false, false, 1);
  // Exactly two slices (no partial chunk or slice), no resets at all: the carry crosses the slice edge unbroken.
  check_one<E, hawk::rglru::NoReset, GateMode::kFused, 128>({2048}, false, false, true);
  // The least workspace holds one slice's rows where the shape can take slices, and is the one-pass size elsewhere.
  hawk::rglru::BackwardArguments args;
  args.mode = GateMode::kFused;
  args.shape.num_sequences = 1;
  args.shape.seq_len = args.shape.num_tokens = 2048 + 77;
  args.shape.width = 512;
  args.shape.num_blocks = 2;
  CHECK(hawk::rglru::backward_shape_takes_time_slices(args));
  CHECK(hawk::rglru::backward_min_workspace_size(args) + 12 * 1024 * 512 < hawk::rglru::backward_workspace_size(args));
  args.shape.seq_len = args.shape.num_tokens = 1024;  // one slice's worth: one pass whatever the workspace
  CHECK_FALSE(hawk::rglru::backward_shape_takes_time_slices(args));
  CHECK(hawk::rglru::backward_min_workspace_size(args) == hawk::rglru::backward_workspace_size(args));
  args.shape.num_sequences = 2;  // two sequences: no slices, every token's rows
  args.shape.seq_len = (2048 + 77 + 1) / 2;
  args.shape.num_tokens = 2 * args.shape.seq_len;
  CHECK_FALSE(hawk::rglru::backward_shape_takes_time_slices(args));
  CHECK(hawk::rglru::backward_min_workspace_size(args) == hawk::rglru::backward_workspace_size(args));
}

TEST_CASE("the default dispatch takes time slices with its least workspace (or any up to the one-pass size) and "
          "gives the one-pass bits; one byte less is refused and writes nothing",
          "[rglru][backward][time_slices]") {
  const rglru_test::Problem p = rglru_test::make_problem<E>(256, 2, {2048 + 77}, false, GateMode::kFused,
                                                            hawk::rglru::ResetMode::kFlags, true);
  const Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk);
  REQUIRE(rglru_test::run_forward<void>(d.arguments(p), d.workspace).ok());
  DeviceGradients<E> one_pass(p, u), sliced(p, u), between(p, u), refused(p, u);
  REQUIRE(run_backward<void>(one_pass.arguments(p, d), one_pass.workspace).ok());
  REQUIRE(run_backward<void>(sliced.arguments(p, d), sliced.workspace, true).ok());
  const HostGradients a = one_pass.download(), b = sliced.download();
  CHECK(a.all_bytes() == b.all_bytes());
  {  // a workspace between the least and the one-pass size also takes the slices
    const hawk::rglru::BackwardArguments between_args = between.arguments(p, d);
    const std::size_t least = hawk::rglru::backward_min_workspace_size(between_args);
    const std::size_t full = hawk::rglru::backward_workspace_size(between_args);
    REQUIRE(least < full);
    between.workspace.resize(least + (full - least) / 2);
    REQUIRE(hawk::rglru::backward(between_args, hawk_test::raw(between.workspace), between.workspace.size(), nullptr).ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    CHECK(between.download().all_bytes() == a.all_bytes());
  }
  check_against_reference<E>(p, u, b);
  // Negative control: the comparison sees one flipped bit of dWx.
  HostGradients c = b;
  c.dWx_bytes[5] ^= 1;
  CHECK_FALSE(a.all_bytes() == c.all_bytes());
  // One byte below the least workspace: kWorkspaceTooSmall, and the poisoned outputs stay as they were.
  const hawk::rglru::BackwardArguments args = refused.arguments(p, d);
  const HostGradients before = refused.download();
  thrust::device_vector<unsigned char> small(hawk::rglru::backward_min_workspace_size(args) - 1);
  const hawk::Status status = hawk::rglru::backward(args, hawk_test::raw(small), small.size(), nullptr);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  CHECK(status.code() == hawk::StatusCode::kWorkspaceTooSmall);
  INFO(status.to_string());
  CHECK(status.to_string().find("min_workspace_size(args)") != std::string::npos);
  CHECK(refused.download().all_bytes() == before.all_bytes());
}

namespace {

//! The default backward of 4 · 1024 + 300 tokens at width W and H blocks, with workspaces between the least and the
//! one-pass size: each takes the longest whole-unit slices it holds, and every gradient is the one pass's bytes.
void check_slice_lengths(std::int64_t width, std::int64_t heads) {
  // 4 · 1024 + 300 tokens: slices of 1024 (five, the last of 300), 2048 (three), 3072 (two, the last of 1324: two dW
  // segments, the second partial) and 4096 (two, the last of 300); every workspace size into fresh poisoned outputs.
  constexpr std::int64_t kUnit = hawk::rglru::kBackwardTimeSliceTokens;
  INFO("W = " << width << ", H = " << heads);
  const rglru_test::Problem p = rglru_test::make_problem<E>(width, heads, {4 * kUnit + 300}, false,
                                                            GateMode::kFused, hawk::rglru::ResetMode::kFlags, true);
  const Upstream u = make_upstream<E>(p, true);
  DeviceProblem<E> d(p, hawk::rglru::kDefaultTimeChunk);
  REQUIRE(rglru_test::run_forward<void>(d.arguments(p), d.workspace).ok());
  DeviceGradients<E> one_pass(p, u);
  REQUIRE(run_backward<void>(one_pass.arguments(p, d), one_pass.workspace).ok());
  const HostGradients reference = one_pass.download();
  check_against_reference<E>(p, u, reference);
  const hawk::rglru::BackwardArguments probe_args = one_pass.arguments(p, d);
  const std::size_t full = hawk::rglru::backward_workspace_size(probe_args);
  auto layout_bytes = [&](std::int64_t units) {  // the workspace that slices of `units` · 1024 tokens take
    return hawk::rglru::BackwardWorkspaceLayout::make(probe_args, hawk::rglru::kWeightGradSegment,
                                                      hawk::rglru::kDefaultTimeChunk, units * kUnit)
        .total;
  };
  REQUIRE(layout_bytes(1) == hawk::rglru::backward_min_workspace_size(probe_args));
  std::vector<std::pair<std::size_t, std::int64_t>> sizes;  // (workspace bytes, the slice it must take)
  for (std::int64_t units = 1; units <= 4; ++units) {
    REQUIRE(layout_bytes(units) < full);
    if (units > 1) sizes.emplace_back(layout_bytes(units) - 1, (units - 1) * kUnit);
    sizes.emplace_back(layout_bytes(units), units * kUnit);
  }
  sizes.emplace_back(full - 1, 4 * kUnit);  // 5 · 1024 would be longer than T: the longest slice is 4 units
  for (const auto& [bytes, slice_tokens] : sizes) {
    INFO("workspace " << bytes << " bytes, slices of " << slice_tokens);
    DeviceGradients<E> g(p, u);
    const hawk::rglru::BackwardArguments args = g.arguments(p, d);
    CHECK(hawk::rglru::backward_time_slice_tokens(args, bytes) == slice_tokens);
    g.workspace.resize(bytes);
    HAWK_TEST_CUDA(cudaMemset(hawk_test::raw(g.workspace), 0xFF, bytes));
    REQUIRE(hawk::rglru::backward(args, hawk_test::raw(g.workspace), g.workspace.size(), nullptr).ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    CHECK(g.download().all_bytes() == reference.all_bytes());
    // The call took slices of slice_tokens, not shorter ones (which give the same bits): the first slice, tokens
    // [0, slice_tokens), wrote every one of its fp32 dgx rows over the workspace's 0xFF bytes.
    const auto layout = hawk::rglru::BackwardWorkspaceLayout::make(args, hawk::rglru::kWeightGradSegment,
                                                                   hawk::rglru::kDefaultTimeChunk, slice_tokens);
    REQUIRE(layout.row_tokens == slice_tokens);
    std::vector<std::uint32_t> dgx_rows(static_cast<std::size_t>(slice_tokens * p.width));
    HAWK_TEST_CUDA(cudaMemcpy(dgx_rows.data(), hawk_test::raw(g.workspace) + layout.dgx,
                              dgx_rows.size() * sizeof(std::uint32_t), cudaMemcpyDeviceToHost));
    CHECK(std::count(dgx_rows.begin(), dgx_rows.end(), 0xFFFFFFFFu) == 0);
  }
  CHECK(hawk::rglru::backward_time_slice_tokens(probe_args, full) == 0);
  // Negative control: the comparison sees one flipped bit of dWa.
  HostGradients flipped = reference;
  flipped.dWa_bytes[11] ^= 1;
  CHECK_FALSE(flipped.all_bytes() == reference.all_bytes());
}

}  // namespace

TEST_CASE("a workspace between the least and the one-pass size takes the longest time slices it holds (whole "
          "1024-token units, the last slice the remainder) and gives the one-pass bits at every length",
          "[rglru][backward][time_slices]") {
  check_slice_lengths(256, 2);  // w = 128
  check_slice_lengths(256, 4);  // w = 64: the scans compute dx (kDxInScan), the products dW alone
  check_slice_lengths(512, 2);  // w = 256
}

TEST_CASE("the fused backward's overlapped launches (scan, weight gradients, dx) read only what the scan wrote: a "
          "workspace of NaN bytes before every call, a long sequence beside short and empty ones, the same bytes "
          "over repeat calls",
          "[rglru][backward][chunked_scan][dependent_launch]") {
  check_poisoned_workspace_over_repeat_calls<BackwardScan::kChunked>();
  check_poisoned_workspace_over_repeat_calls<BackwardScan::kSequential>();
}
