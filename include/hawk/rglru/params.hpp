#pragma once
//! \file
//! `GateInputs` (the forward's inputs, typed), `ForwardParams` and `ChunkedForwardParams`: what the forward,
//! chunked-forward and decode kernels read (kernels/forward_kernel.cuh, kernels/chunked_forward_kernel.cuh,
//! kernels/wgmma_chunked_forward_kernel.cuh, kernels/decode_step_kernel.cuh);
//! the backward scan's params start with the same GateInputs. In the family's foundation, below the kernels,
//! because several kernels take them and no kernel may include another kernel's file; the operators fill them
//! from the Arguments (operators/lowering.hpp).

#include <cstdint>

namespace hawk {
namespace rglru {

//! The forward's inputs with the element type applied, as every RG-LRU kernel reads them: the forward and decode
//! kernels (ForwardParams) and the backward scan (BackwardScanParams, kernels/backward_scan_kernel.cuh), which
//! recomputes the forward from the same tensors. One list, so that the kernels' parameter structs and their
//! lowering (operators/lowering.hpp, `lower_gate_inputs`) cannot drift apart.
template <class Element>
struct GateInputs {
  const Element* x = nullptr;
  const Element* Wx = nullptr;
  const float* bx = nullptr;
  const Element* Wa = nullptr;
  const float* ba = nullptr;
  const Element* gx = nullptr;
  const Element* ga = nullptr;
  const float* a_param = nullptr;
  const std::uint8_t* reset = nullptr;
};

//! ForwardArguments with the element type applied and shapes narrowed.
template <class Element>
struct ForwardParams : GateInputs<Element> {
  // h0 and h_final may alias (in-place state update): neither is __restrict__ nor read through the
  // non-coherent cache. Each element is read and later written by the same thread.
  const float* h0 = nullptr;
  float* h_final = nullptr;
  float* decay = nullptr;  //!< [S, W] or null: Π a_bar over the sequence (arguments.hpp)
  const std::int32_t* state_index = nullptr;
  Element* y = nullptr;
  float* checkpoints = nullptr;
  const std::int32_t* cu_seqlens = nullptr;
  std::int64_t seq_len = 0;   //!< dense batches (cu_seqlens == nullptr)
  std::int64_t num_tokens = 0;      //!< T: bounds the offsets of cu_seqlens
  std::int64_t num_state_rows = 0;  //!< rows of the state tensors: bounds state_index
  std::int64_t width = 0;     //!< W
  int width_tiles = 0;        //!< W / WidthTile: CTAs per sequence
  //! The device checks' word (core/device_checks.cuh), or null: set means bad index tensors, write nothing.
  const unsigned int* checks = nullptr;
};

//! What the chunked forward kernels read (kernels/chunked_forward_kernel.cuh and
//! kernels/wgmma_chunked_forward_kernel.cuh): the sequential forward's parameters plus the chain's buffers
//! (block/chained_carry.cuh).
template <class Element>
struct ChunkedForwardParams {
  ForwardParams<Element> forward;
  std::int64_t num_sequences = 0;                //!< N
  std::int64_t tickets = 0;                      //!< chunks x width tiles; CTAs past it leave at once
  unsigned long long* ticket_counter = nullptr;  //!< zero before the launch
  unsigned long long* carry_words = nullptr;     //!< [rows][W], zero (unpublished) before the launch
  float* carry_decay = nullptr;                  //!< [rows][W]
};

}  // namespace rglru
}  // namespace hawk
