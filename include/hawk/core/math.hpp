#pragma once
//! \file
//! The fp32 scalar math both kernel families share, on host and device.
//!
//! Every kernel (prefill, decode, backward) calls these same functions, so the same inputs give the same bits
//! on the GPU every time and in every code path. Build without `--use_fast_math`: these rely on the CUDA math
//! library's `expf`/`log1pf`/`sqrtf` and IEEE division, which are deterministic (not approximate intrinsics
//! whose accuracy varies with flags).

#include <cmath>

#include "hawk/core/macros.hpp"

namespace hawk {
namespace math {

//! 1 / (1 + e^-x), written to neither overflow nor lose the small tail: for x < 0 it uses e^x / (1 + e^x).
HAWK_HOST_DEVICE float sigmoid(float x) {
  if (x >= 0.0f) {
    return 1.0f / (1.0f + expf(-x));
  }
  const float e = expf(x);
  return e / (1.0f + e);
}

//! log(1 + e^x), exact for large |x|: max(x, 0) + log1p(e^-|x|). For x = 100 this is 100, not inf; for
//! x = -30 it is e^-30 (about 9.4e-14), not 0 from log(1 + tiny).
HAWK_HOST_DEVICE float softplus(float x) {
  return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
}

//! The lower bound on the argument of the bounded sqrt derivative: 1 / (4 * 1000^2), so that
//! sqrt_grad_capped(z) <= 1000 (SPEC §1).
constexpr float kSqrtGradFloor = 1.0f / (4.0f * 1000.0f * 1000.0f);

//! d sqrt(z) / dz = 1 / (2 sqrt(z)), with z clamped from below so the derivative is capped at 1000.
//! At and below the floor the result is exactly the cap, 1000 (1 / (2·sqrt(2.5e-7)) would round to 999.99994).
constexpr float kSqrtGradCap = 1000.0f;
HAWK_HOST_DEVICE float sqrt_grad_capped(float z) {
  return z <= kSqrtGradFloor ? kSqrtGradCap : 1.0f / (2.0f * sqrtf(z));
}

//! sqrt_grad_capped(z), the same bits for every z but +inf (and NaN for NaN), without the IEEE operations' range
//! checks. `1 / (2·sqrtf(z))` compiles to a square root and a division, each a MUFU approximation refined by one Newton
//! step (the fast path) behind a range check that calls a slow-path subroutine for zero, subnormal, infinite and NaN
//! operands: about 25 instructions with two branches per call, which in the backward's gradient phase also keeps the
//! compiler from interleaving a thread's channels. Above the floor (2.5e-7) every operand either path meets is a finite
//! normal number (z; sqrt(z) and 2·sqrt(z) up to 2^65), so only the fast paths ever run: this writes them out alone (11
//! instructions, no branch but the floor's), the operations nvcc emits for sm_80, sm_89, sm_90, sm_100 and sm_120, in
//! the same order on the same operands. The FTZ flags of the approximations and of two multiplies differ from nvcc's,
//! which cannot matter for normal operands and results. z = +inf (which 1 - a² never is) gives NaN here and 0 there.
//! tests/gpu/core/math_device_test.cu compares the two at all 2^32 inputs. (Against the IEEE forms, as hawk is built:
//! without --use_fast_math, -prec-sqrt=false or -prec-div=false, as this file's header says.)
//!
//! `Unbranched`: the fast path runs for every z and the cap is selected after it (its value discarded at or below the
//! floor, where the approximations may meet zero or a subnormal; the same bits), so that a caller's four channels are
//! not split into four guarded regions (BSSY / BSYNC / BRA around each call). The compiler then interleaves more and
//! may take more registers: the RG-LRU backward scans take it where that costs no spill and no CTA an SM
//! (rglru/block/backward_scan_phases.cuh, straight_line_gate_math).
template <bool Unbranched = false>
HAWK_HOST_DEVICE float sqrt_grad_capped_finite(float z) {
#if defined(__CUDA_ARCH__)
  if constexpr (!Unbranched) {
    if (z <= kSqrtGradFloor) return kSqrtGradCap;
  }
  // sqrtf's fast path: r ≈ 1/sqrt(z); s = z·r; one Newton step s + (z - s²)·(r/2).
  float rsqrt_z;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(rsqrt_z) : "f"(z));
  const float root = __fmul_rn(z, rsqrt_z);
  const float half_rsqrt = __fmul_rn(rsqrt_z, 0.5f);
  const float root_residual = __fmaf_rn(-root, root, z);
  const float sqrt_z = __fmaf_rn(root_residual, half_rsqrt, root);
  // The division's fast path for 1 / d: q ≈ 1/d; one Newton step q + q·(1 - d·q).
  const float d = __fadd_rn(sqrt_z, sqrt_z);
  float inverse;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(inverse) : "f"(d));
  const float inverse_residual = -__fmaf_rn(d, inverse, -1.0f);
  const float fast = __fmaf_rn(inverse, inverse_residual, inverse);
  if constexpr (Unbranched) {
    return z <= kSqrtGradFloor ? kSqrtGradCap : fast;
  } else {
    return fast;
  }
#else
  return sqrt_grad_capped(z);
#endif
}

// Float64 twins, for the reference.
inline double sigmoid(double x) {
  if (x >= 0.0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}
inline double softplus(double x) { return std::fmax(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }
inline double sqrt_grad_capped(double z) {
  return 1.0 / (2.0 * std::sqrt(std::fmax(z, 1.0 / (4.0 * 1000.0 * 1000.0))));
}

}  // namespace math
}  // namespace hawk
