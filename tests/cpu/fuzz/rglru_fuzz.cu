//! \file
//! Host-side argument fuzzing of every RG-LRU entry point (fuzz.hpp says what is checked): Forward<Config>,
//! DecodeStep<Config> and Backward<BackwardConfig<Config>> for a few shipped configurations, the default
//! dispatch (forward_can_implement / forward_workspace_size / forward, decode, backward_can_implement /
//! backward_workspace_size / backward) and the context-parallel entry points.

#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fuzz.hpp"
#include "hawk/rglru/backward_dispatch.cuh"
#include "hawk/rglru/context_parallel.cuh"
#include "hawk/rglru/context_parallel_early_exit.cuh"
#include "hawk/rglru/dispatch.cuh"
#include "rglru_args.hpp"

namespace {

using namespace hawk_fuzz;
using namespace hawk_fuzz::rglru_fuzz;
using hawk::Status;
namespace cp = hawk::rglru::context_parallel;

//! A fake, 256-byte-aligned workspace address (never dereferenced).
void* fake_workspace() { return reinterpret_cast<void*>(std::uintptr_t{1} << 45); }

//! The host checks refused the arguments: anything but success and the device query's kCudaError.
bool host_refused(const Status& s) { return !s.ok() && s.code() != StatusCode::kCudaError; }
bool host_passed(const Status& s) { return !host_refused(s); }

template <class Config>
std::string config_name() {
  using Element = typename Config::Element;
  std::string name = std::string(hawk::ElementTraits<Element>::kName) + " " + Config::mode_name();
  if (Config::kFused) name += " w" + std::to_string(Config::kBlockWidth);
  return name + " " + Config::ResetPolicy::kName;
}

template <class Config>
Spec spec_of(Spec::Shape shape = Spec::kAnyShape) {
  Spec s;
  s.dtype = hawk::ElementTraits<typename Config::Element>::kDType;
  s.mode = Config::kMode;
  s.reset = Config::ResetPolicy::kMode;
  s.block_width = Config::kBlockWidth;
  s.width_tile = Config::kWidthTile;
  s.time_chunk = Config::kTimeChunk;
  s.shape = shape;
  return s;
}

//! Whether the default dispatch picks `Config` (a shipped configuration) for these arguments.
template <class Config, class Args>
bool dispatch_picks(const Args& a) {
  if (a.dtype != hawk::ElementTraits<typename Config::Element>::kDType || a.mode != Config::kMode ||
      a.reset_mode != Config::ResetPolicy::kMode)
    return false;
  return !Config::kFused || a.shape.block_width() == Config::kBlockWidth;
}

//! A valid struct for the default dispatch: a random shipped (dtype, mode, reset, w).
Spec random_dispatch_spec(Rng& rng, Spec::Shape shape, bool decode) {
  Spec s;
  s.dtype = rng.pick(std::vector<DType>{DType::kFloat32, DType::kFloat16, DType::kBFloat16});
  s.mode = rng.chance(0.6) ? GateMode::kFused : GateMode::kGateLogits;
  s.reset = decode ? rng.pick(std::vector<ResetMode>{ResetMode::kNone, ResetMode::kFlags})
                   : rng.pick(std::vector<ResetMode>{ResetMode::kNone, ResetMode::kSequenceStart, ResetMode::kFlags});
  s.block_width = s.mode == GateMode::kFused ? static_cast<int>(rng.pick(std::vector<std::int64_t>{64, 128, 256})) : 0;
  s.width_tile = s.mode == GateMode::kFused ? 16 : 32;
  s.time_chunk = hawk::rglru::kDefaultTimeChunk;
  s.shape = shape;
  s.states_required = decode;
  return s;
}

//! A problem too large for any grid whose buffers are spread so far apart that no overlap check stops it first:
//! the grid check N * (W / WidthTile) must refuse it without overflowing (gate-logits mode: W is free).
Corruption<ForwardCtx> far_apart_huge_grid() {
  return corruption<ForwardCtx>(
      "grid beyond int64: packed N = 2^31 - 2, T = 1, W = 2^57, buffers far apart", Expect::kReject,
      [](ForwardCtx& c, Rng&, Expectation&) {
        if (c.a.mode != GateMode::kGateLogits) return false;
        rg::ProblemShape& s = c.a.shape;
        const auto at = [](int log2) { return std::uintptr_t{1} << log2; };
        s.num_sequences = INT32_MAX - 1;
        s.num_tokens = 1;
        s.width = std::int64_t{1} << 57;
        s.num_blocks = 1;
        s.cu_seqlens = reinterpret_cast<const std::int32_t*>(at(62));
        s.device_check_report = nullptr;
        c.a.state_index = nullptr;
        c.a.x = reinterpret_cast<const void*>(at(59));                 // [T, W]: 2^58 or 2^59 bytes
        c.a.y = reinterpret_cast<void*>(at(60));
        c.a.gx = reinterpret_cast<const void*>(at(60) + at(59));
        c.a.ga = reinterpret_cast<const void*>(at(61));
        c.a.a_param = reinterpret_cast<const float*>(at(61) + at(59));  // [W]: 2^59 bytes
        if (c.a.reset != nullptr) c.a.reset = reinterpret_cast<const std::uint8_t*>(at(62) + at(40));
        c.a.Wx = c.a.Wa = nullptr;
        c.a.bx = c.a.ba = nullptr;
        c.a.h0 = nullptr;
        c.a.h_final = c.a.decay = c.a.checkpoints = nullptr;
        return true;
      });
}

// ---- Forward<Config> ---------------------------------------------------------------------------------------------

template <class Config>
EntryPoint<ForwardCtx> forward_entry() {
  using Op = hawk::rglru::Forward<Config>;
  EntryPoint<ForwardCtx> e;
  e.name = "rglru::Forward<" + config_name<Config>() + ">";
  e.make_valid = [](Rng& rng) {
    ForwardCtx c;
    c.a = make_forward(spec_of<Config>(), rng, c.heap);
    return c;
  };
  Target t;
  t.explicit_config = true;
  t.fused_fixed_width = Config::kFused;
  const auto fields = forward_fields<ForwardCtx>(t);
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<ForwardCtx>(e.corruptions, fields, overlap_rule);
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  if (!Config::kFused) e.corruptions.push_back(far_apart_huge_grid());
  e.corruptions.push_back(corruption<ForwardCtx>("checkpoint_chunk wrong without checkpoints", Expect::kAccept,
                                                 [](ForwardCtx& c, Rng& r, Expectation&) {
                                                   if (c.a.checkpoints != nullptr) return false;
                                                   c.a.checkpoint_chunk = r.pick(negative_values());
                                                   return true;
                                                 }));
  e.probe = [](const ForwardCtx& c, Findings& f) {
    const Status s = Op::can_implement(c.a);
    const std::size_t bytes = Op::workspace_size(c.a);
    // The default dispatch runs this configuration, sequentially or chunked: its workspace is one of the two
    // operators'. The chunked counterpart (ChunkedForward) needs the same device-check bytes and its carries
    // after them.
    using Chunked = hawk::rglru::ChunkedForward<typename hawk::rglru::DefaultChunkedConfig<Config>::type>;
    const std::size_t dispatch_bytes = hawk::rglru::forward_workspace_size(c.a);
    if (dispatch_bytes != bytes && dispatch_bytes != Chunked::workspace_size(c.a))
      f.add("forward_workspace_size " + std::to_string(dispatch_bytes) + " is neither Forward::workspace_size " +
            std::to_string(bytes) + " nor ChunkedForward::workspace_size " + std::to_string(Chunked::workspace_size(c.a)));
    if (Chunked::workspace_size(c.a) < bytes)
      f.add("ChunkedForward::workspace_size " + std::to_string(Chunked::workspace_size(c.a)) +
            " is below Forward::workspace_size " + std::to_string(bytes));
    if (dispatch_picks<Config>(c.a)) f.expect_same_code("forward_can_implement", s, hawk::rglru::forward_can_implement(c.a));
    if (host_refused(s)) f.expect_same_code("Forward::run", s, Op::run(c.a, fake_workspace(), bytes, nullptr));
    return s;
  };
  e.hazards = [](const ForwardCtx& c) { return shape_hazards(c.a); };
  return e;
}

// ---- DecodeStep<Config> ------------------------------------------------------------------------------------------

template <class Config>
EntryPoint<ForwardCtx> decode_step_entry() {
  using Op = hawk::rglru::DecodeStep<Config>;
  using Fwd = hawk::rglru::Forward<Config>;
  EntryPoint<ForwardCtx> e;
  e.name = "rglru::DecodeStep<" + config_name<Config>() + ">";
  e.make_valid = [](Rng& rng) {
    ForwardCtx c;
    c.a = make_forward(spec_of<Config>(Spec::kDecodeStep), rng, c.heap);
    return c;
  };
  Target t;
  t.explicit_config = true;
  t.fused_fixed_width = Config::kFused;
  t.shape = Spec::kDecodeStep;
  const auto fields = forward_fields<ForwardCtx>(t);
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<ForwardCtx>(e.corruptions, fields, overlap_rule);
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  e.corruptions.push_back(corruption<ForwardCtx>("two tokens per sequence", StatusCode::kInvalidArgument,
                                                 [](ForwardCtx& c, Rng&, Expectation&) {
                                                   c.a.shape.seq_len = 2;
                                                   c.a.shape.num_tokens = wrapping_mul(2, c.a.shape.num_sequences);
                                                   return true;
                                                 }));
  e.corruptions.push_back(corruption<ForwardCtx>("checkpoints added", StatusCode::kInvalidArgument,
                                                 [](ForwardCtx& c, Rng&, Expectation&) {
                                                   c.a.checkpoint_chunk = Config::kTimeChunk;
                                                   c.a.checkpoints = c.heap.take_as<float>(checkpoint_bytes(c.a));
                                                   return true;
                                                 }));
  e.corruptions.push_back(corruption<ForwardCtx>("decay added", StatusCode::kInvalidArgument,
                                                 [](ForwardCtx& c, Rng&, Expectation&) {
                                                   c.a.decay = c.heap.take_as<float>(state_bytes(c.a));
                                                   return true;
                                                 }));
  e.probe = [](const ForwardCtx& c, Findings& f) {
    const Status s = Op::can_implement(c.a);
    const Status forward = Fwd::can_implement(c.a);
    if (host_refused(forward)) f.expect_same_code("Forward::can_implement (DecodeStep checks it first)", forward, s);
    if (Op::applies(c.a) && host_passed(forward) && host_refused(s))
      f.add("DecodeStep refuses what applies() and Forward accept: " + s.to_string());
    if (Op::workspace_size(c.a) != Fwd::workspace_size(c.a)) f.add("DecodeStep::workspace_size differs from Forward's");
    if (host_refused(s)) f.expect_same_code("DecodeStep::run", s, Op::run(c.a, fake_workspace(), Op::workspace_size(c.a), nullptr));
    return s;
  };
  e.hazards = [](const ForwardCtx& c) { return shape_hazards(c.a); };
  return e;
}

// ---- Backward<BackwardConfig<Config>> ----------------------------------------------------------------------------

//! What the backward workspace must at least hold (backward.cuh): N·W·4, and 12·T·W in fused mode (12·S·W, S =
//! kBackwardTimeSliceTokens, for the least workspace of a shape that can take time slices).
std::size_t backward_workspace_floor(const hawk::rglru::BackwardArguments& a, bool least) {
  std::size_t floor = extent(a.shape.num_sequences, a.shape.width, 4);
  const std::int64_t row_tokens = least && hawk::rglru::backward_shape_takes_time_slices(a)
                                      ? static_cast<std::int64_t>(hawk::rglru::kBackwardTimeSliceTokens)
                                      : a.shape.num_tokens;
  if (a.mode == GateMode::kFused) floor += extent(row_tokens, a.shape.width, 12);
  return floor;
}

//! backward_time_slice_tokens at the least workspace `least`, between it and the one-pass workspace `bytes`, and at
//! `bytes`: 0 where the shape takes no slices or the workspace holds the one pass; else a whole number of
//! kBackwardTimeSliceTokens units shorter than T, the longest whose layout the workspace holds.
void check_time_slice_tokens(const hawk::rglru::BackwardArguments& a, std::size_t least, std::size_t bytes,
                             Findings& f) {
  constexpr std::int64_t kUnit = hawk::rglru::kBackwardTimeSliceTokens;
  auto layout_bytes = [&](std::int64_t tokens) {
    return hawk::rglru::BackwardWorkspaceLayout::make(a, hawk::rglru::kWeightGradSegment,
                                                      hawk::rglru::kDefaultTimeChunk, tokens)
        .total;
  };
  const bool slices = hawk::rglru::backward_shape_takes_time_slices(a);
  const std::size_t sizes[] = {least, least + (bytes - least) / 2, bytes > least ? bytes - 1 : least, bytes};
  for (const std::size_t size : sizes) {
    const std::int64_t tokens = hawk::rglru::backward_time_slice_tokens(a, size);
    const std::string at = " at a workspace of " + std::to_string(size) + " bytes (least " + std::to_string(least) +
                           ", one pass " + std::to_string(bytes) + ")";
    if (!slices || size >= bytes) {
      if (tokens != 0) f.add("backward_time_slice_tokens " + std::to_string(tokens) + at + ", not 0 (one pass)");
      continue;
    }
    const std::int64_t T = a.shape.num_tokens;
    if (tokens < kUnit || tokens % kUnit != 0 || tokens >= T) {
      f.add("backward_time_slice_tokens " + std::to_string(tokens) + at + ": not a whole number of units below T");
    } else if (layout_bytes(tokens) > size) {
      f.add("backward_time_slice_tokens " + std::to_string(tokens) + at + ": its layout takes " +
            std::to_string(layout_bytes(tokens)) + " bytes");
    } else if (tokens + kUnit < T && layout_bytes(tokens + kUnit) <= size) {
      f.add("backward_time_slice_tokens " + std::to_string(tokens) + at + ": " + std::to_string(tokens + kUnit) +
            " tokens also fit");
    }
    if (size == least && tokens != kUnit)
      f.add("backward_time_slice_tokens " + std::to_string(tokens) + at + ": the least workspace's slice is one unit");
  }
}

//! backward_workspace_size_within against the least workspace `least` and the one-pass workspace `bytes`: the one
//! pass at any limit that holds it; 0 below the least (or below the one pass where the shape takes no slices); in
//! between, the exact layout of the slices the limit takes, within the limit, taking the same slices itself.
void check_workspace_within(const hawk::rglru::BackwardArguments& a, std::size_t least, std::size_t bytes,
                            Findings& f) {
  auto within = [&](std::size_t limit) { return hawk::rglru::backward_workspace_size_within(a, limit); };
  auto at = [&](std::size_t limit) {
    return " at a limit of " + std::to_string(limit) + " bytes (least " + std::to_string(least) + ", one pass " +
           std::to_string(bytes) + ")";
  };
  for (const std::size_t limit : {bytes, bytes + 1, ~std::size_t{0}})
    if (within(limit) != bytes)
      f.add("backward_workspace_size_within " + std::to_string(within(limit)) + at(limit) + ", not the one pass");
  if (least > 0 && within(least - 1) != 0)
    f.add("backward_workspace_size_within " + std::to_string(within(least - 1)) + at(least - 1) + ", not 0");
  if (!hawk::rglru::backward_shape_takes_time_slices(a)) {
    if (bytes > 0 && within(bytes - 1) != 0)
      f.add("backward_workspace_size_within " + std::to_string(within(bytes - 1)) + at(bytes - 1) +
            ", not 0 (the shape takes no slices)");
    return;
  }
  for (const std::size_t limit : {least, least + (bytes - least) / 2, bytes - 1}) {
    const std::size_t size = within(limit);
    const std::int64_t tokens = hawk::rglru::backward_time_slice_tokens(a, limit);
    const std::size_t layout = hawk::rglru::BackwardWorkspaceLayout::make(a, hawk::rglru::kWeightGradSegment,
                                                                          hawk::rglru::kDefaultTimeChunk, tokens)
                                   .total;
    if (size < least || size > limit)
      f.add("backward_workspace_size_within " + std::to_string(size) + at(limit) + ": outside [least, limit]");
    else if (size != layout)
      f.add("backward_workspace_size_within " + std::to_string(size) + at(limit) + ": not the layout of its " +
            std::to_string(tokens) + "-token slices (" + std::to_string(layout) + " bytes)");
    else if (hawk::rglru::backward_time_slice_tokens(a, size) != tokens)
      f.add("backward_workspace_size_within " + std::to_string(size) + at(limit) + " takes slices of " +
            std::to_string(hawk::rglru::backward_time_slice_tokens(a, size)) + " tokens, the limit " +
            std::to_string(tokens));
  }
}

//! The least workspace `least` against the one-pass workspace `bytes` and the documented floor (for arguments the
//! host checks accept; refused ones may give any size, e.g. a saturated one for a huge num_tokens).
void check_least_workspace(const hawk::rglru::BackwardArguments& a, std::size_t least, std::size_t bytes,
                           const Status& s, Findings& f) {
  if (!host_passed(s)) return;
  if (least > bytes)
    f.add("min_workspace_size " + std::to_string(least) + " is above workspace_size " + std::to_string(bytes));
  if (!hawk::rglru::backward_shape_takes_time_slices(a) && least != bytes)
    f.add("min_workspace_size " + std::to_string(least) + " differs from workspace_size " + std::to_string(bytes) +
          " where the shape takes no time slices");
  if (least < backward_workspace_floor(a, true))
    f.add("min_workspace_size " + std::to_string(least) + " is below the documented layout's " +
          std::to_string(backward_workspace_floor(a, true)) + " bytes");
}

template <class Config>
EntryPoint<BackwardCtx> backward_entry() {
  using BConfig = hawk::rglru::BackwardConfig<Config>;
  using Op = hawk::rglru::Backward<BConfig>;
  EntryPoint<BackwardCtx> e;
  e.name = "rglru::Backward<" + config_name<Config>() + ">";
  e.make_valid = [](Rng& rng) {
    BackwardCtx c;
    Spec spec = spec_of<Config>();
    spec.checkpoints = true;
    c.a = make_backward(spec, rng, c.heap);
    return c;
  };
  Target t;
  t.explicit_config = true;
  t.fused_fixed_width = Config::kFused;
  t.backward = true;
  t.checkpoints_required = true;
  const auto fields = backward_fields<BackwardCtx>(t);
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<BackwardCtx>(e.corruptions, fields, overlap_rule);
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  e.probe = [](const BackwardCtx& c, Findings& f) {
    const Status s = Op::can_implement(c.a);
    const std::size_t bytes = Op::workspace_size(c.a);
    if (bytes != hawk::rglru::backward_workspace_size(c.a))
      f.add("Backward::workspace_size " + std::to_string(bytes) + " differs from backward_workspace_size " +
            std::to_string(hawk::rglru::backward_workspace_size(c.a)));
    if (host_passed(s) && bytes < backward_workspace_floor(c.a, false))
      f.add("workspace_size " + std::to_string(bytes) + " is below the documented layout's " +
            std::to_string(backward_workspace_floor(c.a, false)) + " bytes");
    check_least_workspace(c.a, Op::min_workspace_size(c.a), bytes, s, f);
    if (host_passed(s) && dispatch_picks<Config>(c.a) && c.a.checkpoint_chunk == hawk::rglru::kDefaultTimeChunk &&
        Op::min_workspace_size(c.a) != hawk::rglru::backward_min_workspace_size(c.a))
      f.add("Backward::min_workspace_size " + std::to_string(Op::min_workspace_size(c.a)) +
            " differs from backward_min_workspace_size " +
            std::to_string(hawk::rglru::backward_min_workspace_size(c.a)));
    if (host_passed(s) && dispatch_picks<Config>(c.a) && c.a.checkpoint_chunk == hawk::rglru::kDefaultTimeChunk) {
      const std::size_t between = Op::min_workspace_size(c.a) + (bytes - Op::min_workspace_size(c.a)) / 2;
      if (Op::time_slice_tokens(c.a, between) != hawk::rglru::backward_time_slice_tokens(c.a, between))
        f.add("Backward::time_slice_tokens " + std::to_string(Op::time_slice_tokens(c.a, between)) +
              " differs from backward_time_slice_tokens " +
              std::to_string(hawk::rglru::backward_time_slice_tokens(c.a, between)));
      // The size a limit buys, handed to the operator itself, takes the slices the limit takes.
      const std::size_t within = hawk::rglru::backward_workspace_size_within(c.a, between);
      if (Op::time_slice_tokens(c.a, within) != hawk::rglru::backward_time_slice_tokens(c.a, between))
        f.add("Backward::time_slice_tokens " + std::to_string(Op::time_slice_tokens(c.a, within)) + " at " +
              std::to_string(within) + " bytes (backward_workspace_size_within) differs from the limit's " +
              std::to_string(hawk::rglru::backward_time_slice_tokens(c.a, between)));
    }
    if (dispatch_picks<Config>(c.a) && c.a.checkpoint_chunk == hawk::rglru::kDefaultTimeChunk)
      f.expect_same_code("backward_can_implement", s, hawk::rglru::backward_can_implement(c.a));
    if (host_refused(s)) f.expect_same_code("Backward::run", s, Op::run(c.a, fake_workspace(), bytes, nullptr));
    return s;
  };
  e.hazards = [](const BackwardCtx& c) { return shape_hazards(c.a); };
  return e;
}

// ---- the default dispatch --------------------------------------------------------------------------------------

EntryPoint<ForwardCtx> dispatch_forward_entry() {
  EntryPoint<ForwardCtx> e;
  e.name = "rglru::forward (default dispatch)";
  e.make_valid = [](Rng& rng) {
    ForwardCtx c;
    c.a = make_forward(random_dispatch_spec(rng, Spec::kAnyShape, false), rng, c.heap);
    return c;
  };
  Target t;
  t.explicit_config = false;
  const auto fields = forward_fields<ForwardCtx>(t);
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<ForwardCtx>(e.corruptions, fields, overlap_rule);
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  e.corruptions.push_back(far_apart_huge_grid());
  e.corruptions.push_back(corruption<ForwardCtx>("block width not shipped (w = 32 or 512)", Expect::kAny,
                                                 [](ForwardCtx& c, Rng& r, Expectation& x) {
                                                   if (c.a.mode != GateMode::kFused) return false;
                                                   const std::int64_t w = r.chance(0.5) ? 32 : 512;
                                                   c.a.shape.width = wrapping_mul(c.a.shape.num_blocks, w);
                                                   // (w = 512 makes the weights 64x larger: they may now overlap
                                                   // a neighbour, refused first as an overlap)
                                                   x.reject();
                                                   return true;
                                                 }));
  e.probe = [](const ForwardCtx& c, Findings& f) {
    const Status s = hawk::rglru::forward_can_implement(c.a);
    const std::size_t bytes = hawk::rglru::forward_workspace_size(c.a);
    if (host_refused(s)) f.expect_same_code("forward", s, hawk::rglru::forward(c.a, fake_workspace(), bytes, nullptr));
    return s;
  };
  e.hazards = [](const ForwardCtx& c) { return shape_hazards(c.a); };
  return e;
}

EntryPoint<ForwardCtx> dispatch_decode_entry() {
  EntryPoint<ForwardCtx> e;
  e.name = "rglru::decode (default dispatch)";
  e.make_valid = [](Rng& rng) {
    ForwardCtx c;
    const Spec::Shape shape = rng.chance(0.6) ? Spec::kDecodeStep : Spec::kAnyShape;
    Spec spec = random_dispatch_spec(rng, shape, true);
    spec.max_len = 8;  // a few tokens per sequence
    c.a = make_forward(spec, rng, c.heap);
    return c;
  };
  Target t;
  t.explicit_config = false;
  t.decode_dispatch = true;
  const auto fields = forward_fields<ForwardCtx>(t);
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<ForwardCtx>(e.corruptions, fields, overlap_rule);
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  e.probe = [](const ForwardCtx& c, Findings& f) {
    const Status s = hawk::rglru::decode(c.a, fake_workspace(), hawk::rglru::forward_workspace_size(c.a), nullptr);
    // decode() = its own state checks, then the forward's: it passes nothing forward_can_implement refuses.
    const Status forward = hawk::rglru::forward_can_implement(c.a);
    if (host_passed(s) && host_refused(forward))
      f.add("decode passed the host checks but forward_can_implement refuses: " + forward.to_string());
    return s;
  };
  e.hazards = [](const ForwardCtx& c) { return shape_hazards(c.a); };
  return e;
}

EntryPoint<BackwardCtx> dispatch_backward_entry() {
  EntryPoint<BackwardCtx> e;
  e.name = "rglru::backward (default dispatch)";
  e.make_valid = [](Rng& rng) {
    BackwardCtx c;
    Spec spec = random_dispatch_spec(rng, Spec::kAnyShape, false);
    spec.checkpoints = true;
    c.a = make_backward(spec, rng, c.heap);
    return c;
  };
  Target t;
  t.explicit_config = false;
  t.backward = true;
  t.checkpoints_required = true;
  const auto fields = backward_fields<BackwardCtx>(t);
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<BackwardCtx>(e.corruptions, fields, overlap_rule);
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  e.probe = [](const BackwardCtx& c, Findings& f) {
    const Status s = hawk::rglru::backward_can_implement(c.a);
    const std::size_t bytes = hawk::rglru::backward_workspace_size(c.a);
    if (host_passed(s) && bytes < backward_workspace_floor(c.a, false))
      f.add("backward_workspace_size " + std::to_string(bytes) + " is below the documented layout's " +
            std::to_string(backward_workspace_floor(c.a, false)) + " bytes");
    check_least_workspace(c.a, hawk::rglru::backward_min_workspace_size(c.a), bytes, s, f);
    if (host_passed(s)) {
      check_time_slice_tokens(c.a, hawk::rglru::backward_min_workspace_size(c.a), bytes, f);
      check_workspace_within(c.a, hawk::rglru::backward_min_workspace_size(c.a), bytes, f);
    }
    if (host_refused(s)) f.expect_same_code("backward", s, hawk::rglru::backward(c.a, fake_workspace(), bytes, nullptr));
    return s;
  };
  e.hazards = [](const BackwardCtx& c) { return shape_hazards(c.a); };
  return e;
}

// ---- context parallelism -------------------------------------------------------------------------------------------

Spec piece_spec(Rng& rng) {
  Spec s = random_dispatch_spec(rng, Spec::kPiece, false);
  s.max_sequences = 3;
  s.max_len = 700;
  return s;
}

template <class Ctx>
void piece_shape(Ctx& c, Rng& rng) {
  if (rng.chance(0.7)) {  // one sequence: the early-exit path
    c.a.shape.num_sequences = 1;
    c.a.shape.num_tokens = c.a.shape.seq_len;
  }
}

//! Workspace corruptions of the calls that take one.
template <class Ctx>
void add_workspace_corruptions(std::vector<Corruption<Ctx>>& out) {
  out.push_back(corruption<Ctx>("workspace null", StatusCode::kNullPointer, [](Ctx& c, Rng&, Expectation&) {
    c.workspace = nullptr;
    return true;
  }));
  out.push_back(corruption<Ctx>("workspace_bytes one short", StatusCode::kWorkspaceTooSmall, [](Ctx& c, Rng&, Expectation&) {
    if (c.workspace_needed == 0) return false;
    c.workspace_bytes = c.workspace_needed - 1;
    return true;
  }));
  out.push_back(corruption<Ctx>("workspace_bytes = 0", StatusCode::kWorkspaceTooSmall, [](Ctx& c, Rng&, Expectation&) {
    c.workspace_bytes = 0;
    return true;
  }));
  out.push_back(corruption<Ctx>("workspace_bytes huge", Expect::kAccept, [](Ctx& c, Rng&, Expectation&) {
    c.workspace_bytes = ~std::size_t{0};
    return true;
  }));
  out.push_back(corruption<Ctx>("workspace misaligned (16 bytes off)", StatusCode::kMisalignedPointer,
                                [](Ctx& c, Rng&, Expectation&) {
                                  if (c.workspace == nullptr) return false;
                                  c.workspace = static_cast<unsigned char*>(c.workspace) + 16;
                                  return true;
                                }));
}

//! The early-exit corrections check their workspace before the shapes, so a spoiled shape may be refused as
//! kWorkspaceTooSmall first: keep "refused", drop the exact shape codes.
template <class Ctx>
void relax_shape_codes(std::vector<Corruption<Ctx>>& corruptions) {
  for (Corruption<Ctx>& c : corruptions) {
    auto inner = c.apply;
    c.apply = [inner](Ctx& ctx, Rng& r, Expectation& e) {
      if (!inner(ctx, r, e)) return false;
      if (e.has_code && (e.code == StatusCode::kInvalidArgument || e.code == StatusCode::kUnsupportedConfiguration))
        e.has_code = false;
      return true;
    };
  }
}

//! Chunk-count corruptions of prefix_tokens / suffix_tokens.
template <class Ctx>
void add_token_count_corruptions(std::vector<Corruption<Ctx>>& out, std::int64_t Ctx::*member, const std::string& name) {
  out.push_back(corruption<Ctx>(name + " = 0", StatusCode::kInvalidArgument, [member](Ctx& c, Rng&, Expectation&) {
    c.*member = 0;
    return true;
  }));
  out.push_back(corruption<Ctx>(name + " negative", StatusCode::kInvalidArgument, [member](Ctx& c, Rng& r, Expectation& e) {
    c.*member = r.pick(negative_values());
    e.detail = std::to_string(c.*member);
    return true;
  }));
  out.push_back(corruption<Ctx>(name + " not a multiple of 64", StatusCode::kInvalidArgument,
                                [member](Ctx& c, Rng& r, Expectation& e) {
                                  c.*member = r.pick(std::vector<std::int64_t>{1, 63, 65, 100, kInt64Max});
                                  e.detail = std::to_string(c.*member);
                                  return true;
                                }));
  out.push_back(corruption<Ctx>(name + " huge (a multiple of 64)", Expect::kAny, [member](Ctx& c, Rng& r, Expectation& e) {
    c.*member = r.pick(huge_values()) / 64 * 64;
    e.detail = std::to_string(c.*member);
    return true;
  }));
}

EntryPoint<ForwardCtx> transfer_entry() {
  EntryPoint<ForwardCtx> e;
  e.name = "rglru::context_parallel::forward_transfer";
  e.make_valid = [](Rng& rng) {
    ForwardCtx c;
    c.a = make_forward(piece_spec(rng), rng, c.heap);
    c.transfer_decay = c.heap.take_as<float>(state_bytes(c.a));
    c.h_end = c.heap.take_as<float>(state_bytes(c.a));
    c.workspace = c.heap.take_as<void>(1 << 20);
    c.workspace_bytes = cp::transfer_workspace_size(c.a);
    return c;
  };
  Target t;
  t.explicit_config = false;
  t.shape = Spec::kPiece;
  auto fields = forward_fields<ForwardCtx>(t);
  fields.push_back(pointer_field<ForwardCtx>("decay (transfer)", HAWK_FUZZ_POINTER(ForwardCtx, transfer_decay),
                                              need<ForwardCtx>(Need::kRequired), 4,
                                              states_extent<ForwardCtx>(), true));
  fields.push_back(pointer_field<ForwardCtx>("h_end", HAWK_FUZZ_POINTER(ForwardCtx, h_end),
                                              need<ForwardCtx>(Need::kRequired), 4,
                                              states_extent<ForwardCtx>(), true));
  // piece.h0, h_final and decay are ignored by the transfer (it runs from h = 0 into decay, h_end).
  for (auto& f : fields)
    if (f.name == "h0" || f.name == "h_final" || f.name == "decay") f.need = need<ForwardCtx>(Need::kUnused);
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<ForwardCtx>(e.corruptions, fields, [](const std::string& out, const std::string& other) {
    if (out == "h_final" || out == "decay" || other == "h0" || other == "h_final" || other == "decay")
      return Overlap::kUnchecked;  // ignored operands
    return overlap_rule(out, other);
  });
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  e.probe = [](const ForwardCtx& c, Findings& f) {
    const Status s = cp::transfer_can_implement(c.a, c.transfer_decay, c.h_end);
    const std::size_t bytes = cp::transfer_workspace_size(c.a);
    if (bytes != hawk::rglru::forward_workspace_size(c.a)) f.add("transfer_workspace_size differs from the forward's");
    if (launches_allowed() || host_refused(s))
      f.expect_same_code("forward_transfer", s, cp::forward_transfer(c.a, c.transfer_decay, c.h_end, c.workspace, c.workspace_bytes, nullptr));
    return s;
  };
  e.hazards = [](const ForwardCtx& c) { return shape_hazards(c.a); };
  return e;
}

EntryPoint<ForwardCtx> forward_with_carry_entry() {
  EntryPoint<ForwardCtx> e;
  e.name = "rglru::context_parallel::forward_with_carry";
  e.make_valid = [](Rng& rng) {
    ForwardCtx c;
    c.a = make_forward(piece_spec(rng), rng, c.heap);
    c.carry_in = rng.chance(0.8) ? c.heap.take_as<const float>(state_bytes(c.a)) : nullptr;
    c.workspace = c.heap.take_as<void>(1 << 20);
    c.workspace_bytes = hawk::rglru::forward_workspace_size(c.a);
    return c;
  };
  Target t;
  t.explicit_config = false;
  t.shape = Spec::kPiece;
  auto fields = forward_fields<ForwardCtx>(t);
  fields.push_back(pointer_field<ForwardCtx>("carry_in", HAWK_FUZZ_POINTER(ForwardCtx, carry_in),
                                              need<ForwardCtx>(Need::kOptional), 4,
                                              states_extent<ForwardCtx>(), false));
  for (auto& f : fields)
    if (f.name == "h0") f.need = need<ForwardCtx>(Need::kUnused);  // replaced by carry_in
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<ForwardCtx>(e.corruptions, fields, [](const std::string& out, const std::string& other) {
    if (other == "h0") return Overlap::kUnchecked;
    if (out == "h_final" && other == "carry_in") return Overlap::kAliasAllowed;  // h0 == h_final in place
    return overlap_rule(out, other);
  });
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  e.probe = [](const ForwardCtx& c, Findings&) {
    return cp::forward_with_carry(c.a, c.carry_in, c.workspace, c.workspace_bytes, nullptr);
  };
  e.hazards = [](const ForwardCtx& c) { return shape_hazards(c.a); };
  return e;
}

EntryPoint<ForwardCtx> forward_correct_entry() {
  EntryPoint<ForwardCtx> e;
  e.name = "rglru::context_parallel::forward_correct";
  e.make_valid = [](Rng& rng) {
    ForwardCtx c;
    Spec spec = piece_spec(rng);
    spec.checkpoints = true;
    c.a = make_forward(spec, rng, c.heap);
    piece_shape(c, rng);
    c.a.checkpoints = c.heap.take_as<float>(checkpoint_bytes(c.a));
    c.carry_in = rng.chance(0.8) ? c.heap.take_as<const float>(state_bytes(c.a)) : nullptr;
    c.h_end = c.heap.take_as<float>(state_bytes(c.a));
    c.prefix_tokens = 64 * rng.range(1, 8);
    c.workspace_needed = cp::forward_correct_workspace_size(c.a);
    c.workspace_bytes = c.workspace_needed + static_cast<std::size_t>(rng.range(0, 1) * 512);
    c.workspace = c.heap.take_as<void>(c.workspace_bytes);
    return c;
  };
  Target t;
  t.explicit_config = false;
  t.shape = Spec::kPiece;
  t.checkpoints_required = true;
  auto fields = forward_fields<ForwardCtx>(t);
  fields.push_back(pointer_field<ForwardCtx>("carry_in", HAWK_FUZZ_POINTER(ForwardCtx, carry_in),
                                              need<ForwardCtx>(Need::kOptional), 4,
                                              states_extent<ForwardCtx>(), false));
  // h_end is only copied (cudaMemcpyAsync) into h_final: no alignment needed.
  fields.push_back(pointer_field<ForwardCtx>("h_end", HAWK_FUZZ_POINTER(ForwardCtx, h_end),
                                              need<ForwardCtx>(Need::kRequired), 1,
                                              states_extent<ForwardCtx>(), false));
  for (auto& f : fields)
    if (f.name == "h0" || f.name == "decay") f.need = need<ForwardCtx>(Need::kUnused);  // replaced / ignored
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<ForwardCtx>(e.corruptions, fields, [](const std::string& out, const std::string& other) {
    if (other == "h0" || other == "decay" || out == "decay") return Overlap::kUnchecked;
    if (out == "h_final" && (other == "carry_in" || other == "h_end")) return Overlap::kAliasAllowed;
    return overlap_rule(out, other);
  });
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  relax_shape_codes(e.corruptions);
  add_workspace_corruptions(e.corruptions);
  add_token_count_corruptions(e.corruptions, &ForwardCtx::prefix_tokens, "prefix_tokens");
  e.probe = [](const ForwardCtx& c, Findings& f) {
    const std::size_t bytes = cp::forward_correct_workspace_size(c.a);
    if (bytes != cp::forward_correct_workspace_size(c.a)) f.add("forward_correct_workspace_size not deterministic");
    return cp::forward_correct(c.a, c.carry_in, c.h_end, c.prefix_tokens, c.workspace, c.workspace_bytes, nullptr);
  };
  e.hazards = [](const ForwardCtx& c) { return piece_hazards(c.a); };
  return e;
}

//! The first token of the backward's suffix (context_parallel/early_exit.cuh), without overflow.
std::int64_t suffix_start(std::int64_t L, std::int64_t suffix) {
  if (suffix <= 0 || L <= suffix) return 0;
  return (L - suffix) / 64 * 64;
}

enum class BackwardPiece { kTransfer, kSplit, kCorrect };

EntryPoint<BackwardCtx> backward_piece_entry(BackwardPiece which) {
  EntryPoint<BackwardCtx> e;
  e.name = std::string("rglru::context_parallel::") +
           (which == BackwardPiece::kTransfer ? "backward_transfer"
                                              : which == BackwardPiece::kSplit ? "backward_transfer_split" : "backward_correct");
  e.make_valid = [which](Rng& rng) {
    BackwardCtx c;
    Spec spec = piece_spec(rng);
    spec.checkpoints = true;
    c.a = make_backward(spec, rng, c.heap);
    piece_shape(c, rng);
    c.a.checkpoints = c.heap.take_as<const float>(checkpoint_bytes(c.a));
    c.dh0_zero = c.heap.take_as<float>(state_bytes(c.a));
    c.boundary_dh = c.heap.take_as<float>(state_bytes(c.a));
    c.piece_dh_final = rng.chance(0.8) ? c.heap.take_as<const float>(state_bytes(c.a)) : nullptr;
    c.suffix_tokens = 64 * rng.range(1, 8);
    c.workspace_needed = which == BackwardPiece::kTransfer ? hawk::rglru::backward_workspace_size(c.a)
                                                           : cp::backward_split_workspace_size(c.a, c.suffix_tokens);
    c.workspace_bytes = c.workspace_needed;
    c.workspace = c.heap.take_as<void>(c.workspace_bytes);
    return c;
  };
  Target t;
  t.explicit_config = false;
  t.shape = Spec::kPiece;
  t.backward = true;
  t.checkpoints_required = true;
  auto fields = backward_fields<BackwardCtx>(t);
  // dh0_zero: always required by the transfer and the split; by the correction only when it splits.
  auto split_need = [which](const BackwardCtx& c) {
    if (which != BackwardPiece::kCorrect) return Need::kRequired;
    return c.a.shape.num_sequences == 1 && suffix_start(c.a.shape.seq_len, c.suffix_tokens) > 0 ? Need::kRequired
                                                                                                 : Need::kUnused;
  };
  fields.push_back(pointer_field<BackwardCtx>("dh0_zero", HAWK_FUZZ_POINTER(BackwardCtx, dh0_zero), split_need,
                                                   4, states_extent<BackwardCtx>(),
                                                   which != BackwardPiece::kCorrect));
  if (which != BackwardPiece::kTransfer) {
    auto boundary_need = [which](const BackwardCtx& c) {
      if (which == BackwardPiece::kSplit) return Need::kRequired;
      return c.a.shape.num_sequences == 1 && suffix_start(c.a.shape.seq_len, c.suffix_tokens) > 0 ? Need::kRequired
                                                                                                   : Need::kUnused;
    };
    fields.push_back(pointer_field<BackwardCtx>("boundary_dh", HAWK_FUZZ_POINTER(BackwardCtx, boundary_dh),
                                                     boundary_need, 4,
                                                     states_extent<BackwardCtx>(), which == BackwardPiece::kSplit));
  }
  if (which == BackwardPiece::kCorrect)
    fields.push_back(pointer_field<BackwardCtx>("dh_final (correct)", HAWK_FUZZ_POINTER(BackwardCtx, piece_dh_final),
                                                     need<BackwardCtx>(Need::kOptional), 4,
                                                     states_extent<BackwardCtx>(), false));
  for (auto& f : fields) {
    // The transfer and the split replace dh_final (by 0) and dh0; the correction replaces dh_final.
    if (f.name == "dh_final" || (which != BackwardPiece::kCorrect && f.name == "dh0")) f.need = need<BackwardCtx>(Need::kUnused);
  }
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<BackwardCtx>(e.corruptions, fields, [](const std::string& out, const std::string& other) {
    if (other == "dh_final" || other == "dh0" || out == "dh0") return Overlap::kUnchecked;
    if (other == "device_check_report") return Overlap::kUnchecked;
    return Overlap::kForbidden;
  });
  add_shape_corruptions(e.corruptions, t);
  add_type_corruptions(e.corruptions, t);
  if (which != BackwardPiece::kTransfer) {
    relax_shape_codes(e.corruptions);
    add_workspace_corruptions(e.corruptions);
    add_token_count_corruptions(e.corruptions, &BackwardCtx::suffix_tokens, "suffix_tokens");
  } else {
    // backward(): the workspace is checked after can_implement's device query, so without a GPU the verdict
    // is that query's; anything but a crash.
    e.corruptions.push_back(corruption<BackwardCtx>("workspace null", Expect::kAny,
                                                         [](BackwardCtx& c, Rng&, Expectation&) {
                                                           c.workspace = nullptr;
                                                           return true;
                                                         }));
  }
  e.probe = [which](const BackwardCtx& c, Findings& f) {
    if (which == BackwardPiece::kTransfer)
      return cp::backward_transfer(c.a, c.dh0_zero, c.workspace, c.workspace_bytes, nullptr);
    const std::size_t bytes = cp::backward_split_workspace_size(c.a, c.suffix_tokens);
    if (bytes != cp::backward_split_workspace_size(c.a, c.suffix_tokens)) f.add("backward_split_workspace_size not deterministic");
    if (which == BackwardPiece::kSplit)
      return cp::backward_transfer_split(c.a, c.suffix_tokens, c.dh0_zero, c.boundary_dh, c.workspace, c.workspace_bytes, nullptr);
    return cp::backward_correct(c.a, c.piece_dh_final, c.suffix_tokens, c.boundary_dh, c.dh0_zero, c.workspace,
                                c.workspace_bytes, nullptr);
  };
  e.hazards = [which](const BackwardCtx& c) {
    return which == BackwardPiece::kTransfer ? shape_hazards(c.a) : split_hazards(c.a, c.suffix_tokens);
  };
  return e;
}

struct CombineCtx {
  const float* decay = nullptr;
  const float* h_end = nullptr;
  std::int64_t pair_stride = 0;
  int num_pieces = 0;
  std::int64_t count = 0;
  const float* carry0 = nullptr;
  float* carry_in = nullptr;
  float* carry_out = nullptr;
  cp::CarryDirection direction = cp::CarryDirection::kForward;
  FakeHeap heap;
};

EntryPoint<CombineCtx> combine_entry() {
  EntryPoint<CombineCtx> e;
  e.name = "rglru::context_parallel::combine_carries";
  e.make_valid = [](Rng& rng) {
    CombineCtx c;
    c.count = rng.range(1, 1 << 20);
    c.num_pieces = static_cast<int>(rng.range(1, 16));  // 0 reads no pair: overlaps with the pairs would be moot
    c.pair_stride = rng.chance(0.5) ? c.count : 2 * c.count;
    const std::size_t pairs = extent(c.num_pieces > 0 ? c.num_pieces : 1, c.pair_stride, 4);
    c.decay = c.heap.take_as<const float>(pairs);
    c.h_end = c.pair_stride == 2 * c.count ? c.decay + c.count : c.heap.take_as<const float>(pairs);
    c.carry0 = rng.chance(0.7) ? c.heap.take_as<const float>(extent(c.count, 4)) : nullptr;
    const int outputs = static_cast<int>(rng.range(1, 3));
    if (outputs & 1) c.carry_in = c.heap.take_as<float>(extent(c.num_pieces, c.count, 4));
    if (outputs & 2)
      c.carry_out = c.carry0 != nullptr && rng.chance(0.3) ? const_cast<float*>(c.carry0) : c.heap.take_as<float>(extent(c.count, 4));
    c.direction = rng.chance(0.5) ? cp::CarryDirection::kForward : cp::CarryDirection::kReverse;
    return c;
  };
  auto pairs = [](const CombineCtx& c) { return extent(c.num_pieces, c.pair_stride, 4); };
  auto counts = [](const CombineCtx& c) { return extent(c.count, 4); };
  auto piece_need = [](const CombineCtx& c) { return c.num_pieces > 0 ? Need::kRequired : Need::kOptional; };
  std::vector<PointerField<CombineCtx>> fields;
  fields.push_back(pointer_field<CombineCtx>("decay", HAWK_FUZZ_POINTER(CombineCtx, decay), piece_need,
                                             4, pairs, false));
  fields.push_back(pointer_field<CombineCtx>("h_end", HAWK_FUZZ_POINTER(CombineCtx, h_end), piece_need,
                                             4, pairs, false));
  fields.push_back(pointer_field<CombineCtx>("carry0", HAWK_FUZZ_POINTER(CombineCtx, carry0),
                                             need<CombineCtx>(Need::kOptional), 4, counts, false));
  auto output_need = [](const CombineCtx& c) {
    return c.carry_in != nullptr && c.carry_out != nullptr ? Need::kOptional : Need::kRequired;
  };
  fields.push_back(pointer_field<CombineCtx>("carry_in", HAWK_FUZZ_POINTER(CombineCtx, carry_in), output_need,
                                             4,
                                             [](const CombineCtx& c) { return extent(c.num_pieces, c.count, 4); }, true));
  fields.push_back(pointer_field<CombineCtx>("carry_out", HAWK_FUZZ_POINTER(CombineCtx, carry_out), output_need,
                                             4, counts, true));
  add_pointer_corruptions(e.corruptions, fields);
  add_overlap_corruptions<CombineCtx>(e.corruptions, fields, [](const std::string& out, const std::string& other) {
    if (out == "carry_out" && other == "carry0") return Overlap::kAliasAllowed;  // documented
    return Overlap::kForbidden;
  });
  using X = Expectation;
  e.corruptions.push_back(corruption<CombineCtx>("count = 0", StatusCode::kInvalidArgument, [](CombineCtx& c, Rng&, X&) {
    c.count = 0;
    return true;
  }));
  e.corruptions.push_back(corruption<CombineCtx>("count negative", StatusCode::kInvalidArgument, [](CombineCtx& c, Rng& r, X& x) {
    c.count = r.pick(negative_values());
    x.detail = std::to_string(c.count);
    return true;
  }));
  e.corruptions.push_back(corruption<CombineCtx>("count huge", Expect::kAny, [](CombineCtx& c, Rng& r, X& x) {
    c.count = r.pick(huge_values());
    c.pair_stride = c.count;
    x.detail = std::to_string(c.count);
    return true;
  }));
  e.corruptions.push_back(corruption<CombineCtx>("count beyond one grid (>= 2^40)", StatusCode::kInvalidArgument,
                                                 [](CombineCtx& c, Rng& r, X& x) {
                                                   c.count = r.pick(std::vector<std::int64_t>{std::int64_t{1} << 40, std::int64_t{1} << 62, kInt64Max - 1, kInt64Max});
                                                   c.pair_stride = c.count;
                                                   x.detail = std::to_string(c.count);
                                                   return true;
                                                 }));
  e.corruptions.push_back(corruption<CombineCtx>("num_pieces negative", StatusCode::kInvalidArgument, [](CombineCtx& c, Rng& r, X& x) {
    c.num_pieces = static_cast<int>(r.pick(std::vector<std::int64_t>{-1, -2, INT32_MIN}));
    x.detail = std::to_string(c.num_pieces);
    return true;
  }));
  e.corruptions.push_back(corruption<CombineCtx>("num_pieces huge", Expect::kAny, [](CombineCtx& c, Rng&, X&) {
    c.num_pieces = INT32_MAX;
    return true;
  }));
  e.corruptions.push_back(corruption<CombineCtx>("pair_stride < count", StatusCode::kInvalidArgument, [](CombineCtx& c, Rng& r, X& x) {
    if (c.num_pieces == 0) return false;
    c.pair_stride = r.pick(std::vector<std::int64_t>{wrapping_add(c.count, -1), 0, -1, kInt64Min});
    x.detail = std::to_string(c.pair_stride);
    return true;
  }));
  e.corruptions.push_back(corruption<CombineCtx>("pair_stride huge", Expect::kAny, [](CombineCtx& c, Rng& r, X& x) {
    c.pair_stride = r.pick(huge_values());
    x.detail = std::to_string(c.pair_stride);
    return true;
  }));
  e.corruptions.push_back(corruption<CombineCtx>("no outputs", StatusCode::kNullPointer, [](CombineCtx& c, Rng&, X&) {
    c.carry_in = nullptr;
    c.carry_out = nullptr;
    return true;
  }));
  e.corruptions.push_back(corruption<CombineCtx>("direction out of range", Expect::kAny, [](CombineCtx& c, Rng&, X&) {
    c.direction = static_cast<cp::CarryDirection>(7);
    return true;
  }));
  e.probe = [](const CombineCtx& c, Findings&) {
    return cp::combine_carries(c.decay, c.h_end, c.pair_stride, c.num_pieces, c.count, c.carry0, c.carry_in,
                               c.carry_out, c.direction, nullptr);
  };
  e.hazards = [](const CombineCtx& c) {
    std::vector<std::string> h;
    if (c.count > kInt64Max - 1024) h.push_back("count + threads - 1 overflows int64 (combine_carries)");
    return h;
  };
  return e;
}

//! Run entry points that launch kernels once their host checks pass: only without a device.
template <class Ctx>
void fuzz_launching(const EntryPoint<Ctx>& entry) {
  if (!launches_allowed()) {
    WARN(entry.name << ": skipped (a CUDA device is present and its host checks cannot be called alone)");
    return;
  }
  check_report(run_entry(entry));
}

using Bf16 = __nv_bfloat16;
using Half = __half;
namespace hr = hawk::rglru;
using FusedBf16W64Start = hr::DefaultFusedConfig<Bf16, 64, hr::ResetAtSequenceStart>::type;
using FusedF32W128Flags = hr::DefaultFusedConfig<float, 128, hr::ResetFlags>::type;
using FusedHalfW256None = hr::DefaultFusedConfig<Half, 256, hr::NoReset>::type;
using LogitsHalfNone = hr::DefaultGateLogitsConfig<Half, hr::NoReset>::type;
using LogitsF32Flags = hr::DefaultGateLogitsConfig<float, hr::ResetFlags>::type;
using FusedBf16W64None = hr::DefaultFusedConfig<Bf16, 64, hr::NoReset>::type;
using FusedBf16W128Start = hr::DefaultFusedConfig<Bf16, 128, hr::ResetAtSequenceStart>::type;

// A user's time chunk that does not divide the 1024-token time slice stays a valid backward configuration (it runs
// in one pass: its least workspace is the one-pass size); one that divides it can slice.
using Chunk96Backward = hr::BackwardConfig<hr::ForwardConfig<Bf16, 128, 32, 96, 256, hr::ResetFlags, hr::GateMode::kFused>>;
static_assert(!Chunk96Backward::kTimeSlicesFitChunks, "a 96-token chunk does not divide a time slice");
static_assert(hr::BackwardConfig<FusedBf16W128Start>::kTimeSlicesFitChunks, "the shipped chunks divide a time slice");

}  // namespace

TEST_CASE("rglru::Forward<Config>", "[fuzz][rglru]") {
  check_report(run_entry(forward_entry<FusedBf16W64Start>()));
  check_report(run_entry(forward_entry<FusedF32W128Flags>()));
  check_report(run_entry(forward_entry<LogitsHalfNone>()));
}

TEST_CASE("rglru::DecodeStep<Config>", "[fuzz][rglru]") {
  check_report(run_entry(decode_step_entry<FusedBf16W64None>()));
  check_report(run_entry(decode_step_entry<LogitsF32Flags>()));
}

TEST_CASE("rglru::Backward<Config>", "[fuzz][rglru]") {
  check_report(run_entry(backward_entry<FusedBf16W128Start>()));
  check_report(run_entry(backward_entry<FusedHalfW256None>()));
  check_report(run_entry(backward_entry<LogitsF32Flags>()));
}

TEST_CASE("rglru default dispatch", "[fuzz][rglru]") {
  check_report(run_entry(dispatch_forward_entry()));
  check_report(run_entry(dispatch_backward_entry()));
  fuzz_launching(dispatch_decode_entry());
}

// Random arguments seldom take time slices (one dense sequence longer than 1024 tokens in fused mode), so the slice
// a workspace buys (and the workspace a limit buys) is also checked here at shapes that do, at every whole-unit
// layout size and one byte below it.
TEST_CASE("rglru backward_time_slice_tokens, backward_workspace_size_within: the longest whole-unit slice a workspace "
          "holds, and the exact layout a limit buys", "[fuzz][rglru]") {
  constexpr std::int64_t kUnit = hr::kBackwardTimeSliceTokens;
  const std::pair<std::int64_t, std::int64_t> widths[] = {{256, 2}, {1024, 16}, {2560, 10}};
  for (const auto& [W, H] : widths) {
    for (const std::int64_t T : {kUnit + 1, 2 * kUnit, 2 * kUnit + 1, 4 * kUnit + 300, 8 * kUnit, 64 * kUnit}) {
      INFO("T = " << T << ", W = " << W << ", H = " << H);
      hr::BackwardArguments a;
      a.mode = hr::GateMode::kFused;
      a.shape.num_sequences = 1;
      a.shape.seq_len = a.shape.num_tokens = T;
      a.shape.width = W;
      a.shape.num_blocks = H;
      REQUIRE(hr::backward_shape_takes_time_slices(a));
      // The layout's optional parts too: no device checks, and dh0 aliasing dh_final (its copy in the workspace).
      for (const int variant : {0, 1, 2}) {
        INFO("variant " << variant << " (0: plain, 1: validate_device_inputs off, 2: dh0 aliases dh_final)");
        hr::BackwardArguments v = a;
        if (variant == 1) v.shape.validate_device_inputs = false;
        if (variant == 2) v.dh0 = const_cast<float*>(v.dh_final = static_cast<const float*>(fake_workspace()));
        Findings f;
        check_time_slice_tokens(v, hr::backward_min_workspace_size(v), hr::backward_workspace_size(v), f);
        check_workspace_within(v, hr::backward_min_workspace_size(v), hr::backward_workspace_size(v), f);
        for (const std::string& problem : f.problems) FAIL_CHECK(problem);
      }
      const std::size_t least = hr::backward_min_workspace_size(a), full = hr::backward_workspace_size(a);
      for (std::int64_t units = 1; units * kUnit < T; ++units) {
        const std::size_t bytes =
            hr::BackwardWorkspaceLayout::make(a, hr::kWeightGradSegment, hr::kDefaultTimeChunk, units * kUnit).total;
        REQUIRE(bytes < full);
        CHECK(hr::backward_time_slice_tokens(a, bytes) == units * kUnit);
        if (units > 1) CHECK(hr::backward_time_slice_tokens(a, bytes - 1) == (units - 1) * kUnit);
        CHECK(hr::backward_workspace_size_within(a, bytes) == bytes);  // a layout's own size buys exactly it
        if (units > 1)
          CHECK(hr::backward_workspace_size_within(a, bytes - 1) ==
                hr::BackwardWorkspaceLayout::make(a, hr::kWeightGradSegment, hr::kDefaultTimeChunk, (units - 1) * kUnit)
                    .total);
      }
      CHECK(hr::backward_time_slice_tokens(a, full) == 0);
      a.shape.num_sequences = 2;  // two sequences never slice
      a.shape.seq_len = (T + 1) / 2;
      a.shape.num_tokens = 2 * a.shape.seq_len;
      CHECK(hr::backward_time_slice_tokens(a, least) == 0);
      CHECK(hr::backward_workspace_size_within(a, hr::backward_workspace_size(a) - 1) == 0);
      CHECK(hr::backward_workspace_size_within(a, hr::backward_workspace_size(a)) == hr::backward_workspace_size(a));
    }
  }
}

TEST_CASE("rglru::context_parallel", "[fuzz][rglru]") {
  fuzz_launching(transfer_entry());
  fuzz_launching(forward_with_carry_entry());
  fuzz_launching(forward_correct_entry());
  fuzz_launching(combine_entry());
  fuzz_launching(backward_piece_entry(BackwardPiece::kTransfer));
  fuzz_launching(backward_piece_entry(BackwardPiece::kSplit));
  fuzz_launching(backward_piece_entry(BackwardPiece::kCorrect));
}
