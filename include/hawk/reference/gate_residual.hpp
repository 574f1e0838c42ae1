#pragma once
//! \file
//! Float64 CPU reference of the gate-residual forward and backward (SPEC §2). No CUDA needed.
//!
//! residual, y, out, dout: [N, D] row-major; gate: [G, D]; idx: [N] with 0 <= idx[r] < G.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace hawk {
namespace reference {

struct GateResidualGrads {
  std::vector<double> dresidual;  //!< [N, D] (equal to dout)
  std::vector<double> dy;         //!< [N, D]
  std::vector<double> dgate;      //!< [G, D], zero for rows no idx names
};

namespace detail {
inline void check_gate_residual(std::size_t N, std::size_t D, std::size_t G, const std::vector<double>& gate,
                                const std::vector<std::int64_t>& idx) {
  if (gate.size() != G * D) throw std::invalid_argument("reference: gate must be [G, D]");
  if (idx.size() != N) throw std::invalid_argument("reference: idx must be [N]");
  for (std::int64_t i : idx)
    if (i < 0 || static_cast<std::size_t>(i) >= G) throw std::out_of_range("reference: idx out of range");
}
}  // namespace detail

//! out[r] = residual[r] + gate[idx[r]] · y[r]
inline std::vector<double> gate_residual_forward(const std::vector<double>& residual, const std::vector<double>& y,
                                                 const std::vector<double>& gate, const std::vector<std::int64_t>& idx,
                                                 std::size_t N, std::size_t D, std::size_t G) {
  detail::check_gate_residual(N, D, G, gate, idx);
  if (residual.size() != N * D || y.size() != N * D) throw std::invalid_argument("reference: residual, y must be [N, D]");
  std::vector<double> out(N * D);
  for (std::size_t r = 0; r < N; ++r) {
    const std::size_t g = static_cast<std::size_t>(idx[r]);
    for (std::size_t c = 0; c < D; ++c) out[r * D + c] = residual[r * D + c] + gate[g * D + c] * y[r * D + c];
  }
  return out;
}

//! dres = dout; dy = dout · gate[idx]; dgate[g] = Σ_{r: idx[r] = g} dout[r] · y[r].
inline GateResidualGrads gate_residual_backward(const std::vector<double>& dout, const std::vector<double>& y,
                                                const std::vector<double>& gate, const std::vector<std::int64_t>& idx,
                                                std::size_t N, std::size_t D, std::size_t G) {
  detail::check_gate_residual(N, D, G, gate, idx);
  if (dout.size() != N * D || y.size() != N * D) throw std::invalid_argument("reference: dout, y must be [N, D]");
  GateResidualGrads g;
  g.dresidual = dout;
  g.dy.resize(N * D);
  g.dgate.assign(G * D, 0.0);
  for (std::size_t r = 0; r < N; ++r) {
    const std::size_t k = static_cast<std::size_t>(idx[r]);
    for (std::size_t c = 0; c < D; ++c) {
      g.dy[r * D + c] = dout[r * D + c] * gate[k * D + c];
      g.dgate[k * D + c] += dout[r * D + c] * y[r * D + c];
    }
  }
  return g;
}

}  // namespace reference
}  // namespace hawk
