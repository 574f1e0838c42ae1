#pragma once
//! \file
//! The default entry points: runtime dtypes -> the shipped configuration (flash-attention style).
//!
//!     hawk::gate_residual::ForwardArguments args;   // shape {N, D, G, dtype, gate_dtype, index_type}, pointers
//!     std::size_t bytes = hawk::gate_residual::forward_workspace_size(args);
//!     hawk::Status status = hawk::gate_residual::forward(args, workspace, bytes, stream);
//!
//! Every (dtype, gate_dtype, index_type) combination runs DefaultForwardTile / DefaultBackwardTile: the tiles
//! are library constants, never picked from N, D, G or the device, so results (dgate bits included, fixed by
//! kDefaultChunkRows) are the same on every problem size and every GPU.
//!
//! The forward's workspace does not depend on the dtypes, so its size is computed without dispatching.
//!
//! Device checks of idx (validate_indices) follow core/device_checks.cuh: run() returns success without
//! synchronising unless shape.wait_for_device_checks, a call with bad idx writes nothing, and
//! hawk::read_device_checks(workspace, stream) returns the verdict of the last call that used the workspace.
//! Pass the backward's `layout` / `rows_per_group` to the forward too: it checks them the same way.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "hawk/core/dispatch.hpp"
#include "hawk/core/status.hpp"
#include "hawk/gate_residual/arguments.hpp"
#include "hawk/gate_residual/config.hpp"
#include "hawk/gate_residual/operators/backward.cuh"
#include "hawk/gate_residual/operators/forward.cuh"

namespace hawk {
namespace gate_residual {

namespace detail {

//! Calls `visit(Element{}, Gate{}, Index{})` (value-initialised tags) with the C++ types of the runtime
//! (dtype, gate_dtype, index_type), or returns kUnsupportedConfiguration: the one dtype switch behind all four
//! entry points.
template <class Visit>
Status visit_dtypes(const ProblemShape& shape, Visit&& visit) {
  return HAWK_DISPATCH_DTYPE(shape.dtype, Element, [&] {
    return HAWK_DISPATCH_PARAM_DTYPE(shape.gate_dtype, Gate, [&] {
      return HAWK_DISPATCH_INDEX(shape.index_type, Index, [&] { return visit(Element{}, Gate{}, Index{}); });
    });
  });
}

}  // namespace detail

//! The default forward operator for the element, gate and index types.
template <class Element, class Gate, class Index>
using DefaultForward = Forward<Element, Gate, Index, DefaultForwardTile>;
//! The default backward operator for the element, gate and index types.
template <class Element, class Gate, class Index>
using DefaultBackward = Backward<Element, Gate, Index, DefaultBackwardTile>;

//! Host checks of the default forward (no device work).
inline Status forward_can_implement(const ForwardArguments& args) {
  return detail::visit_dtypes(args.shape, [&](auto element, auto gate, auto index) {
    return DefaultForward<decltype(element), decltype(gate), decltype(index)>::can_implement(args);
  });
}

//! Workspace bytes of the default forward: when validating idx, the check word (256 bytes) plus a 4·G-byte
//! table for kContiguousSegments; else 0.
inline std::size_t forward_workspace_size(const ForwardArguments& args) {
  return DefaultForward<float, float, std::int64_t>::workspace_size(args);
}

//! out = residual + gate[idx] · y with the shipped configuration for the runtime dtypes.
inline Status forward(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes,
                      cudaStream_t stream) {
  return detail::visit_dtypes(args.shape, [&](auto element, auto gate, auto index) {
    return DefaultForward<decltype(element), decltype(gate), decltype(index)>::run(args, workspace, workspace_bytes,
                                                                                   stream);
  });
}

//! Host checks of the default backward (no device work).
inline Status backward_can_implement(const BackwardArguments& args) {
  return detail::visit_dtypes(args.shape, [&](auto element, auto gate, auto index) {
    return DefaultBackward<decltype(element), decltype(gate), decltype(index)>::can_implement(args);
  });
}

//! Workspace bytes of the default backward (0 when the arguments cannot run: see backward_can_implement).
inline std::size_t backward_workspace_size(const BackwardArguments& args) {
  std::size_t bytes = 0;
  const Status status = detail::visit_dtypes(args.shape, [&](auto element, auto gate, auto index) {
    bytes = DefaultBackward<decltype(element), decltype(gate), decltype(index)>::workspace_size(args);
    return Status::success();
  });
  return status.ok() ? bytes : 0;
}

//! dy, dgate (and optionally a dresidual copy) with the shipped configuration for the runtime dtypes.
inline Status backward(const BackwardArguments& args, void* workspace, std::size_t workspace_bytes,
                       cudaStream_t stream) {
  return detail::visit_dtypes(args.shape, [&](auto element, auto gate, auto index) {
    return DefaultBackward<decltype(element), decltype(gate), decltype(index)>::run(args, workspace,
                                                                                    workspace_bytes, stream);
  });
}

}  // namespace gate_residual
}  // namespace hawk
