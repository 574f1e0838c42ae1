#pragma once
//! \file
//! The per-token RG-LRU math (SPEC §1), in fp32, shared by every kernel: prefill, decode and backward.
//!
//! Split invariance (a sequence run in pieces equals one call, bitwise) holds because every path computes a
//! token's gates with these functions and advances the carry with `recurrence_step` in time order.

#include <cmath>

#include "hawk/core/macros.hpp"
#include "hawk/core/math.hpp"
#include "hawk/rglru/modes.hpp"

namespace hawk {
namespace rglru {

//! c in log a_t = -c · r_t · softplus(a_param).
constexpr float kGateScale = 8.0f;

//! The per-channel constant -c · softplus(a_param); computed once per channel, not per token.
HAWK_HOST_DEVICE float log_a_coefficient(float a_param) { return -kGateScale * math::softplus(a_param); }

namespace detail {

// The gates' transcendentals. On the device each is one hardware approximation (MUFU) plus at most a multiply:
// ex2.approx, rcp.approx and sqrt.approx, all with relative error of a few 2^-23 (PTX ISA), against 8 to 20
// instructions for the IEEE expf, division and sqrtf. The per-token math is the forward's largest cost
// (docs/PERFORMANCE_NOTES.md), and these are deterministic: the same input gives the same bits on every run
// and every call, so batch and split invariance are untouched, because every path (prefill, decode, backward)
// evaluates the gates through these functions. Subnormal results flush to zero (.ftz): sigmoid(x) for
// x < -87 is 0 rather than a subnormal. NaN propagates. On the host (tests, references) the same formulas run
// with the C library's expf and sqrtf.

#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float approx_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float approx_reciprocal(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float approx_sqrt(float x) {
  float y;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif

constexpr float kLog2e = 1.4426950408889634f;

//! e^x for the gates.
HAWK_HOST_DEVICE float gate_exp(float x) {
#if defined(__CUDA_ARCH__)
  return approx_exp2(x * kLog2e);
#else
  return expf(x);
#endif
}

//! The gates' sigmoid. Device: one exp of -|x| and one reciprocal for both signs (no divergent branch, no
//! division): 1 / (1 + e^-x) for x >= 0, e^x · (1 / (1 + e^x)) for x < 0; large |x| gives exactly 0 or 1.
//! Host: math::sigmoid.
HAWK_HOST_DEVICE float gate_sigmoid(float x) {
#if defined(__CUDA_ARCH__)
  const float e = gate_exp(-fabsf(x));
  const float r = approx_reciprocal(1.0f + e);
  return x >= 0.0f ? r : e * r;
#else
  return math::sigmoid(x);
#endif
}

//! sqrt(z), z in [0, 1].
HAWK_HOST_DEVICE float gate_sqrt(float z) {
#if defined(__CUDA_ARCH__)
  return approx_sqrt(z);
#else
  return sqrtf(z);
#endif
}

// Products and sums that feed one another are rounded one by one, never fused. nvcc contracts a * b + c into
// one fma where it sees fit, and what it sees differs between instantiations: in the NoReset kernel `reset` is
// the constant false, in the ResetAtSequenceStart kernel a run-time value, so `1 - a·a` or `da_bar·a - k·dm`
// could be fused in one and not the other. A sequence whose first piece runs with ResetAtSequenceStart and whose
// later pieces run with NoReset (state passing, context parallelism) would then not reproduce one call's bits.
// The __f*_rn intrinsics are never contracted, so every kernel rounds these exactly alike.
HAWK_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
HAWK_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
HAWK_HOST_DEVICE float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

}  // namespace detail

// ---- resets drop the state by selection ------------------------------------------------------------------
//
// SPEC §1: a reset drops the incoming state. Multiplying it by a_bar = 0 would not: 0 · NaN and 0 · Inf are NaN,
// so a NaN in h0 (a recycled pool row) or in an earlier packed document would reach every later one. Every step
// that carries a state across a token therefore selects instead of multiplying when the token is a reset.
//
// The reset is carried inside a_bar itself, so that the gate tiles, registers and transfer pairs that already
// hold a_bar need no flag beside it: a reset token's a_bar is -0.0f, a bit pattern no other token's a_bar has
// (a_t = exp(·) is +0 at the least, or NaN). Numerically it is still 0, as the reference's ā_t = 0.

//! a_bar of a reset token: zero, marked by its sign bit.
constexpr float kResetABar = -0.0f;

//! Whether `a_bar` is a reset token's (its bits are exactly -0.0f).
HAWK_HOST_DEVICE bool is_reset_a_bar(float a_bar) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(a_bar) == 0x80000000u;
#else
  return a_bar == 0.0f && std::signbit(a_bar);
#endif
}

//! What the recurrence needs from one token: h_t = a_bar · h_{t-1} + u.
struct TokenGates {
  float a_bar;  //!< kResetABar at a reset, else a_t
  float u;      //!< x_t · i_t · m_t
};

//! The input and recurrence gates of one token and channel: i = sigmoid(gx), r = sigmoid(ga).
struct GateActivations {
  float i;
  float r;
};

//! i and r from the pre-activations gx, ga (already projected, bias included). Every path evaluates them here, so
//! a kernel that keeps them from its gate phase for its gradient phase (the fused backward scan) reads the bits it
//! would recompute.
HAWK_HOST_DEVICE GateActivations gate_activations(float gx, float ga) {
  return {detail::gate_sigmoid(gx), detail::gate_sigmoid(ga)};
}

//! Gates of one token and channel from its activations i, r.
HAWK_HOST_DEVICE TokenGates token_gates(float x, GateActivations activations, float log_a_coeff, bool reset) {
  const float i = activations.i;
  const float r = activations.r;
  const float log_a = log_a_coeff * r;
  const float a = detail::gate_exp(log_a);
  const float a2 = detail::mul_rn(a, a);  // = exp(2 · log_a), one transcendental fewer
  const float m = reset ? 1.0f : detail::gate_sqrt(detail::sub_rn(1.0f, a2));
  TokenGates gates;
  gates.u = (x * i) * m;
  gates.a_bar = reset ? kResetABar : a;
  return gates;
}

//! Gates of one token and channel from its pre-activations gx, ga (already projected, bias included).
HAWK_HOST_DEVICE TokenGates token_gates(float x, float gx, float ga, float log_a_coeff, bool reset) {
  return token_gates(x, gate_activations(gx, ga), log_a_coeff, reset);
}

//! One step of the fp32 carry: h_t = a_bar · h_{t-1} + u, one fused multiply-add (the same bits on every
//! path); at a reset h_t = u, whatever h_{t-1} holds (NaN and Inf included).
HAWK_HOST_DEVICE float recurrence_step(float a_bar, float h_prev, float u) {
  return is_reset_a_bar(a_bar) ? u : fmaf(a_bar, h_prev, u);
}

//! recurrence_step for a kernel that knows its reset policy at compile time, with the same bits. NoReset has no
//! reset token, and a ResetAtSequenceStart kernel starts its carry at 0 instead of h0 (its first token drops
//! h0): fmaf(-0, 0, u) is exactly u, so neither needs the selection on its serial path; ResetFlags does.
template <ResetMode kMode>
HAWK_HOST_DEVICE float recurrence_step_for(float a_bar, float h_prev, float u) {
  if constexpr (kMode == ResetMode::kFlags) {
    return recurrence_step(a_bar, h_prev, u);
  } else {
    return fmaf(a_bar, h_prev, u);
  }
}

//! One step of the backward's reverse carry: dh_t = dy_t + a_bar_{t+1} · dh_{t+1}, rounded twice (no fused
//! multiply-add, so that a piece's dh0 = fl(a_bar · dh) fed as the previous piece's dh_final gives one call's
//! bits); at a reset token t + 1, dh_t = dy_t: a non-finite dh never crosses a reset backwards.
HAWK_HOST_DEVICE float reverse_step(float a_bar_next, float dh_next, float dy) {
  return is_reset_a_bar(a_bar_next) ? dy : detail::add_rn(dy, detail::mul_rn(a_bar_next, dh_next));
}

//! reverse_step for a kernel that knows its reset policy at compile time, with the same bits: without reset
//! flags no token after a sequence's first is a reset, and the first token's a_bar never multiplies inside the
//! reverse scan (it only enters dh0, through initial_state_gradient), so only ResetFlags needs the selection.
template <ResetMode kMode>
HAWK_HOST_DEVICE float reverse_step_for(float a_bar_next, float dh_next, float dy) {
  if constexpr (kMode == ResetMode::kFlags) {
    return reverse_step(a_bar_next, dh_next, dy);
  } else {
    return detail::add_rn(dy, detail::mul_rn(a_bar_next, dh_next));
  }
}

//! The gradient leaving a sequence through its initial state: dh0 = a_bar_0 · dh_0, and 0 when the first
//! token is a reset (h0 was dropped, whatever dh_0 holds).
HAWK_HOST_DEVICE float initial_state_gradient(float a_bar_first, float dh_first) {
  return is_reset_a_bar(a_bar_first) ? 0.0f : detail::mul_rn(a_bar_first, dh_first);
}

//! The running product Π a_bar of a sequence (ForwardArguments::decay), one token more. Once a reset occurs
//! it is kResetABar for good (-0 · a stays -0), so that a transfer pair (decay, h_end) combined with
//! recurrence_step(decay, h, h_end) drops the incoming state exactly as the sequence itself does.
HAWK_HOST_DEVICE float decay_step(float decay, float a_bar) {
  return is_reset_a_bar(a_bar) ? kResetABar : detail::mul_rn(decay, a_bar);
}

//! Gradients of one token and channel, given dh_t (the full adjoint of h_t) and the previous state.
struct TokenGateGrads {
  float dx;            //!< direct path dh · i · m (the projection path is added by the fused backward)
  float dgx;           //!< d gx
  float dga;           //!< d ga
  float da_param_sum;  //!< dlog_a · (-c · r); summed over tokens, then times sigmoid(a_param)
};

//! token_gate_grads (below) given its a = token_decay(activations, log_a_coeff): token_gates' a, which is also the
//! a_bar of every token that is not a reset, so that a caller holding that a_bar need not evaluate it again.
template <bool UnbranchedSqrtGrad = false>
HAWK_HOST_DEVICE TokenGateGrads token_gate_grads_given_a(float x, GateActivations activations, float log_a_coeff,
                                                         bool reset, float h_prev, float dh, float a) {
  const float i = activations.i;
  const float r = activations.r;
  const float a2 = detail::mul_rn(a, a);  // = exp(2 · log_a), one transcendental fewer
  const float one_minus_a2 = detail::sub_rn(1.0f, a2);
  const float m = reset ? 1.0f : detail::gate_sqrt(one_minus_a2);

  const float di = dh * x * m;
  const float dm = reset ? 0.0f : dh * x * i;
  const float da_bar = dh * h_prev;
  const float through_a = reset ? 0.0f : detail::mul_rn(da_bar, a);
  const float through_m =
      detail::mul_rn(2.0f * a2 * math::sqrt_grad_capped_finite<UnbranchedSqrtGrad>(one_minus_a2), dm);
  const float dlog_a = detail::sub_rn(through_a, through_m);  // each product rounded before the difference

  TokenGateGrads grads;
  grads.dx = dh * i * m;
  grads.dgx = di * i * detail::sub_rn(1.0f, i);
  grads.dga = dlog_a * log_a_coeff * r * detail::sub_rn(1.0f, r);
  grads.da_param_sum = dlog_a * (-kGateScale * r);
  return grads;
}

//! a = gate_exp(log_a_coeff · r), the same operations as token_gates' (the same bits).
HAWK_HOST_DEVICE float token_decay(GateActivations activations, float log_a_coeff) {
  return detail::gate_exp(log_a_coeff * activations.r);
}

//! Gradients of one token and channel from its activations i, r (gate_activations). `UnbranchedSqrtGrad`:
//! math::sqrt_grad_capped_finite's form without a branch (the same bits; its comment says where it pays).
template <bool UnbranchedSqrtGrad = false>
HAWK_HOST_DEVICE TokenGateGrads token_gate_grads(float x, GateActivations activations, float log_a_coeff, bool reset,
                                                 float h_prev, float dh) {
  return token_gate_grads_given_a<UnbranchedSqrtGrad>(x, activations, log_a_coeff, reset, h_prev, dh,
                                                      token_decay(activations, log_a_coeff));
}

//! Gradients of one token and channel from its pre-activations gx, ga.
HAWK_HOST_DEVICE TokenGateGrads token_gate_grads(float x, float gx, float ga, float log_a_coeff, bool reset,
                                                 float h_prev, float dh) {
  return token_gate_grads(x, gate_activations(gx, ga), log_a_coeff, reset, h_prev, dh);
}

}  // namespace rglru
}  // namespace hawk
