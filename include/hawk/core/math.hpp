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
