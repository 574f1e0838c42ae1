#pragma once
//! \file
//! Float64 CPU reference of the RG-LRU forward and backward, exactly as SPEC §1. No CUDA needed.
//!
//! Layout: tokens are rows of a [T, W] row-major matrix; sequences are the row ranges given by `cu_seqlens`
//! ([N+1], increasing, from 0 to T). A dense batch [B, L, W] is `dense_cu_seqlens(B, L)`. Resets are explicit
//! per-token flags; `reset_at_sequence_starts` builds the canonical training flags.
//!
//! Mode: fused when `RglruInputs::gx` is empty (the block-diagonal projections are computed from Wx, bx, Wa,
//! ba); gate-logits when gx and ga are given (the parameters' projection fields are ignored).
//!
//! Resets drop the state by selection, not by a multiplication with ā = 0 (SPEC §1): at a reset h_t = u_t
//! whatever h_{t-1} holds, and in the backward dh_t = dy_t when token t + 1 is a reset, dh0 = 0 when token 0
//! is. So a NaN or Inf in h0, in an earlier document of a packed row or in a later document's dy never crosses
//! a reset, and a packed row gives the bits of its documents run as separate calls, non-finite values included.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "hawk/core/math.hpp"

namespace hawk {
namespace reference {

//! cu_seqlens of B sequences of L tokens each: {0, L, 2L, ..., B·L}.
inline std::vector<std::int64_t> dense_cu_seqlens(std::int64_t batch, std::int64_t length) {
  std::vector<std::int64_t> cu(static_cast<std::size_t>(batch + 1));
  for (std::int64_t b = 0; b <= batch; ++b) cu[static_cast<std::size_t>(b)] = b * length;
  return cu;
}

//! Per-token flags with a reset at the first token of every sequence and nowhere else.
inline std::vector<std::uint8_t> reset_at_sequence_starts(const std::vector<std::int64_t>& cu_seqlens) {
  std::vector<std::uint8_t> reset(cu_seqlens.empty() ? 0 : static_cast<std::size_t>(cu_seqlens.back()), 0);
  for (std::size_t n = 0; n + 1 < cu_seqlens.size(); ++n)
    if (cu_seqlens[n] < cu_seqlens[n + 1]) reset[static_cast<std::size_t>(cu_seqlens[n])] = 1;
  return reset;
}

//! The layer's parameters. Wx, Wa are [H, w, w] indexed [k, in, out]; bx, ba [H, w]; a_param [W].
struct RglruParams {
  std::int64_t width = 0;       //!< W
  std::int64_t num_blocks = 0;  //!< H
  std::vector<double> Wx, bx, Wa, ba, a_param;

  std::int64_t block_width() const { return width / num_blocks; }
};

struct RglruInputs {
  std::vector<std::int64_t> cu_seqlens;  //!< [N+1]
  std::vector<double> x;                 //!< [T, W]
  std::vector<double> gx, ga;            //!< [T, W] in gate-logits mode; empty in fused mode
  std::vector<std::uint8_t> reset;       //!< [T], nonzero = reset; empty = no resets
  std::vector<double> h0;                //!< [N, W]; empty = zero initial state

  std::int64_t num_tokens() const { return cu_seqlens.empty() ? 0 : cu_seqlens.back(); }
  std::int64_t num_sequences() const { return static_cast<std::int64_t>(cu_seqlens.size()) - 1; }
  bool fused() const { return gx.empty(); }
};

struct RglruForwardResult {
  std::vector<double> y;        //!< [T, W] (h_t itself; the GPU rounds it to x's dtype)
  std::vector<double> h_final;  //!< [N, W]
  std::vector<double> gx, ga;   //!< [T, W] pre-activations that were used (projected in fused mode)
};

struct RglruGrads {
  std::vector<double> dx;                        //!< [T, W], projection paths included in fused mode
  std::vector<double> dgx, dga;                  //!< [T, W]
  std::vector<double> dWx, dbx, dWa, dba;        //!< fused mode only (empty in gate-logits mode)
  std::vector<double> da_param;                  //!< [W]
  std::vector<double> dh0;                       //!< [N, W]
};

namespace detail {

inline void check_inputs(const RglruParams& p, const RglruInputs& in) {
  const std::int64_t W = p.width;
  if (W <= 0 || p.num_blocks <= 0 || W % p.num_blocks != 0)
    throw std::invalid_argument("reference: W must be a positive multiple of H");
  if (in.cu_seqlens.size() < 2 || in.cu_seqlens.front() != 0)
    throw std::invalid_argument("reference: cu_seqlens must hold at least 2 entries and start at 0");
  for (std::size_t n = 0; n + 1 < in.cu_seqlens.size(); ++n)
    if (in.cu_seqlens[n + 1] < in.cu_seqlens[n]) throw std::invalid_argument("reference: cu_seqlens decreases");
  const auto T = static_cast<std::size_t>(in.num_tokens());
  const auto N = static_cast<std::size_t>(in.num_sequences());
  const auto w = static_cast<std::size_t>(p.block_width());
  const auto H = static_cast<std::size_t>(p.num_blocks);
  auto need = [](const std::vector<double>& v, std::size_t n, const char* name) {
    if (v.size() != n) throw std::invalid_argument(std::string("reference: wrong size for ") + name);
  };
  need(in.x, T * W, "x");
  need(p.a_param, static_cast<std::size_t>(W), "a_param");
  if (in.fused()) {
    need(p.Wx, H * w * w, "Wx");
    need(p.Wa, H * w * w, "Wa");
    need(p.bx, H * w, "bx");
    need(p.ba, H * w, "ba");
  } else {
    need(in.gx, T * W, "gx");
    need(in.ga, T * W, "ga");
  }
  if (!in.reset.empty() && in.reset.size() != T) throw std::invalid_argument("reference: wrong size for reset");
  if (!in.h0.empty()) need(in.h0, N * W, "h0");
}

//! out[t, k·w + o] = Σ_i x[t, k·w + i] · Wt[k, i, o] + bias[k, o]   (block-diagonal projection)
inline std::vector<double> block_diagonal_projection(const std::vector<double>& x, std::int64_t T, std::int64_t W,
                                                     std::int64_t H, const std::vector<double>& weight,
                                                     const std::vector<double>& bias) {
  const std::int64_t w = W / H;
  std::vector<double> out(static_cast<std::size_t>(T * W));
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t k = 0; k < H; ++k)
      for (std::int64_t o = 0; o < w; ++o) {
        double acc = bias[static_cast<std::size_t>(k * w + o)];
        for (std::int64_t i = 0; i < w; ++i)
          acc += x[static_cast<std::size_t>(t * W + k * w + i)] * weight[static_cast<std::size_t>((k * w + i) * w + o)];
        out[static_cast<std::size_t>(t * W + k * w + o)] = acc;
      }
  return out;
}

//! Everything a token and channel computes in the forward, kept for the backward.
struct TokenState {
  double i, r, a, a2, m, a_bar, u;
};

inline TokenState token_state(double x, double gx, double ga, double a_param, bool reset) {
  TokenState s;
  s.i = math::sigmoid(gx);
  s.r = math::sigmoid(ga);
  const double log_a = -8.0 * s.r * math::softplus(a_param);
  s.a = std::exp(log_a);
  s.a2 = std::exp(2.0 * log_a);
  s.m = reset ? 1.0 : std::sqrt(1.0 - s.a2);
  s.u = x * s.i * s.m;
  s.a_bar = reset ? 0.0 : s.a;
  return s;
}

}  // namespace detail

//! Forward pass: y = h for every token, and every sequence's final state.
inline RglruForwardResult rglru_forward(const RglruParams& p, const RglruInputs& in) {
  detail::check_inputs(p, in);
  const std::int64_t W = p.width, T = in.num_tokens(), N = in.num_sequences();
  RglruForwardResult out;
  if (in.fused()) {
    out.gx = detail::block_diagonal_projection(in.x, T, W, p.num_blocks, p.Wx, p.bx);
    out.ga = detail::block_diagonal_projection(in.x, T, W, p.num_blocks, p.Wa, p.ba);
  } else {
    out.gx = in.gx;
    out.ga = in.ga;
  }
  out.y.assign(static_cast<std::size_t>(T * W), 0.0);
  out.h_final.assign(static_cast<std::size_t>(N * W), 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t d = 0; d < W; ++d) {
      double h = in.h0.empty() ? 0.0 : in.h0[static_cast<std::size_t>(n * W + d)];
      for (std::int64_t t = in.cu_seqlens[n]; t < in.cu_seqlens[n + 1]; ++t) {
        const auto e = static_cast<std::size_t>(t * W + d);
        const bool reset = !in.reset.empty() && in.reset[static_cast<std::size_t>(t)] != 0;
        const auto s = detail::token_state(in.x[e], out.gx[e], out.ga[e], p.a_param[static_cast<std::size_t>(d)], reset);
        h = reset ? s.u : s.a_bar * h + s.u;  // selection: a reset drops h, NaN and Inf included
        out.y[e] = h;
      }
      out.h_final[static_cast<std::size_t>(n * W + d)] = h;
    }
  }
  return out;
}

//! Backward pass from dy [T, W] and an optional dh_final [N, W] (empty = zero).
inline RglruGrads rglru_backward(const RglruParams& p, const RglruInputs& in, const std::vector<double>& dy,
                                 const std::vector<double>& dh_final = {}) {
  detail::check_inputs(p, in);
  const std::int64_t W = p.width, T = in.num_tokens(), N = in.num_sequences(), H = p.num_blocks;
  const std::int64_t w = p.block_width();
  if (dy.size() != static_cast<std::size_t>(T * W)) throw std::invalid_argument("reference: wrong size for dy");
  if (!dh_final.empty() && dh_final.size() != static_cast<std::size_t>(N * W))
    throw std::invalid_argument("reference: wrong size for dh_final");

  const RglruForwardResult fwd = rglru_forward(p, in);
  RglruGrads g;
  g.dx.assign(static_cast<std::size_t>(T * W), 0.0);
  g.dgx.assign(static_cast<std::size_t>(T * W), 0.0);
  g.dga.assign(static_cast<std::size_t>(T * W), 0.0);
  g.da_param.assign(static_cast<std::size_t>(W), 0.0);
  g.dh0.assign(static_cast<std::size_t>(N * W), 0.0);

  for (std::int64_t n = 0; n < N; ++n) {
    const std::int64_t begin = in.cu_seqlens[n], end = in.cu_seqlens[n + 1];
    for (std::int64_t d = 0; d < W; ++d) {
      const double a_param = p.a_param[static_cast<std::size_t>(d)];
      const double h_init = in.h0.empty() ? 0.0 : in.h0[static_cast<std::size_t>(n * W + d)];
      double dh_next = dh_final.empty() ? 0.0 : dh_final[static_cast<std::size_t>(n * W + d)];
      double a_bar_next = 1.0;  // dh_{L-1} = dy_{L-1} + dh_final: the "next" factor is 1 for dh_final
      bool reset_next = false;  // whether token t + 1 is a reset (dh_final is never cut)
      double da_param_sum = 0.0;
      for (std::int64_t t = end - 1; t >= begin; --t) {
        const auto e = static_cast<std::size_t>(t * W + d);
        const bool reset = !in.reset.empty() && in.reset[static_cast<std::size_t>(t)] != 0;
        const auto s = detail::token_state(in.x[e], fwd.gx[e], fwd.ga[e], a_param, reset);
        const double dh = reset_next ? dy[e] : dy[e] + a_bar_next * dh_next;  // selection at a reset
        const double h_prev = t > begin ? fwd.y[e - static_cast<std::size_t>(W)] : h_init;
        const double da_bar = dh * h_prev;
        const double di = dh * in.x[e] * s.m;
        const double dm = reset ? 0.0 : dh * in.x[e] * s.i;
        const double dlog_a = (reset ? 0.0 : da_bar * s.a) - 2.0 * s.a2 * math::sqrt_grad_capped(1.0 - s.a2) * dm;
        g.dx[e] = dh * s.i * s.m;
        g.dgx[e] = di * s.i * (1.0 - s.i);
        g.dga[e] = dlog_a * (-8.0 * math::softplus(a_param)) * s.r * (1.0 - s.r);
        da_param_sum += dlog_a * (-8.0 * s.r);
        dh_next = dh;
        a_bar_next = s.a_bar;
        reset_next = reset;
      }
      // dh0 = ā_0 · dh_0, and 0 when token 0 is a reset (h0 was dropped); for an empty sequence dh0 = dh_final.
      g.dh0[static_cast<std::size_t>(n * W + d)] = reset_next ? 0.0 : a_bar_next * dh_next;
      g.da_param[static_cast<std::size_t>(d)] += math::sigmoid(a_param) * da_param_sum;
    }
  }

  if (in.fused()) {
    g.dWx.assign(static_cast<std::size_t>(H * w * w), 0.0);
    g.dWa.assign(static_cast<std::size_t>(H * w * w), 0.0);
    g.dbx.assign(static_cast<std::size_t>(H * w), 0.0);
    g.dba.assign(static_cast<std::size_t>(H * w), 0.0);
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t k = 0; k < H; ++k)
        for (std::int64_t o = 0; o < w; ++o) {
          const auto e = static_cast<std::size_t>(t * W + k * w + o);
          g.dbx[static_cast<std::size_t>(k * w + o)] += g.dgx[e];
          g.dba[static_cast<std::size_t>(k * w + o)] += g.dga[e];
          for (std::int64_t i = 0; i < w; ++i) {
            const auto xi = static_cast<std::size_t>(t * W + k * w + i);
            const auto wi = static_cast<std::size_t>((k * w + i) * w + o);
            g.dWx[wi] += in.x[xi] * g.dgx[e];
            g.dWa[wi] += in.x[xi] * g.dga[e];
            g.dx[xi] += p.Wx[wi] * g.dgx[e] + p.Wa[wi] * g.dga[e];
          }
        }
  }
  return g;
}

}  // namespace reference
}  // namespace hawk
