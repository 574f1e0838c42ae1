#pragma once
//! \file
//! Arguments lowered to the kernels' parameters (CUTLASS's `to_underlying_arguments`): ForwardArguments to the
//! forward and decode kernels' ForwardParams in one function, so that Forward and DecodeStep hand their kernels
//! the same values, and what the backward's BackwardScanParams shares with them in another
//! (`lower_shared_params`), so that the backward recomputes the forward from the same lowering.

#include <cstdint>

#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/params.hpp"

namespace hawk {
namespace rglru {

//! The forward's inputs of `args` (ForwardArguments or BackwardArguments) into `p`'s GateInputs, typed as
//! `Element`: one lowering for the forward, decode and backward kernels, which must read the same tensors.
template <class Element, class Arguments>
void lower_gate_inputs(GateInputs<Element>& p, const Arguments& args) {
  p.x = static_cast<const Element*>(args.x);
  p.Wx = static_cast<const Element*>(args.Wx);
  p.bx = args.bx;
  p.Wa = static_cast<const Element*>(args.Wa);
  p.ba = args.ba;
  p.gx = static_cast<const Element*>(args.gx);
  p.ga = static_cast<const Element*>(args.ga);
  p.a_param = args.a_param;
  p.reset = args.reset;
}

//! What ForwardParams and BackwardScanParams both hold, from `args` (ForwardArguments or BackwardArguments): the
//! call's device-check word (null: checks off), the forward's inputs (lower_gate_inputs), the state slots and
//! the extent of the problem as the kernels bound it (offsets or length, T, state rows, W, width tiles of
//! `Config`).
template <class Config, class Params, class Arguments>
void lower_shared_params(Params& p, const Arguments& args, const unsigned int* checks) {
  p.checks = checks;
  lower_gate_inputs<typename Config::Element>(p, args);
  p.state_index = args.state_index;
  p.cu_seqlens = args.shape.cu_seqlens;
  p.seq_len = args.shape.packed() ? 0 : args.shape.seq_len;
  p.num_tokens = args.shape.num_tokens;
  p.num_state_rows = args.state_index != nullptr ? args.shape.num_state_rows : args.shape.num_sequences;
  p.width = args.shape.width;
  p.width_tiles = static_cast<int>(args.shape.width / Config::kWidthTile);
}

//! The kernels' parameters for `args` under `Config` (after can_implement succeeded) and the call's device-check
//! word (null: checks off).
template <class Config>
ForwardParams<typename Config::Element> make_forward_params(const ForwardArguments& args, const unsigned int* checks) {
  using Element = typename Config::Element;
  ForwardParams<Element> p;
  lower_shared_params<Config>(p, args, checks);
  p.h0 = args.h0;
  p.h_final = args.h_final;
  p.y = static_cast<Element*>(args.y);
  p.decay = args.decay;
  p.checkpoints = args.checkpoints;
  return p;
}

}  // namespace rglru
}  // namespace hawk
