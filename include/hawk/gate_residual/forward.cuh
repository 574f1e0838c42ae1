#pragma once
//! \file
//! `Forward<Element, Gate, Index, Tile>`: the explicit forward operator (CUTLASS style).
//!
//!     using Op = hawk::gate_residual::Forward<__nv_bfloat16, __nv_bfloat16, std::int64_t>;
//!     HAWK_RETURN_IF_ERROR(Op::can_implement(args));          // host checks only, no device work
//!     const std::size_t bytes = Op::workspace_size(args);     // 0, or 256 when validating idx
//!     HAWK_RETURN_IF_ERROR(Op::run(args, workspace, bytes, stream));
//!
//! run() checks everything can_implement does, then (when shape.validate_indices) checks idx on the device
//! and synchronises once to read the verdict, and only then writes `out`. Bad input: a Status, nothing written.
//! The 16-byte vector path is taken when D % kVec == 0 and the pointers are 16-byte aligned (kVec = 8 for
//! bf16/fp16, 4 for fp32); otherwise an element-wise path computes the same bits (unless the tile requires the
//! vector path, in which case can_implement says so).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/element.cuh"
#include "hawk/core/status.hpp"
#include "hawk/gate_residual/argument_checks.hpp"
#include "hawk/gate_residual/arguments.hpp"
#include "hawk/gate_residual/forward_kernel.cuh"
#include "hawk/gate_residual/index_validation.cuh"
#include "hawk/gate_residual/policy.cuh"
#include "hawk/gate_residual/vector_access.cuh"
#include "hawk/gate_residual/workspace.hpp"

namespace hawk {
namespace gate_residual {

template <class Element_, class Gate_, class Index_, class Tile_ = DefaultForwardTile>
class Forward {
 public:
  using Element = Element_;
  using Gate = Gate_;
  using Index = Index_;
  using Tile = Tile_;
  static constexpr int kVec = ElementTraits<Element>::kVecSize;

  //! Host-only checks: shapes, types, null/misaligned/overlapping pointers. No device work.
  static Status can_implement(const ForwardArguments& args) {
    const ProblemShape& shape = args.shape;
    HAWK_RETURN_IF_ERROR(detail::check_shape(shape, ElementTraits<Element>::kDType, ElementTraits<Gate>::kDType,
                                             detail::index_type_of<Index>()));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.residual, sizeof(Element), "residual"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.y, sizeof(Element), "y"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.gate, sizeof(Gate), "gate"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.idx, sizeof(Index), "idx"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.out, sizeof(Element), "out"));
    if (Tile::kRequireVectorAccess) {
      HAWK_REQUIRE(shape.dim % kVec == 0, StatusCode::kUnsupportedConfiguration,
                   "gate_residual: this ForwardTile requires the 16-byte path, which needs D % " +
                       std::to_string(kVec) + " == 0");
      HAWK_REQUIRE(vector_aligned(args), StatusCode::kMisalignedPointer,
                   "gate_residual: this ForwardTile requires 16-byte aligned residual, y, out (and gate rows)");
    }
    const std::size_t rows_bytes = static_cast<std::size_t>(shape.num_rows * shape.dim) * sizeof(Element);
    const detail::ByteRange out{args.out, rows_bytes, "out"};
    HAWK_RETURN_IF_ERROR(detail::check_no_overlap(out, {args.residual, rows_bytes, "residual"}, true));
    HAWK_RETURN_IF_ERROR(detail::check_no_overlap(out, {args.y, rows_bytes, "y"}));
    HAWK_RETURN_IF_ERROR(detail::check_no_overlap(
        out, {args.gate, static_cast<std::size_t>(shape.num_gate_rows * shape.dim) * sizeof(Gate), "gate"}));
    HAWK_RETURN_IF_ERROR(
        detail::check_no_overlap(out, {args.idx, static_cast<std::size_t>(shape.num_rows) * sizeof(Index), "idx"}));
    HAWK_RETURN_IF_ERROR(detail::check_grid(total_vectors(shape), Tile::kThreads * Tile::kVectorsPerThread));
    return Status::success();
  }

  //! Bytes of device workspace run() needs: a flag word when idx is validated, else nothing.
  static std::size_t workspace_size(const ForwardArguments& args) {
    detail::WorkspaceCarver carver(nullptr);
    carve(carver, args);
    return carver.bytes();
  }

  //! True when run() takes the 16-byte vector path for these arguments.
  static bool uses_vector_path(const ForwardArguments& args) {
    return args.shape.dim % kVec == 0 && vector_aligned(args);
  }

  static Status run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes,
                    cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    const std::size_t needed = workspace_size(args);
    HAWK_REQUIRE(workspace_bytes >= needed && (needed == 0 || workspace != nullptr), StatusCode::kWorkspaceTooSmall,
                 "gate_residual: forward needs " + std::to_string(needed) + " bytes of workspace");
    const ProblemShape& shape = args.shape;
    detail::WorkspaceCarver carver(workspace);
    unsigned* flag = carve(carver, args);
    const Index* idx = static_cast<const Index*>(args.idx);
    if (shape.validate_indices) {
      HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(flag, 0, sizeof(unsigned), stream));
      detail::check_index_range_kernel<Index>
          <<<detail::validation_blocks(shape.num_rows), detail::kValidationThreads, 0, stream>>>(
              idx, shape.num_rows, shape.num_gate_rows, flag);
      HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::check_index_range_kernel"));
      HAWK_RETURN_IF_ERROR(detail::read_validation_flag(flag, stream));
    }
    detail::ForwardParams<Element, Gate, Index> params{static_cast<const Element*>(args.residual),
                                                       static_cast<const Element*>(args.y),
                                                       static_cast<const Gate*>(args.gate),
                                                       idx,
                                                       static_cast<Element*>(args.out),
                                                       shape.dim,
                                                       vectors_per_row(shape),
                                                       total_vectors(shape)};
    constexpr std::uint64_t kPerBlock = Tile::kThreads * Tile::kVectorsPerThread;
    const unsigned blocks = static_cast<unsigned>((params.total_vectors + kPerBlock - 1) / kPerBlock);
    if (uses_vector_path(args)) {
      detail::forward_kernel<Element, Gate, Index, Tile, true><<<blocks, Tile::kThreads, 0, stream>>>(params);
    } else {
      detail::forward_kernel<Element, Gate, Index, Tile, false><<<blocks, Tile::kThreads, 0, stream>>>(params);
    }
    return last_launch_status("gate_residual::forward_kernel");
  }

 private:
  static unsigned* carve(detail::WorkspaceCarver& carver, const ForwardArguments& args) {
    return args.shape.validate_indices ? carver.take<unsigned>(1) : nullptr;
  }
  static std::uint32_t vectors_per_row(const ProblemShape& shape) {
    return static_cast<std::uint32_t>((shape.dim + kVec - 1) / kVec);
  }
  static std::uint64_t total_vectors(const ProblemShape& shape) {
    return static_cast<std::uint64_t>(shape.num_rows) * vectors_per_row(shape);
  }
  static bool vector_aligned(const ForwardArguments& args) {
    return is_aligned(args.residual, 16) && is_aligned(args.y, 16) && is_aligned(args.out, 16) &&
           is_aligned(args.gate, detail::Fragment<Gate, kVec>::kWordBytes);
  }
};

}  // namespace gate_residual
}  // namespace hawk
