// Bitwise properties of the RG-LRU forward through the default dispatch (SPEC §3): a sequence's y and final
// state do not depend on the batch around it (batch invariance), nor on how it is split into calls with the
// fp32 state passed along, down to token-by-token decode through a state pool (split invariance). Each
// property has a negative control showing that the byte comparison does detect a change.

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <type_traits>
#include <utility>

#include "support.cuh"

namespace {

using rglru_test::DeviceProblem;
using rglru_test::ForwardArguments;
using rglru_test::GateMode;
using rglru_test::Problem;
using rglru_test::ResetMode;

using Bytes = std::vector<unsigned char>;

//! One sequence's inputs: [length, W] rows of x (gx, ga), its flags and its initial state row.
struct Sequence {
  std::int64_t length = 0;
  std::vector<double> x, gx, ga, h0;
  std::vector<std::uint8_t> reset;
};

//! Sequence `n` of a problem, cut out.
Sequence take(const Problem& p, std::int64_t n) {
  Sequence s;
  const auto W = static_cast<std::size_t>(p.width);
  const auto begin = static_cast<std::size_t>(p.cu_seqlens[n]), end = static_cast<std::size_t>(p.cu_seqlens[n + 1]);
  s.length = static_cast<std::int64_t>(end - begin);
  s.x.assign(p.x.begin() + begin * W, p.x.begin() + end * W);
  if (!p.gx.empty()) {
    s.gx.assign(p.gx.begin() + begin * W, p.gx.begin() + end * W);
    s.ga.assign(p.ga.begin() + begin * W, p.ga.begin() + end * W);
  }
  if (!p.reset.empty()) s.reset.assign(p.reset.begin() + begin, p.reset.begin() + end);
  if (!p.h0.empty()) s.h0.assign(p.h0.begin() + n * W, p.h0.begin() + (n + 1) * W);
  return s;
}

//! Overwrite sequence `n` of `p` (same length) with `s`.
void place(Problem& p, std::int64_t n, const Sequence& s) {
  const auto W = static_cast<std::size_t>(p.width);
  const auto begin = static_cast<std::size_t>(p.cu_seqlens[n]);
  REQUIRE(p.cu_seqlens[n + 1] - p.cu_seqlens[n] == s.length);
  std::copy(s.x.begin(), s.x.end(), p.x.begin() + begin * W);
  if (!s.gx.empty()) {
    std::copy(s.gx.begin(), s.gx.end(), p.gx.begin() + begin * W);
    std::copy(s.ga.begin(), s.ga.end(), p.ga.begin() + begin * W);
  }
  if (!s.reset.empty()) std::copy(s.reset.begin(), s.reset.end(), p.reset.begin() + begin);
  if (!s.h0.empty()) std::copy(s.h0.begin(), s.h0.end(), p.h0.begin() + n * W);
}

//! The bytes of sequence n's y rows and final state after one default-dispatch call on `p`.
template <class E>
std::pair<Bytes, Bytes> run_and_take(const Problem& p, std::int64_t n) {
  DeviceProblem<E> d(p);
  const hawk::Status status = rglru_test::run_forward<void>(d.arguments(p), d.workspace);
  INFO(status.to_string());
  REQUIRE(status.ok());
  const Bytes y = hawk_test::bytes_of(d.y), h = hawk_test::bytes_of(d.h_final);
  const auto row = static_cast<std::size_t>(p.width) * sizeof(E);
  const auto state = static_cast<std::size_t>(p.width) * sizeof(float);
  return {Bytes(y.begin() + p.cu_seqlens[n] * row, y.begin() + p.cu_seqlens[n + 1] * row),
          Bytes(h.begin() + n * state, h.begin() + (n + 1) * state)};
}

//! w = 128 reaches the sequential, chunked and (sm_90a builds) one-shot Hopper kernels through forward(), depending
//! on the batch; w = 256 in 16-bit fused mode the persistent Hopper kernel at every batch here (sequences average
//! more than 128 tokens) on sm_90a builds.
template <class E>
void check_batch_invariance(GateMode mode, ResetMode reset_mode, bool with_h0, std::int64_t w = 128) {
  const std::int64_t H = 2, W = w * H, L = 200;
  INFO("mode=" << rglru_test::mode_name(mode) << " reset_mode=" << static_cast<int>(reset_mode) << " h0=" << with_h0
               << " w=" << w);
  // The sequence under test, and the parameters every batch shares.
  const Problem base = rglru_test::make_problem<E>(W, H, {L}, false, mode, reset_mode, with_h0);
  const Sequence target = take(base, 0);
  const auto alone = run_and_take<E>(base, 0);

  auto with_params = [&](Problem p) {
    p.params = base.params;
    return p;
  };
  // Dense batches of 1 .. 64 sequences, the target first, in the middle and last.
  for (std::int64_t batch : {1, 2, 7, 64}) {
    for (std::int64_t position : {std::int64_t{0}, batch / 2, batch - 1}) {
      INFO("dense batch " << batch << ", position " << position);
      Problem p = with_params(rglru_test::make_problem<E>(W, H, std::vector<std::int64_t>(batch, L), false, mode,
                                                          reset_mode, with_h0));
      place(p, position, target);
      const auto in_batch = run_and_take<E>(p, position);
      CHECK(in_batch.first == alone.first);
      CHECK(in_batch.second == alone.second);
    }
  }
  // Packed batches: neighbours of other lengths (an empty one, one token, more than a chunk).
  for (std::int64_t position : {0, 2, 4}) {
    INFO("packed batch, position " << position);
    std::vector<std::int64_t> lengths = {33, 1, 517, 0, 70};
    lengths[static_cast<std::size_t>(position)] = L;
    Problem p = with_params(rglru_test::make_problem<E>(W, H, lengths, true, mode, reset_mode, with_h0));
    place(p, position, target);
    const auto in_batch = run_and_take<E>(p, position);
    CHECK(in_batch.first == alone.first);
    CHECK(in_batch.second == alone.second);
  }
  // Negative control: one input of the sequence itself changed by a little (x of the last token, so that the
  // final state sees it whatever the gates): the comparison must see it.
  Problem changed = base;
  auto& value = changed.x[static_cast<std::size_t>((L - 1) * W + 3)];
  value = rglru_test::quantize_nudge<E>(value);
  const auto different = run_and_take<E>(changed, 0);
  CHECK_FALSE((different.first == alone.first && different.second == alone.second));
}

}  // namespace

TEST_CASE("a sequence's output is bitwise independent of the batch around it (dense 1..64 at any position, packed)",
          "[rglru][forward][invariance]") {
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    check_batch_invariance<__nv_bfloat16>(mode, ResetMode::kFlags, true);
    check_batch_invariance<__nv_bfloat16>(mode, ResetMode::kNone, false);
  }
  for (ResetMode reset_mode : {ResetMode::kFlags, ResetMode::kSequenceStart}) {
    check_batch_invariance<__nv_bfloat16>(GateMode::kFused, reset_mode, true, 256);
  }
  check_batch_invariance<float>(GateMode::kFused, ResetMode::kSequenceStart, true);
  check_batch_invariance<__half>(GateMode::kGateLogits, ResetMode::kSequenceStart, false);
}

namespace {

//! A problem holding tokens [from, to) of sequence 0 of `full`, starting from state `h0` (empty = none).
Problem slice(const Problem& full, std::int64_t from, std::int64_t to, const std::vector<double>& h0,
              ResetMode reset_mode) {
  Problem p = full;
  const auto W = static_cast<std::size_t>(full.width);
  p.cu_seqlens = {0, to - from};
  p.x.assign(full.x.begin() + from * W, full.x.begin() + to * W);
  if (!full.gx.empty()) {
    p.gx.assign(full.gx.begin() + from * W, full.gx.begin() + to * W);
    p.ga.assign(full.ga.begin() + from * W, full.ga.begin() + to * W);
  }
  p.reset_mode = reset_mode;
  p.reset.clear();
  if (reset_mode == ResetMode::kFlags) p.reset.assign(full.reset.begin() + from, full.reset.begin() + to);
  p.with_h0 = !h0.empty();
  p.h0 = h0;
  return p;
}

//! y and h_final of a one-sequence problem, as bytes, and h_final as values (to pass on).
template <class E>
struct PieceResult {
  Bytes y, h_bytes;
  std::vector<double> h;
};

template <class E>
PieceResult<E> run_piece(const Problem& p) {
  DeviceProblem<E> d(p);
  const hawk::Status status = rglru_test::run_forward<void>(d.arguments(p), d.workspace);
  INFO(status.to_string());
  REQUIRE(status.ok());
  return {hawk_test::bytes_of(d.y), hawk_test::bytes_of(d.h_final), hawk_test::to_host(d.h_final)};
}

//! Every split point of a short sequence: two calls with the fp32 state passed along equal one call.
//! `first` is the reset mode of the whole sequence and of the first piece; `rest` that of the continuation
//! (a sequence-start reset is not continued: prefill with ResetAtSequenceStart, continue with NoReset).
template <class E>
void check_split_invariance(GateMode mode, ResetMode first, ResetMode rest, bool with_h0) {
  const std::int64_t w = 128, H = 2, W = w * H, L = 37;
  INFO("mode=" << rglru_test::mode_name(mode) << " first=" << static_cast<int>(first) << " rest="
               << static_cast<int>(rest) << " h0=" << with_h0);
  const Problem full = rglru_test::make_problem<E>(W, H, {L}, false, mode, first, with_h0);
  const auto whole = run_piece<E>(full);
  const auto row = static_cast<std::size_t>(W) * sizeof(E);
  for (std::int64_t split = 1; split < L; ++split) {
    INFO("split at " << split);
    const auto a = run_piece<E>(slice(full, 0, split, full.h0, first));
    const auto b = run_piece<E>(slice(full, split, L, a.h, rest));
    Bytes y = a.y;
    y.insert(y.end(), b.y.begin(), b.y.end());
    CHECK(y == whole.y);
    CHECK(b.h_bytes == whole.h_bytes);
    REQUIRE(y.size() == static_cast<std::size_t>(L) * row);
  }
  // Negative control: an input of the second piece changed by a little (x of its last token, one channel):
  // the comparison sees it.
  const auto a = run_piece<E>(slice(full, 0, L / 2, full.h0, first));
  Problem second = slice(full, L / 2, L, a.h, rest);
  auto& value = second.x[static_cast<std::size_t>((L - L / 2 - 1) * W + 5)];
  value = rglru_test::quantize_nudge<E>(value);
  const auto b = run_piece<E>(second);
  Bytes y = a.y;
  y.insert(y.end(), b.y.begin(), b.y.end());
  CHECK_FALSE((y == whole.y && b.h_bytes == whole.h_bytes));
}

}  // namespace

TEST_CASE("running a sequence in two pieces with the fp32 state passed along equals one call, at every split point",
          "[rglru][forward][invariance]") {
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    check_split_invariance<__nv_bfloat16>(mode, ResetMode::kNone, ResetMode::kNone, true);
    check_split_invariance<__nv_bfloat16>(mode, ResetMode::kNone, ResetMode::kNone, false);
    check_split_invariance<__nv_bfloat16>(mode, ResetMode::kFlags, ResetMode::kFlags, true);
    check_split_invariance<__nv_bfloat16>(mode, ResetMode::kSequenceStart, ResetMode::kNone, false);
  }
  check_split_invariance<float>(GateMode::kFused, ResetMode::kSequenceStart, ResetMode::kNone, true);
  check_split_invariance<__half>(GateMode::kFused, ResetMode::kFlags, ResetMode::kFlags, false);
}

namespace {

//! Prefill `prefill` tokens of N sequences into rows `slots` of a state pool, then decode the rest `step`
//! tokens at a time through hawk::rglru::decode (h0 == h_final == the pool, state_index = slots); compare y
//! and the pool with one full-length call. Pool rows no sequence owns must keep their values.
template <class E>
void check_decode_matches_prefill(GateMode mode, std::int64_t step, bool perturb) {
  const std::int64_t w = 128, H = 2, W = w * H, N = 3, L = 40, prefill = 13, S = 6;
  const std::vector<std::int32_t> slots = {4, 1, 5};
  INFO("mode=" << rglru_test::mode_name(mode) << " step=" << step << " perturb=" << perturb);
  Problem full = rglru_test::make_problem<E>(W, H, std::vector<std::int64_t>(N, L), false, mode,
                                             ResetMode::kSequenceStart, false);
  DeviceProblem<E> whole(full);
  REQUIRE(rglru_test::run_forward<void>(whole.arguments(full), whole.workspace).ok());
  const Bytes y_whole = hawk_test::bytes_of(whole.y);
  const std::vector<double> h_whole = hawk_test::to_host(whole.h_final);

  if (perturb) {  // negative control: a decoded token's input changed by a little
    auto& value = full.x[static_cast<std::size_t>((L + L - 1) * W + 9)];  // sequence 1, last token
    value = rglru_test::quantize_nudge<E>(value);
  }
  const std::vector<double> pool_init =
      hawk_test::random_uniform(static_cast<std::size_t>(S * W), -1.0, 1.0, hawk_test::fresh_seed());
  thrust::device_vector<float> pool = hawk_test::to_device<float>(pool_init);
  thrust::device_vector<std::int32_t> slot_index(slots.begin(), slots.end());
  const auto row = static_cast<std::size_t>(W) * sizeof(E);
  std::vector<Bytes> y_per_sequence(static_cast<std::size_t>(N));

  for (std::int64_t from = 0; from < L;) {
    const std::int64_t to = from == 0 ? prefill : std::min(L, from + step);
    // Tokens [from, to) of every sequence, as a dense batch.
    Problem piece = full;
    piece.cu_seqlens = hawk::reference::dense_cu_seqlens(N, to - from);
    piece.x.clear();
    piece.gx.clear();
    piece.ga.clear();
    for (std::int64_t n = 0; n < N; ++n) {
      const auto b = static_cast<std::size_t>((n * L + from) * W), e = static_cast<std::size_t>((n * L + to) * W);
      piece.x.insert(piece.x.end(), full.x.begin() + b, full.x.begin() + e);
      if (mode == GateMode::kGateLogits) {
        piece.gx.insert(piece.gx.end(), full.gx.begin() + b, full.gx.begin() + e);
        piece.ga.insert(piece.ga.end(), full.ga.begin() + b, full.ga.begin() + e);
      }
    }
    piece.reset_mode = from == 0 ? ResetMode::kSequenceStart : ResetMode::kNone;
    DeviceProblem<E> d(piece);
    ForwardArguments args = d.arguments(piece);
    args.shape.num_state_rows = S;
    args.state_index = hawk_test::raw(slot_index);
    args.h_final = hawk_test::raw(pool);
    args.checkpoints = nullptr;
    hawk::Status status;
    if (from == 0) {
      args.h0 = nullptr;
      status = hawk::rglru::forward(args, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
    } else {
      args.h0 = hawk_test::raw(pool);  // in place
      status = hawk::rglru::decode(args, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
    }
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    INFO(status.to_string());
    REQUIRE(status.ok());
    const Bytes y = hawk_test::bytes_of(d.y);
    for (std::int64_t n = 0; n < N; ++n) {
      auto& out = y_per_sequence[static_cast<std::size_t>(n)];
      out.insert(out.end(), y.begin() + n * (to - from) * row, y.begin() + (n + 1) * (to - from) * row);
    }
    from = to;
  }
  Bytes y_decoded;
  for (const auto& part : y_per_sequence) y_decoded.insert(y_decoded.end(), part.begin(), part.end());
  const std::vector<double> pool_final = hawk_test::to_host(pool);
  bool states_equal = true, untouched = true;
  for (std::int64_t s = 0; s < S; ++s) {
    const auto owner = std::find(slots.begin(), slots.end(), s);
    for (std::int64_t c = 0; c < W; ++c) {
      const auto i = static_cast<std::size_t>(s * W + c);
      const float have = static_cast<float>(pool_final[i]);
      if (owner == slots.end()) {
        const float initial = static_cast<float>(pool_init[i]);
        if (std::memcmp(&initial, &have, sizeof(float)) != 0) untouched = false;
      } else {
        const auto n = static_cast<std::size_t>(owner - slots.begin());
        const float want = static_cast<float>(h_whole[n * static_cast<std::size_t>(W) + static_cast<std::size_t>(c)]);
        if (std::memcmp(&want, &have, sizeof(float)) != 0) states_equal = false;
      }
    }
  }
  CHECK(untouched);
  if (perturb) {
    CHECK_FALSE((y_decoded == y_whole && states_equal));
  } else {
    CHECK(y_decoded == y_whole);
    CHECK(states_equal);
  }
}

}  // namespace

TEST_CASE("token-by-token decode through a state pool (in place, state_index) equals one prefill call bitwise",
          "[rglru][forward][invariance][decode]") {
  for (GateMode mode : {GateMode::kFused, GateMode::kGateLogits}) {
    check_decode_matches_prefill<__nv_bfloat16>(mode, 1, false);
    check_decode_matches_prefill<__nv_bfloat16>(mode, 3, false);
    check_decode_matches_prefill<__nv_bfloat16>(mode, 1, true);  // negative control
  }
  check_decode_matches_prefill<float>(GateMode::kFused, 1, false);
  check_decode_matches_prefill<__half>(GateMode::kFused, 1, false);
}

TEST_CASE("a run is bitwise repeatable", "[rglru][forward][determinism]") {
  const Problem p = rglru_test::make_problem<__nv_bfloat16>(512, 4, {300, 300, 300}, false, GateMode::kFused,
                                                            ResetMode::kFlags, true);
  const auto first = run_and_take<__nv_bfloat16>(p, 1);
  for (int repeat = 0; repeat < 3; ++repeat) {
    const auto again = run_and_take<__nv_bfloat16>(p, 1);
    CHECK(again.first == first.first);
    CHECK(again.second == first.second);
  }
}

namespace {

//! The producer / scan-warp hand-off under load: 41 chunks per sequence, so each hand-off barrier goes through
//! many phases, and 64 CTAs sharing the SMs. A missing wait would show as y, h_final or checkpoints that change
//! between repetitions of the same call.
template <class E>
void check_repeatable_under_load(GateMode mode) {
  INFO("mode=" << rglru_test::mode_name(mode));
  const bool sanitizing = std::getenv("HAWK_SANITIZE") != nullptr;  // racecheck: a few repetitions suffice
  const int repetitions = sanitizing ? 2 : 200;
  const std::int64_t L = 40 * hawk::rglru::kDefaultTimeChunk + 17;
  const Problem p = rglru_test::make_problem<E>(1024, 8, std::vector<std::int64_t>(8, L), false, mode,
                                                ResetMode::kFlags, true);
  DeviceProblem<E> d(p);
  REQUIRE(rglru_test::run_forward<void>(d.arguments(p), d.workspace).ok());
  const Bytes y = hawk_test::bytes_of(d.y), h = hawk_test::bytes_of(d.h_final);
  const Bytes checkpoints = hawk_test::bytes_of(d.checkpoints);
  int changed = 0;
  for (int repeat = 1; repeat < repetitions; ++repeat) {
    // Poison the outputs, so that an element the kernel skipped would differ too.
    HAWK_TEST_CUDA(cudaMemset(hawk_test::raw(d.y), 0xA5, d.y.size() * sizeof(E)));
    HAWK_TEST_CUDA(cudaMemset(hawk_test::raw(d.h_final), 0xA5, d.h_final.size() * sizeof(float)));
    REQUIRE(rglru_test::run_forward<void>(d.arguments(p), d.workspace).ok());
    changed += hawk_test::bytes_of(d.y) != y || hawk_test::bytes_of(d.h_final) != h ||
               hawk_test::bytes_of(d.checkpoints) != checkpoints;
  }
  CHECK(changed == 0);
  // Negative control: one changed input token must change y, so the comparison above can fail.
  Problem nudged = p;
  nudged.x[static_cast<std::size_t>(L / 2) * static_cast<std::size_t>(p.width) + 5] += 0.25;
  DeviceProblem<E> e(nudged);
  REQUIRE(rglru_test::run_forward<void>(e.arguments(nudged), e.workspace).ok());
  CHECK(hawk_test::bytes_of(e.y) != y);
}

}  // namespace

TEST_CASE("the producer / scan hand-off is bitwise repeatable under load (200 runs, 41 chunks per sequence)",
          "[rglru][forward][determinism]") {
  check_repeatable_under_load<__nv_bfloat16>(GateMode::kFused);
  check_repeatable_under_load<__nv_bfloat16>(GateMode::kGateLogits);
  check_repeatable_under_load<float>(GateMode::kFused);
}

namespace {

//! The shipped configuration with per-token reset flags for a dtype, mode and block width.
template <class E, GateMode Mode, int BlockWidth>
using ShippedFlagsConfig =
    typename std::conditional<Mode == GateMode::kFused,
                              hawk::rglru::DefaultFusedConfig<E, BlockWidth, hawk::rglru::ResetFlags>,
                              hawk::rglru::DefaultGateLogitsConfig<E, hawk::rglru::ResetFlags>>::type::type;

//! One decode step of N sequences (one token each, reset flags on every other one) from shuffled rows of a
//! state pool, in place, run three ways: Forward<Config> (one CTA per sequence and width tile), DecodeStep<Config>
//! (64 sequences per CTA) and hawk::rglru::decode (which picks DecodeStep). y and the pool must match bit for bit,
//! and pool rows no sequence owns must keep their values.
template <class E, GateMode Mode, int BlockWidth>
void check_decode_step_matches_forward() {
  using Config = ShippedFlagsConfig<E, Mode, BlockWidth>;
  const std::int64_t H = Mode == GateMode::kFused ? 2 : 3, W = BlockWidth * H, N = 150, S = 211;
  INFO("mode=" << rglru_test::mode_name(Mode) << " w=" << BlockWidth << " width tile " << Config::kWidthTile);
  const Problem p = rglru_test::make_problem<E>(W, H, std::vector<std::int64_t>(N, 1), false, Mode,
                                                ResetMode::kFlags, false);
  std::vector<std::int32_t> slots(static_cast<std::size_t>(S));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), std::mt19937_64(hawk_test::fresh_seed()));
  slots.resize(static_cast<std::size_t>(N));
  thrust::device_vector<std::int32_t> slot_index(slots.begin(), slots.end());
  const std::vector<double> pool_init =
      hawk_test::random_uniform(static_cast<std::size_t>(S * W), -1.0, 1.0, hawk_test::fresh_seed());

  auto run = [&](int how, const Problem& problem) {
    DeviceProblem<E> d(problem);
    thrust::device_vector<float> pool = hawk_test::to_device<float>(pool_init);
    ForwardArguments args = d.arguments(problem);
    args.shape.num_state_rows = S;
    args.state_index = hawk_test::raw(slot_index);
    args.h0 = hawk_test::raw(pool);
    args.h_final = hawk_test::raw(pool);
    args.checkpoints = nullptr;
    HAWK_TEST_CUDA(cudaMemset(hawk_test::raw(d.y), 0xA5, d.y.size() * sizeof(E)));  // poison
    void* workspace = hawk_test::raw(d.workspace);
    hawk::Status status;
    if (how == 0) status = hawk::rglru::Forward<Config>::run(args, workspace, d.workspace.size(), nullptr);
    if (how == 1) {
      REQUIRE(hawk::rglru::DecodeStep<Config>::applies(args));
      status = hawk::rglru::DecodeStep<Config>::run(args, workspace, d.workspace.size(), nullptr);
    }
    if (how == 2) {
      REQUIRE(hawk::rglru::DecodeStep<Config>::applies(args));  // the condition under which decode() takes it
      status = hawk::rglru::decode(args, workspace, d.workspace.size(), nullptr);
    }
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    INFO("way " << how << ": " << status.to_string());
    REQUIRE(status.ok());
    return std::make_pair(hawk_test::bytes_of(d.y), hawk_test::bytes_of(pool));
  };
  const auto by_forward = run(0, p);
  const auto by_decode_step = run(1, p);
  const auto by_decode = run(2, p);
  CHECK(by_decode_step.first == by_forward.first);
  CHECK(by_decode_step.second == by_forward.second);
  CHECK(by_decode.first == by_forward.first);
  CHECK(by_decode.second == by_forward.second);
  // Rows of the pool that no sequence owns are untouched.
  const Bytes initial = hawk_test::bytes_of(hawk_test::to_device<float>(pool_init));
  std::vector<bool> owned(static_cast<std::size_t>(S), false);
  for (auto s : slots) owned[static_cast<std::size_t>(s)] = true;
  const auto row = static_cast<std::size_t>(W) * sizeof(float);
  std::size_t changed_unowned = 0, changed_owned = 0;
  for (std::size_t s = 0; s < static_cast<std::size_t>(S); ++s) {
    const bool same = std::memcmp(initial.data() + s * row, by_decode.second.data() + s * row, row) == 0;
    (owned[s] ? changed_owned : changed_unowned) += same ? 0 : 1;
  }
  CHECK(changed_unowned == 0);
  CHECK(changed_owned == static_cast<std::size_t>(N));
  // Negative control: one changed input of sequence 77 changes the decode step's y. Moved by 1, not by one
  // ulp: a one-ulp change of x can vanish in y's rounding when the carried state outweighs u (seen on the H200
  // at 0de1a9d with HAWK_TEST_SEED=18300621831447830827).
  Problem nudged = p;
  double& moved = nudged.x[static_cast<std::size_t>(77 * W + 3)];
  moved = moved > 0 ? moved - 1.0 : moved + 1.0;
  CHECK(run(1, nudged).first != by_decode_step.first);
}

//! The other state arrangements, straight through DecodeStep<Config> against Forward<Config>: no h0 (a fresh
//! state), and h0 and h_final as separate [N, W] rows without state_index; the policies decode() does not take
//! too (ResetAtSequenceStart) and NoReset.
template <class E, GateMode Mode, class Policy>
void check_decode_step_state_variants() {
  using Config = typename std::conditional<Mode == GateMode::kFused, hawk::rglru::DefaultFusedConfig<E, 128, Policy>,
                                           hawk::rglru::DefaultGateLogitsConfig<E, Policy>>::type::type;
  const std::int64_t H = 2, W = 256, N = 70;
  const Problem p = rglru_test::make_problem<E>(W, H, std::vector<std::int64_t>(N, 1), false, Mode, Policy::kMode,
                                                true);
  for (const bool with_h0 : {false, true}) {
    INFO("mode=" << rglru_test::mode_name(Mode) << " policy=" << Policy::kName << " h0=" << with_h0);
    auto run = [&](bool decode_step) {
      DeviceProblem<E> d(p);
      ForwardArguments args = d.arguments(p);
      if (!with_h0) args.h0 = nullptr;
      args.checkpoints = nullptr;
      HAWK_TEST_CUDA(cudaMemset(hawk_test::raw(d.y), 0xA5, d.y.size() * sizeof(E)));
      HAWK_TEST_CUDA(cudaMemset(hawk_test::raw(d.h_final), 0xA5, d.h_final.size() * sizeof(float)));
      void* workspace = hawk_test::raw(d.workspace);
      REQUIRE(hawk::rglru::DecodeStep<Config>::applies(args));
      const hawk::Status status =
          decode_step ? hawk::rglru::DecodeStep<Config>::run(args, workspace, d.workspace.size(), nullptr)
                      : hawk::rglru::Forward<Config>::run(args, workspace, d.workspace.size(), nullptr);
      HAWK_TEST_CUDA(cudaDeviceSynchronize());
      INFO(status.to_string());
      REQUIRE(status.ok());
      return std::make_pair(hawk_test::bytes_of(d.y), hawk_test::bytes_of(d.h_final));
    };
    const auto by_decode_step = run(true);
    const auto by_forward = run(false);
    CHECK(by_decode_step.first == by_forward.first);
    CHECK(by_decode_step.second == by_forward.second);
  }
}

}  // namespace

TEST_CASE("a decode step without h0, or with separate h0 and h_final rows, gives the forward kernel's bits",
          "[rglru][forward][invariance][decode]") {
  check_decode_step_state_variants<__nv_bfloat16, GateMode::kFused, hawk::rglru::NoReset>();
  check_decode_step_state_variants<__nv_bfloat16, GateMode::kFused, hawk::rglru::ResetAtSequenceStart>();
  check_decode_step_state_variants<float, GateMode::kGateLogits, hawk::rglru::NoReset>();
  check_decode_step_state_variants<__half, GateMode::kGateLogits, hawk::rglru::ResetAtSequenceStart>();
}

TEST_CASE("a decode step of one token per sequence (64 sequences per CTA) gives the forward kernel's bits",
          "[rglru][forward][invariance][decode]") {
  check_decode_step_matches_forward<__nv_bfloat16, GateMode::kFused, 64>();
  check_decode_step_matches_forward<__nv_bfloat16, GateMode::kFused, 128>();
  check_decode_step_matches_forward<__nv_bfloat16, GateMode::kFused, 256>();
  check_decode_step_matches_forward<__nv_bfloat16, GateMode::kGateLogits, 64>();
  check_decode_step_matches_forward<__half, GateMode::kFused, 64>();
  check_decode_step_matches_forward<__half, GateMode::kFused, 128>();
  check_decode_step_matches_forward<__half, GateMode::kFused, 256>();
  check_decode_step_matches_forward<__half, GateMode::kGateLogits, 64>();
  check_decode_step_matches_forward<float, GateMode::kFused, 64>();
  check_decode_step_matches_forward<float, GateMode::kFused, 128>();
  check_decode_step_matches_forward<float, GateMode::kFused, 256>();
  check_decode_step_matches_forward<float, GateMode::kGateLogits, 64>();
}
