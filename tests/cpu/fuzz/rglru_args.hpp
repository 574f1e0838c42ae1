#pragma once
//! \file
//! RG-LRU argument structs for the fuzzer: valid ones drawn at random (`make_forward`, `make_backward`), the
//! pointer tables their null / misalignment / overlap corruptions come from, and the shape, dtype and mode
//! corruptions. Every context type keeps its operator arguments in a member `a` and its fake heap in `heap`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "fuzz.hpp"
#include "hawk/core/dtype.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/modes.hpp"

namespace hawk_fuzz {
namespace rglru_fuzz {

namespace rg = hawk::rglru;
using hawk::DType;
using hawk::StatusCode;
using rg::GateMode;
using rg::ResetMode;

//! What valid structs an entry point takes.
struct Spec {
  DType dtype = DType::kBFloat16;
  GateMode mode = GateMode::kFused;
  ResetMode reset = ResetMode::kSequenceStart;
  int block_width = 64;  //!< fused: w; gate-logits: 0
  int width_tile = 64;   //!< W is a multiple of it
  int time_chunk = 64;   //!< checkpoint_chunk
  enum Shape { kAnyShape, kDecodeStep, kPiece } shape = kAnyShape;
  bool states_required = false;  //!< decode(): h0 and h_final
  bool checkpoints = false;      //!< always give checkpoints (the backward, forward_correct)
  int max_sequences = 8;
  int max_len = 300;
};

//! What the corruptions may assume about the entry point.
struct Target {
  bool explicit_config = true;  //!< an operator of one configuration (else the default dispatch)
  bool fused_fixed_width = false;  //!< explicit fused: any change of w is refused
  Spec::Shape shape = Spec::kAnyShape;
  bool decode_dispatch = false;   //!< rglru::decode(): h0, h_final required, no kSequenceStart
  bool backward = false;
  bool checkpoints_required = false;
};

//! The forward's context; the context-parallel entry points' extra operands live here too (one context type
//! for every forward-like entry point keeps the template instantiations, and the build time, down).
struct ForwardCtx {
  rg::ForwardArguments a;
  FakeHeap heap;
  float* transfer_decay = nullptr;  //!< forward_transfer's decay [N, W]
  float* h_end = nullptr;           //!< forward_transfer's / forward_correct's h_end [N, W]
  const float* carry_in = nullptr;  //!< forward_with_carry's / forward_correct's carry-in
  std::int64_t prefix_tokens = 0;   //!< forward_correct
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::size_t workspace_needed = 0;  //!< what the entry point's workspace-size function asked for
};

struct BackwardCtx {
  rg::BackwardArguments a;
  FakeHeap heap;
  float* dh0_zero = nullptr;             //!< backward_transfer(_split) / backward_correct
  float* boundary_dh = nullptr;          //!< backward_transfer_split / backward_correct
  const float* piece_dh_final = nullptr; //!< backward_correct's dh_final
  std::int64_t suffix_tokens = 0;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::size_t workspace_needed = 0;
};

inline std::int64_t element_bytes(DType dtype) { return static_cast<std::int64_t>(hawk::size_of(dtype)); }

template <class Args>
std::int64_t state_rows(const Args& a) {
  return a.state_index != nullptr ? a.shape.num_state_rows : a.shape.num_sequences;
}
template <class Args>
std::size_t row_bytes(const Args& a) {
  return extent(a.shape.num_tokens, a.shape.width, element_bytes(a.dtype));
}
template <class Args>
std::size_t state_bytes(const Args& a) {
  return extent(state_rows(a), a.shape.width, 4);
}
template <class Args>
std::size_t weight_bytes(const Args& a) {
  const std::int64_t w = a.shape.num_blocks > 0 ? a.shape.width / a.shape.num_blocks : 0;
  return extent(a.shape.num_blocks, w, w) * static_cast<std::size_t>(element_bytes(a.dtype));
}
template <class Args>
std::size_t channel_bytes(const Args& a) {
  return extent(a.shape.width, 4);
}
template <class Args>
std::size_t checkpoint_bytes(const Args& a) {
  const std::int64_t chunk = a.checkpoint_chunk > 0 ? a.checkpoint_chunk : 1;
  const std::int64_t tokens = a.shape.num_tokens > 0 ? a.shape.num_tokens : 0;
  const std::int64_t n = a.shape.num_sequences > 0 && a.shape.num_sequences < (std::int64_t{1} << 40) ? a.shape.num_sequences : 0;
  return extent(tokens / chunk + n, a.shape.width, 4);
}

//! Divisors of `value` (small values only).
inline std::vector<std::int64_t> divisors(std::int64_t value) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= value; ++d)
    if (value % d == 0) out.push_back(d);
  return out;
}

//! The shape, states, checkpoints and flags shared by forward and backward structs.
template <class Args>
void make_common(const Spec& spec, Rng& rng, FakeHeap& heap, Args& a) {
  a.dtype = spec.dtype;
  a.mode = spec.mode;
  a.reset_mode = spec.reset;
  rg::ProblemShape& s = a.shape;
  const bool decode_step = spec.shape == Spec::kDecodeStep;
  s.num_sequences = decode_step ? rng.range(1, 300) : rng.range(1, spec.max_sequences);
  if (spec.mode == GateMode::kFused) {
    s.num_blocks = rng.range(1, 4);
    s.width = s.num_blocks * spec.block_width;
  } else {
    s.width = spec.width_tile * rng.range(1, 8);
    s.num_blocks = rng.pick(divisors(s.width));
  }
  const bool packed = spec.shape == Spec::kAnyShape && rng.chance(0.3);
  if (packed) {
    s.num_tokens = rng.range(1, 1000);
    s.seq_len = rng.chance(0.5) ? 0 : rng.range(-5, 500);  // ignored when packed
    s.cu_seqlens = heap.take_as<const std::int32_t>(static_cast<std::size_t>(s.num_sequences + 1) * 4);
  } else {
    s.seq_len = decode_step ? 1 : rng.range(1, spec.max_len);
    s.num_tokens = s.num_sequences * s.seq_len;
  }
  const bool pool = spec.shape != Spec::kPiece && rng.chance(0.3);
  if (pool) {
    s.num_state_rows = rng.range(s.num_sequences, s.num_sequences + 8);
    a.state_index = heap.take_as<const std::int32_t>(static_cast<std::size_t>(s.num_sequences) * 4);
  } else {
    s.num_state_rows = rng.chance(0.5) ? 0 : rng.range(1, 100);  // ignored without state_index
  }
  s.validate_device_inputs = rng.chance(0.7);
  s.wait_for_device_checks = rng.chance(0.3);
  s.device_check_report = rng.chance(0.2) ? heap.take_as<unsigned int>(4) : nullptr;

  const std::size_t rows = row_bytes(a), states = state_bytes(a);
  const std::size_t channels = channel_bytes(a);
  a.x = heap.take_as<const void>(rows);
  a.a_param = heap.take_as<const float>(channels);
  const bool fused = spec.mode == GateMode::kFused;
  if (fused || rng.chance(0.15)) {  // the other mode's pointers, when given, are ignored
    a.Wx = heap.take_as<const void>(weight_bytes(a));
    a.Wa = heap.take_as<const void>(weight_bytes(a));
    a.bx = heap.take_as<const float>(channels);
    a.ba = heap.take_as<const float>(channels);
  }
  if (!fused || rng.chance(0.15)) {
    a.gx = heap.take_as<const void>(rows);
    a.ga = heap.take_as<const void>(rows);
  }
  if (spec.reset == ResetMode::kFlags) a.reset = heap.take_as<const std::uint8_t>(extent(s.num_tokens));
  if (spec.states_required || rng.chance(0.5)) a.h0 = heap.take_as<const float>(states);
  (void)states;
}

inline rg::ForwardArguments make_forward(const Spec& spec, Rng& rng, FakeHeap& heap) {
  rg::ForwardArguments a;
  make_common(spec, rng, heap, a);
  const std::size_t states = state_bytes(a);
  if (spec.states_required || rng.chance(0.5))
    a.h_final = a.h0 != nullptr && rng.chance(0.4) ? const_cast<float*>(a.h0) : heap.take_as<float>(states);
  if (spec.shape != Spec::kDecodeStep && rng.chance(0.2)) a.decay = heap.take_as<float>(states);
  a.y = heap.take_as<void>(row_bytes(a));
  if (spec.shape != Spec::kDecodeStep && (spec.checkpoints || rng.chance(0.5))) {
    a.checkpoint_chunk = spec.time_chunk;
    a.checkpoints = heap.take_as<float>(checkpoint_bytes(a));
  } else {
    a.checkpoint_chunk = rng.chance(0.5) ? 0 : rng.range(-3, 300);  // ignored without checkpoints
  }
  return a;
}

inline rg::BackwardArguments make_backward(const Spec& spec, Rng& rng, FakeHeap& heap) {
  rg::BackwardArguments a;
  make_common(spec, rng, heap, a);
  const std::size_t rows = row_bytes(a), states = state_bytes(a), channels = channel_bytes(a);
  a.checkpoint_chunk = spec.time_chunk;
  a.checkpoints = heap.take_as<const float>(checkpoint_bytes(a));
  a.dy = heap.take_as<const void>(rows);
  if (rng.chance(0.5)) a.dh_final = heap.take_as<const float>(states);
  a.dx = heap.take_as<void>(rows);
  if (spec.mode == GateMode::kGateLogits || rng.chance(0.15)) {
    a.dgx = heap.take_as<void>(rows);
    a.dga = heap.take_as<void>(rows);
  }
  if (spec.mode == GateMode::kFused || rng.chance(0.15)) {
    a.dWx = heap.take_as<float>(weight_bytes(a));
    a.dWa = heap.take_as<float>(weight_bytes(a));
    a.dbx = heap.take_as<float>(channels);
    a.dba = heap.take_as<float>(channels);
  }
  a.da_param = heap.take_as<float>(channels);
  if (rng.chance(0.5))
    a.dh0 = a.dh_final != nullptr && rng.chance(0.4) ? const_cast<float*>(a.dh_final) : heap.take_as<float>(states);
  return a;
}

// ---- known undefined behaviour (known_gaps.hpp lists the ones that are not fixed yet) --------------------------

inline bool mul_overflows(std::int64_t a, std::int64_t b) {
  std::int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product);
}

//! The integer overflows that the host checks of these arguments can run into (a superset: conditions are
//! evaluated whether or not an earlier check would stop first). Names match known_gaps.hpp; an overflow that
//! include/ has fixed is simply not named here any more (N*L and W*sizeof(E) were, until 0712b5f).
template <class Args>
std::vector<std::string> shape_hazards(const Args& a) {
  std::vector<std::string> h;
  const rg::ProblemShape& s = a.shape;
  // Forward<Config>::can_implement's grid check (Backward's divides instead), reached once check_problem_shape
  // has bounded N < 2^31 - 1 and W <= INT64_MAX / 16 / T.
  const bool bounded = s.num_sequences >= 1 && s.num_sequences < INT32_MAX && s.num_tokens >= 1 && s.width >= 1 &&
                       s.width <= kInt64Max / 16 / s.num_tokens;
  if (std::is_same<Args, rg::ForwardArguments>::value && bounded && mul_overflows(s.num_sequences, s.width / 16))
    h.push_back("N*(W/WidthTile) overflows int64 (Forward::can_implement)");
  // DeviceCheckLayout::of, reached by every workspace_size before any check.
  if (a.state_index != nullptr && s.validate_device_inputs && s.num_state_rows > kInt64Max - 31)
    h.push_back("num_state_rows + 31 overflows int64 (DeviceCheckLayout)");
  return h;
}

//! The context-parallel corrections' own size arithmetic (context_parallel/early_exit.cuh): the [N, W] state
//! bytes and (backward) the parameter-gradient bytes.
template <class Args>
std::vector<std::string> piece_hazards(const Args& a) {
  std::vector<std::string> h = shape_hazards(a);
  const rg::ProblemShape& s = a.shape;
  if (mul_overflows(s.num_sequences, s.width)) h.push_back("N*W overflows int64 (context-parallel state bytes)");
  return h;
}

//! backward_split_workspace_size / backward_transfer_split / backward_correct: suffix_start, backward_rows and
//! parameter_gradient_bytes as well.
template <class Args>
std::vector<std::string> split_hazards(const Args& a, std::int64_t suffix_tokens) {
  std::vector<std::string> h = piece_hazards(a);
  const rg::ProblemShape& s = a.shape;
  const std::int64_t w = s.num_blocks > 0 ? s.width / s.num_blocks : 0;
  std::int64_t ww = 0, total = 0;
  if (__builtin_mul_overflow(s.width, w, &ww) || __builtin_mul_overflow(ww, 2, &ww) ||
      __builtin_mul_overflow(s.width, 2, &total) || __builtin_add_overflow(ww, total, &total) ||
      __builtin_add_overflow(total, s.width, &total))
    h.push_back("2*W*w + 3*W overflows int64 (parameter_gradient_bytes)");
  std::int64_t start = 0;
  if (__builtin_sub_overflow(s.seq_len, suffix_tokens, &start)) {
    h.push_back("L - suffix_tokens overflows int64 (suffix_start)");
  } else if (start > 0) {
    start = start / 64 * 64;
    // backward_rows: row pointers advanced by start * W elements, checkpoints by (start / 64) * W floats.
    // (Fake addresses are about 2^40: an offset of 2^39 either way may wrap around the address space.)
    const long double bytes = static_cast<long double>(start) * static_cast<long double>(s.width) * 4.0L;
    if (bytes >= 0x1.0p39L || bytes <= -0x1.0p39L) h.push_back("suffix offset start*W overflows (backward_rows)");
  }
  return h;
}

// ---- pointer tables ----------------------------------------------------------------------------------------

template <class Ctx>
std::function<Need(const Ctx&)> need(Need n) {
  return [n](const Ctx&) { return n; };
}
template <class Ctx>
std::function<Need(const Ctx&)> need_if_fused() {
  return [](const Ctx& c) { return c.a.mode == GateMode::kFused ? Need::kRequired : Need::kUnused; };
}
template <class Ctx>
std::function<Need(const Ctx&)> need_if_gate_logits() {
  return [](const Ctx& c) { return c.a.mode == GateMode::kFused ? Need::kUnused : Need::kRequired; };
}
template <class Ctx>
std::function<std::size_t(const Ctx&)> rows_extent() {
  return [](const Ctx& c) { return row_bytes(c.a); };
}
template <class Ctx>
std::function<std::size_t(const Ctx&)> states_extent() {
  return [](const Ctx& c) { return state_bytes(c.a); };
}
template <class Ctx>
std::function<std::size_t(const Ctx&)> channels_extent() {
  return [](const Ctx& c) { return channel_bytes(c.a); };
}
template <class Ctx>
std::function<std::size_t(const Ctx&)> weights_extent() {
  return [](const Ctx& c) { return weight_bytes(c.a); };
}

//! The pointers both structs share (inputs), for a context whose arguments are `c.a`.
template <class Ctx>
void add_common_fields(std::vector<PointerField<Ctx>>& f, const Target& t) {
  f.push_back(pointer_field<Ctx>("x", HAWK_FUZZ_POINTER(Ctx, a.x), need<Ctx>(Need::kRequired), 16,
                                 rows_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("Wx", HAWK_FUZZ_POINTER(Ctx, a.Wx), need_if_fused<Ctx>(), 16,
                                 weights_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("Wa", HAWK_FUZZ_POINTER(Ctx, a.Wa), need_if_fused<Ctx>(), 16,
                                 weights_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("bx", HAWK_FUZZ_POINTER(Ctx, a.bx), need_if_fused<Ctx>(), 4,
                                 channels_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("ba", HAWK_FUZZ_POINTER(Ctx, a.ba), need_if_fused<Ctx>(), 4,
                                 channels_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("gx", HAWK_FUZZ_POINTER(Ctx, a.gx), need_if_gate_logits<Ctx>(), 16,
                                 rows_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("ga", HAWK_FUZZ_POINTER(Ctx, a.ga), need_if_gate_logits<Ctx>(), 16,
                                 rows_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("a_param", HAWK_FUZZ_POINTER(Ctx, a.a_param), need<Ctx>(Need::kRequired),
                                 4, channels_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>(
      "reset", HAWK_FUZZ_POINTER(Ctx, a.reset),
      [](const Ctx& c) { return c.a.reset_mode == ResetMode::kFlags ? Need::kRequired : Need::kMeaning; },
      1, [](const Ctx& c) { return extent(c.a.shape.num_tokens); }, false));
  f.push_back(pointer_field<Ctx>("h0", HAWK_FUZZ_POINTER(Ctx, a.h0),
                                 need<Ctx>(t.decode_dispatch ? Need::kRequired : Need::kOptional), 4,
                                 states_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("state_index", HAWK_FUZZ_POINTER(Ctx, a.state_index), need<Ctx>(Need::kOptional),
                                 4, [](const Ctx& c) { return extent(c.a.shape.num_sequences, 4); },
                                 false));
  f.push_back(pointer_field<Ctx>(
      "cu_seqlens", HAWK_FUZZ_POINTER(Ctx, a.shape.cu_seqlens), need<Ctx>(Need::kMeaning), 4,
      [](const Ctx& c) { return extent(c.a.shape.num_sequences > 0 ? c.a.shape.num_sequences + 1 : 0, 4); }, false));
  // The report word: a device-side output of the checks, but no rule about where it lives beyond alignment.
  f.push_back(pointer_field<Ctx>("device_check_report", HAWK_FUZZ_POINTER(Ctx, a.shape.device_check_report),
                                 need<Ctx>(Need::kOptional), 4,
                                 [](const Ctx&) { return std::size_t{4}; }, false));
}

template <class Ctx>
std::vector<PointerField<Ctx>> forward_fields(const Target& t) {
  std::vector<PointerField<Ctx>> f;
  add_common_fields(f, t);
  f.push_back(pointer_field<Ctx>("y", HAWK_FUZZ_POINTER(Ctx, a.y), need<Ctx>(Need::kRequired), 16,
                                 rows_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("h_final", HAWK_FUZZ_POINTER(Ctx, a.h_final),
                                 need<Ctx>(t.decode_dispatch ? Need::kRequired : Need::kOptional), 4,
                                 states_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("decay", HAWK_FUZZ_POINTER(Ctx, a.decay), need<Ctx>(Need::kOptional),
                                 4, states_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("checkpoints", HAWK_FUZZ_POINTER(Ctx, a.checkpoints),
                                 need<Ctx>(t.checkpoints_required ? Need::kRequired : Need::kOptional),
                                 4, [](const Ctx& c) { return checkpoint_bytes(c.a); }, true));
  return f;
}

template <class Ctx>
std::vector<PointerField<Ctx>> backward_fields(const Target& t) {
  std::vector<PointerField<Ctx>> f;
  add_common_fields(f, t);
  f.push_back(pointer_field<Ctx>("checkpoints", HAWK_FUZZ_POINTER(Ctx, a.checkpoints), need<Ctx>(Need::kRequired),
                                 4, [](const Ctx& c) { return checkpoint_bytes(c.a); }, false));
  f.push_back(pointer_field<Ctx>("dy", HAWK_FUZZ_POINTER(Ctx, a.dy), need<Ctx>(Need::kRequired), 16,
                                 rows_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("dh_final", HAWK_FUZZ_POINTER(Ctx, a.dh_final), need<Ctx>(Need::kOptional),
                                 4, states_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("dx", HAWK_FUZZ_POINTER(Ctx, a.dx), need<Ctx>(Need::kRequired), 16,
                                 rows_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("dgx", HAWK_FUZZ_POINTER(Ctx, a.dgx), need_if_gate_logits<Ctx>(), 16,
                                 rows_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("dga", HAWK_FUZZ_POINTER(Ctx, a.dga), need_if_gate_logits<Ctx>(), 16,
                                 rows_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("dWx", HAWK_FUZZ_POINTER(Ctx, a.dWx), need_if_fused<Ctx>(), 4,
                                 weights_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("dWa", HAWK_FUZZ_POINTER(Ctx, a.dWa), need_if_fused<Ctx>(), 4,
                                 weights_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("dbx", HAWK_FUZZ_POINTER(Ctx, a.dbx), need_if_fused<Ctx>(), 4,
                                 channels_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("dba", HAWK_FUZZ_POINTER(Ctx, a.dba), need_if_fused<Ctx>(), 4,
                                 channels_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("da_param", HAWK_FUZZ_POINTER(Ctx, a.da_param), need<Ctx>(Need::kRequired),
                                 4, channels_extent<Ctx>(), true));
  f.push_back(pointer_field<Ctx>("dh0", HAWK_FUZZ_POINTER(Ctx, a.dh0), need<Ctx>(Need::kOptional), 4,
                                 states_extent<Ctx>(), true));
  return f;
}

//! SPEC §3: outputs overlap nothing, except the documented in-place pairs h_final == h0 and dh0 == dh_final.
inline Overlap overlap_rule(const std::string& output, const std::string& other) {
  if (other == "device_check_report") return Overlap::kUnchecked;
  if ((output == "h_final" && other == "h0") || (output == "dh0" && other == "dh_final")) return Overlap::kAliasAllowed;
  return Overlap::kForbidden;
}

// ---- shape, dtype and mode corruptions -------------------------------------------------------------------------

template <class Ctx>
using C = Corruption<Ctx>;

//! For explicit operators: the dense-or-packed verdict of a token-count change.
inline void reject_if_dense(const rg::ProblemShape& s, Expectation& e) {
  if (s.cu_seqlens == nullptr) e.reject(StatusCode::kInvalidArgument);
  else e.any();
}

template <class Ctx>
void add_shape_corruptions(std::vector<C<Ctx>>& out, const Target& t) {
  using E = Expectation;
  const bool piece = t.shape == Spec::kPiece, step = t.shape == Spec::kDecodeStep;
  out.push_back(corruption<Ctx>("num_sequences = 0", StatusCode::kInvalidArgument, [](Ctx& c, Rng&, E&) {
    c.a.shape.num_sequences = 0;
    return true;
  }));
  out.push_back(corruption<Ctx>("num_sequences negative", StatusCode::kInvalidArgument, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.num_sequences = r.pick(negative_values());
    e.detail = std::to_string(c.a.shape.num_sequences);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_sequences huge", Expect::kReject, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.num_sequences = r.pick(huge_values());
    e.detail = std::to_string(c.a.shape.num_sequences);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_sequences + 1", Expect::kAny, [step, piece](Ctx& c, Rng&, E& e) {
    c.a.shape.num_sequences = wrapping_add(c.a.shape.num_sequences, 1);
    if (step || piece) e.reject();  // dense only: T != N·L
    else reject_if_dense(c.a.shape, e);
    return true;
  }));
  out.push_back(corruption<Ctx>("seq_len = 0", Expect::kAny, [](Ctx& c, Rng&, E& e) {
    c.a.shape.seq_len = 0;
    if (c.a.shape.cu_seqlens == nullptr) e.reject(StatusCode::kInvalidArgument);
    else e.accept();  // ignored when packed
    return true;
  }));
  out.push_back(corruption<Ctx>("seq_len negative", Expect::kAny, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.seq_len = r.pick(negative_values());
    e.detail = std::to_string(c.a.shape.seq_len);
    if (c.a.shape.cu_seqlens == nullptr) e.reject(StatusCode::kInvalidArgument);
    else e.accept();
    return true;
  }));
  out.push_back(corruption<Ctx>("seq_len huge", Expect::kAny, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.seq_len = r.pick(huge_values());
    e.detail = std::to_string(c.a.shape.seq_len);
    if (c.a.shape.cu_seqlens == nullptr) e.reject();
    else e.accept();
    return true;
  }));
  // Dense N·L beyond int64: the product wraps around to a small, plausible T (N = 3, L = (2^64 + 2) / 3: N·L
  // = 2^64 + 2 = 2 mod 2^64; or N = 4, L = 2^62: 0). The checks must not be fooled (nor overflow doing so).
  out.push_back(corruption<Ctx>("seq_len so large that N·L wraps around int64", Expect::kReject, [](Ctx& c, Rng& r, E& e) {
    if (c.a.shape.cu_seqlens != nullptr) return false;
    if (r.chance(0.5)) {
      c.a.shape.num_sequences = 3;
      c.a.shape.seq_len = 6148914691236517206;  // (2^64 + 2) / 3
      c.a.shape.num_tokens = 2;
    } else {
      c.a.shape.num_sequences = 4;
      c.a.shape.seq_len = std::int64_t{1} << 62;
      c.a.shape.num_tokens = 0;
    }
    e.detail = "N = " + std::to_string(c.a.shape.num_sequences) + ", L = " + std::to_string(c.a.shape.seq_len) +
               ", T = " + std::to_string(c.a.shape.num_tokens);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_tokens = 0", StatusCode::kInvalidArgument, [](Ctx& c, Rng&, E&) {
    c.a.shape.num_tokens = 0;
    return true;
  }));
  out.push_back(corruption<Ctx>("num_tokens negative", StatusCode::kInvalidArgument, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.num_tokens = r.pick(negative_values());
    e.detail = std::to_string(c.a.shape.num_tokens);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_tokens huge", StatusCode::kInvalidArgument, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.num_tokens = r.pick(huge_values());
    e.detail = std::to_string(c.a.shape.num_tokens);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_tokens + 1", Expect::kAny, [](Ctx& c, Rng&, E& e) {
    c.a.shape.num_tokens = wrapping_add(c.a.shape.num_tokens, 1);
    reject_if_dense(c.a.shape, e);
    return true;
  }));
  out.push_back(corruption<Ctx>("dense batch of 2^31 tokens", StatusCode::kInvalidArgument, [](Ctx& c, Rng&, E&) {
    c.a.shape.cu_seqlens = nullptr;
    c.a.shape.num_sequences = 2;
    c.a.shape.seq_len = std::int64_t{1} << 30;
    c.a.shape.num_tokens = std::int64_t{1} << 31;
    return true;
  }));
  out.push_back(corruption<Ctx>("width = 0", StatusCode::kInvalidArgument, [](Ctx& c, Rng&, E&) {
    c.a.shape.width = 0;
    return true;
  }));
  out.push_back(corruption<Ctx>("width negative", Expect::kReject, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.width = r.pick(negative_values());
    e.detail = std::to_string(c.a.shape.width);
    return true;
  }));
  // W up to about 2^36 can be a real (if enormous) problem in gate-logits mode; beyond 2^40 no grid fits.
  out.push_back(corruption<Ctx>("width huge", Expect::kReject, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.width = r.pick(huge_values());
    e.detail = std::to_string(c.a.shape.width);
    if (c.a.shape.width < (std::int64_t{1} << 40)) e.any();
    return true;
  }));
  out.push_back(corruption<Ctx>("width huge, divisible by num_blocks", Expect::kReject, [](Ctx& c, Rng& r, E& e) {
    const std::int64_t h = c.a.shape.num_blocks > 0 && c.a.shape.num_blocks < (1 << 20) ? c.a.shape.num_blocks : 1;
    c.a.shape.width = r.pick(huge_values()) / (16 * h) * (16 * h);
    e.detail = std::to_string(c.a.shape.width);
    if (c.a.shape.width < (std::int64_t{1} << 40)) e.any();
    return true;
  }));
  out.push_back(corruption<Ctx>("width + 1", Expect::kReject, [](Ctx& c, Rng&, E&) {
    c.a.shape.width = wrapping_add(c.a.shape.width, 1);
    return true;
  }));
  out.push_back(corruption<Ctx>("width doubled", Expect::kAny, [t](Ctx& c, Rng&, E& e) {
    c.a.shape.width = wrapping_mul(c.a.shape.width, 2);
    if (t.fused_fixed_width) e.reject(StatusCode::kUnsupportedConfiguration);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_blocks = 0", StatusCode::kInvalidArgument, [](Ctx& c, Rng&, E&) {
    c.a.shape.num_blocks = 0;
    return true;
  }));
  out.push_back(corruption<Ctx>("num_blocks negative", StatusCode::kInvalidArgument, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.num_blocks = r.pick(negative_values());
    e.detail = std::to_string(c.a.shape.num_blocks);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_blocks huge", StatusCode::kInvalidArgument, [](Ctx& c, Rng& r, E& e) {
    c.a.shape.num_blocks = r.pick(huge_values());
    e.detail = std::to_string(c.a.shape.num_blocks);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_blocks = width + 1", StatusCode::kInvalidArgument, [](Ctx& c, Rng&, E&) {
    c.a.shape.num_blocks = wrapping_add(c.a.shape.width, 1);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_blocks doubled", Expect::kAny, [t](Ctx& c, Rng&, E& e) {
    c.a.shape.num_blocks = wrapping_mul(c.a.shape.num_blocks, 2);
    if (t.fused_fixed_width) e.reject();
    return true;
  }));
  out.push_back(corruption<Ctx>("num_state_rows = 0 with state_index", StatusCode::kInvalidArgument,
                                [](Ctx& c, Rng&, E&) {
                                  if (c.a.state_index == nullptr) return false;
                                  c.a.shape.num_state_rows = 0;
                                  return true;
                                }));
  out.push_back(corruption<Ctx>("num_state_rows negative with state_index", StatusCode::kInvalidArgument,
                                [](Ctx& c, Rng& r, E& e) {
                                  if (c.a.state_index == nullptr) return false;
                                  c.a.shape.num_state_rows = r.pick(negative_values());
                                  e.detail = std::to_string(c.a.shape.num_state_rows);
                                  return true;
                                }));
  // state_index is int32: a pool of more than 2^31 - 1 rows cannot be addressed.
  out.push_back(corruption<Ctx>("num_state_rows huge with state_index", StatusCode::kInvalidArgument,
                                [](Ctx& c, Rng& r, E& e) {
                                  if (c.a.state_index == nullptr) return false;
                                  c.a.shape.num_state_rows = r.pick(huge_values());
                                  e.detail = std::to_string(c.a.shape.num_state_rows);
                                  return true;
                                }));
  out.push_back(corruption<Ctx>("num_state_rows negative without state_index", Expect::kAny, [](Ctx& c, Rng& r, E& e) {
    if (c.a.state_index != nullptr) return false;
    c.a.shape.num_state_rows = r.pick(negative_values());
    e.detail = std::to_string(c.a.shape.num_state_rows);
    return true;
  }));
  out.push_back(corruption<Ctx>("num_state_rows huge without state_index", Expect::kAny, [](Ctx& c, Rng& r, E& e) {
    if (c.a.state_index != nullptr) return false;
    c.a.shape.num_state_rows = r.pick(huge_values());
    e.detail = std::to_string(c.a.shape.num_state_rows);
    return true;
  }));
  out.push_back(corruption<Ctx>("state_index added with num_state_rows = 0", Expect::kReject, [](Ctx& c, Rng&, E&) {
    if (c.a.state_index != nullptr) return false;
    c.a.state_index = c.heap.template take_as<const std::int32_t>(extent(c.a.shape.num_sequences, 4));
    c.a.shape.num_state_rows = 0;
    return true;
  }));
  out.push_back(corruption<Ctx>("state_index added with num_state_rows = N", Expect::kAny, [piece](Ctx& c, Rng&, E& e) {
    if (c.a.state_index != nullptr) return false;
    c.a.state_index = c.heap.template take_as<const std::int32_t>(extent(c.a.shape.num_sequences, 4));
    c.a.shape.num_state_rows = c.a.shape.num_sequences;
    if (piece) e.reject(StatusCode::kInvalidArgument);  // context parallelism takes no state pool
    else e.accept();
    return true;
  }));
  out.push_back(corruption<Ctx>("cu_seqlens added (packed)", Expect::kAny, [piece, step](Ctx& c, Rng&, E& e) {
    if (c.a.shape.cu_seqlens != nullptr) return false;
    c.a.shape.cu_seqlens = c.heap.template take_as<const std::int32_t>(extent(wrapping_add(c.a.shape.num_sequences, 1), 4));
    if (piece || step) e.reject(StatusCode::kInvalidArgument);
    else e.accept();
    return true;
  }));
  out.push_back(corruption<Ctx>("validate_device_inputs off", Expect::kAccept, [](Ctx& c, Rng&, E&) {
    if (!c.a.shape.validate_device_inputs) return false;
    c.a.shape.validate_device_inputs = false;
    return true;
  }));
  out.push_back(corruption<Ctx>("wait_for_device_checks flipped", Expect::kAccept, [](Ctx& c, Rng&, E&) {
    c.a.shape.wait_for_device_checks = !c.a.shape.wait_for_device_checks;
    return true;
  }));
  out.push_back(corruption<Ctx>("device_check_report added", Expect::kAccept, [](Ctx& c, Rng&, E&) {
    if (c.a.shape.device_check_report != nullptr) return false;
    c.a.shape.device_check_report = c.heap.template take_as<unsigned int>(4);
    return true;
  }));
}

template <class Ctx>
void add_type_corruptions(std::vector<C<Ctx>>& out, const Target& t) {
  using E = Expectation;
  for (DType other : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    out.push_back(corruption<Ctx>(std::string("dtype changed to ") + hawk::to_string(other), Expect::kAny,
                                  [t, other](Ctx& c, Rng&, E& e) {
                                    if (c.a.dtype == other) return false;
                                    c.a.dtype = other;
                                    if (t.explicit_config) e.reject(StatusCode::kUnsupportedConfiguration);
                                    return true;
                                  }));
  }
  out.push_back(corruption<Ctx>("dtype out of range", Expect::kReject, [](Ctx& c, Rng& r, E& e) {
    c.a.dtype = static_cast<DType>(r.pick(std::vector<int>{-1, 3, 7, 1 << 30}));
    e.detail = std::to_string(static_cast<int>(c.a.dtype));
    return true;
  }));
  out.push_back(corruption<Ctx>("mode flipped", Expect::kAny, [t](Ctx& c, Rng&, E& e) {
    c.a.mode = c.a.mode == GateMode::kFused ? GateMode::kGateLogits : GateMode::kFused;
    if (t.explicit_config) e.reject();
    return true;
  }));
  out.push_back(corruption<Ctx>("mode out of range", Expect::kReject, [](Ctx& c, Rng& r, E& e) {
    c.a.mode = static_cast<GateMode>(r.pick(std::vector<int>{-1, 2, 9}));
    e.detail = std::to_string(static_cast<int>(c.a.mode));
    return true;
  }));
  for (ResetMode other : {ResetMode::kNone, ResetMode::kSequenceStart, ResetMode::kFlags}) {
    const std::string name = other == ResetMode::kNone ? "kNone" : other == ResetMode::kSequenceStart ? "kSequenceStart" : "kFlags";
    out.push_back(corruption<Ctx>("reset_mode changed to " + name, Expect::kAny, [t, other](Ctx& c, Rng&, E& e) {
      if (c.a.reset_mode == other) return false;
      const bool had_flags = c.a.reset != nullptr;
      c.a.reset_mode = other;
      if (t.explicit_config || (t.decode_dispatch && other == ResetMode::kSequenceStart)) e.reject();
      else if (other == ResetMode::kFlags || had_flags) e.reject();  // flags missing, or given but unused
      else e.accept();
      return true;
    }));
  }
  out.push_back(corruption<Ctx>("reset_mode out of range", Expect::kReject, [](Ctx& c, Rng& r, E& e) {
    c.a.reset_mode = static_cast<ResetMode>(r.pick(std::vector<int>{-1, 3, 100}));
    e.detail = std::to_string(static_cast<int>(c.a.reset_mode));
    return true;
  }));
  out.push_back(corruption<Ctx>("reset flags given without kFlags", StatusCode::kInvalidArgument, [](Ctx& c, Rng&, E&) {
    if (c.a.reset_mode == ResetMode::kFlags || c.a.reset != nullptr) return false;
    c.a.reset = c.heap.template take_as<const std::uint8_t>(extent(c.a.shape.num_tokens));
    return true;
  }));
  out.push_back(corruption<Ctx>("reset flags at an odd address", Expect::kAccept, [](Ctx& c, Rng&, E&) {
    if (c.a.reset == nullptr) return false;
    c.a.reset += 1;  // bytes: no alignment needed
    return true;
  }));
  out.push_back(corruption<Ctx>("checkpoint_chunk wrong with checkpoints", Expect::kReject, [](Ctx& c, Rng& r, E& e) {
    if (c.a.checkpoints == nullptr) return false;
    const std::int64_t chunk = c.a.checkpoint_chunk;
    c.a.checkpoint_chunk = r.pick(std::vector<std::int64_t>{0, wrapping_mul(chunk, -1), chunk / 2, wrapping_add(chunk, 1), wrapping_mul(chunk, 2), kInt64Max, kInt64Min});
    e.detail = std::to_string(c.a.checkpoint_chunk);
    return true;
  }));
}

}  // namespace rglru_fuzz
}  // namespace hawk_fuzz
