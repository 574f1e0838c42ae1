#pragma once
//! \file
//! ForwardArguments lowered to the forward and decode kernels' ForwardParams (CUTLASS's
//! `to_underlying_arguments`): one function, so that Forward and DecodeStep hand their kernels the same values.

#include <cstdint>

#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/params.hpp"

namespace hawk {
namespace rglru {

//! The kernels' parameters for `args` under `Config` (after can_implement succeeded) and the call's device-check
//! word (null: checks off).
template <class Config>
ForwardParams<typename Config::Element> make_forward_params(const ForwardArguments& args, const unsigned int* checks) {
  using Element = typename Config::Element;
  ForwardParams<Element> p;
  p.checks = checks;
  p.num_tokens = args.shape.num_tokens;
  p.num_state_rows = args.state_index != nullptr ? args.shape.num_state_rows : args.shape.num_sequences;
  p.x = static_cast<const Element*>(args.x);
  p.Wx = static_cast<const Element*>(args.Wx);
  p.bx = args.bx;
  p.Wa = static_cast<const Element*>(args.Wa);
  p.ba = args.ba;
  p.gx = static_cast<const Element*>(args.gx);
  p.ga = static_cast<const Element*>(args.ga);
  p.a_param = args.a_param;
  p.reset = args.reset;
  p.h0 = args.h0;
  p.h_final = args.h_final;
  p.decay = args.decay;
  p.state_index = args.state_index;
  p.y = static_cast<Element*>(args.y);
  p.checkpoints = args.checkpoints;
  p.cu_seqlens = args.shape.cu_seqlens;
  p.seq_len = args.shape.packed() ? 0 : args.shape.seq_len;
  p.width = args.shape.width;
  p.width_tiles = static_cast<int>(args.shape.width / Config::kWidthTile);
  return p;
}

}  // namespace rglru
}  // namespace hawk
