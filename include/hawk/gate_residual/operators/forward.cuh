#pragma once
//! \file
//! `Forward<Element, Gate, Index, Tile>`: the explicit forward operator (CUTLASS style).
//!
//!     using Op = hawk::gate_residual::Forward<__nv_bfloat16, __nv_bfloat16, std::int64_t>;
//!     HAWK_RETURN_IF_ERROR(Op::can_implement(args));          // host checks only, no device work
//!     const std::size_t bytes = Op::workspace_size(args);     // 0 unless validating idx
//!     HAWK_RETURN_IF_ERROR(Op::run(args, workspace, bytes, stream));
//!
//! What a caller sees:
//! - Anything decidable on the host (shapes, types, null, misaligned or overlapping pointers, the declared
//!   `layout` / `rows_per_group`, the workspace size): run() returns the Status before any device work.
//! - With shape.validate_indices (the default): the workspace starts with the call's check word
//!   (core/device_checks.cuh). A check kernel looks at idx (range; plus idx[r] == r / rows_per_group for
//!   kUniform, one run per gate row for kContiguousSegments), then the forward kernel reads the word and writes
//!   nothing if a check failed. run() does not synchronise: it returns success and the verdict stays in the
//!   workspace for hawk::read_device_checks(workspace, stream) and, when given, shape.device_check_report.
//!   With shape.wait_for_device_checks (and the stream not capturing) run() synchronises once at its end and
//!   returns the verdict itself. Inside CUDA-graph capture every replay re-checks the idx it finds.
//! - Without validation: no workspace, no check, no verdict; a row whose idx is outside [0, G) is skipped
//!   (its out row keeps what it held), every other row is computed. The declared layout is not checked on the
//!   device then, and changes nothing: the forward reads idx row by row under every layout.
//!
//! The 16-byte vector path is taken when D % kVec == 0 and the pointers are 16-byte aligned (kVec = 8 for
//! bf16/fp16, 4 for fp32); otherwise an element-wise path computes the same bits (unless the tile requires the
//! vector path, in which case can_implement says so).

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/gate_residual/arguments.hpp"
#include "hawk/gate_residual/block/vector_access.cuh"
#include "hawk/gate_residual/config.hpp"
#include "hawk/gate_residual/kernels/forward_kernel.cuh"
#include "hawk/gate_residual/kernels/index_checks_kernels.cuh"
#include "hawk/gate_residual/operators/checks.hpp"

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

  //! Host-only checks: shapes, types, the declared layout, null/misaligned/overlapping pointers. No device work.
  static Status can_implement(const ForwardArguments& args) {
    const ProblemShape& shape = args.shape;
    HAWK_RETURN_IF_ERROR((detail::check_problem<Element, Gate, Index>(args)));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.residual, sizeof(Element), "residual"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.y, sizeof(Element), "y"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.gate, sizeof(Gate), "gate"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.idx, sizeof(Index), "idx"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.out, sizeof(Element), "out"));
    if (Tile::kRequireVectorAccess) {
      HAWK_RETURN_IF_ERROR(detail::check_vector_path_required(shape.dim, kVec, vector_aligned(args), "ForwardTile",
                                                              "residual, y, out (and gate rows)"));
    }
    const std::size_t rows_bytes = static_cast<std::size_t>(shape.num_rows * shape.dim) * sizeof(Element);
    const TensorBytes out{args.out, rows_bytes, "out"};
    // In place (out == residual exactly) is the documented pair.
    if (args.out != args.residual) HAWK_RETURN_IF_ERROR(check_no_overlap(out, {args.residual, rows_bytes, "residual"}));
    HAWK_RETURN_IF_ERROR(check_no_overlap(out, {args.y, rows_bytes, "y"}));
    HAWK_RETURN_IF_ERROR(check_no_overlap(
        out, {args.gate, static_cast<std::size_t>(shape.num_gate_rows * shape.dim) * sizeof(Gate), "gate"}));
    HAWK_RETURN_IF_ERROR(
        check_no_overlap(out, {args.idx, static_cast<std::size_t>(shape.num_rows) * sizeof(Index), "idx"}));
    HAWK_RETURN_IF_ERROR(detail::check_grid(total_vectors(shape), Tile::kThreads * Tile::kVectorsPerThread));
    return Status::success();
  }

  //! Bytes of device workspace run() needs: when idx is validated, the check word (kDeviceCheckBytes) and, for
  //! kContiguousSegments, a G-entry table of run starts; else nothing.
  static std::size_t workspace_size(const ForwardArguments& args) {
    WorkspaceCarver carver(nullptr);
    carve(carver, args);
    return carver.bytes();
  }

  //! True when run() takes the 16-byte vector path for these arguments.
  static bool uses_vector_path(const ForwardArguments& args) {
    return args.shape.dim % kVec == 0 && vector_aligned(args);
  }

  //! Host checks, then (when validating) the device check of idx, then the guarded forward kernel. Returns
  //! the verdict of the device check only with shape.wait_for_device_checks; see the file comment.
  static Status run(const ForwardArguments& args, void* workspace, std::size_t workspace_bytes,
                    cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    const std::size_t needed = workspace_size(args);
    HAWK_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, needed, "gate_residual::Forward"));
    const ProblemShape& shape = args.shape;
    WorkspaceCarver carver(workspace);
    const Buffers buffers = carve(carver, args);
    const Index* idx = static_cast<const Index*>(args.idx);
    if (shape.validate_indices) HAWK_RETURN_IF_ERROR(launch_checks(args, buffers, stream));
    detail::ForwardParams<Element, Gate, Index> params{static_cast<const Element*>(args.residual),
                                                       static_cast<const Element*>(args.y),
                                                       static_cast<const Gate*>(args.gate),
                                                       idx,
                                                       static_cast<Element*>(args.out),
                                                       buffers.checks,
                                                       shape.num_gate_rows,
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
    HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::forward_kernel"));
    return end_device_checks(buffers.checks, shape.wait_for_device_checks, shape.device_check_report, stream);
  }

 private:
  struct Buffers {
    unsigned* checks = nullptr;         //!< the check word, at offset 0 (null without validation)
    std::int32_t* run_start = nullptr;  //!< [G] kContiguousSegments: first row of each gate row's run
  };

  //! The check word first, at offset 0, so that hawk::read_device_checks(workspace) finds it.
  static Buffers carve(WorkspaceCarver& carver, const ForwardArguments& args) {
    Buffers buffers;
    if (!args.shape.validate_indices) return buffers;
    buffers.checks = reinterpret_cast<unsigned*>(carver.take<unsigned char>(kDeviceCheckBytes));
    if (args.layout == IndexLayout::kContiguousSegments && args.shape.num_gate_rows > 0)
      buffers.run_start = carver.take<std::int32_t>(static_cast<std::size_t>(args.shape.num_gate_rows));
    return buffers;
  }

  //! Clears the check word and queues the check of idx for the declared layout (core/device_checks.cuh).
  static Status launch_checks(const ForwardArguments& args, const Buffers& buffers, cudaStream_t stream) {
    const ProblemShape& shape = args.shape;
    const Index* idx = static_cast<const Index*>(args.idx);
    const unsigned blocks = device_check_blocks(shape.num_rows);
    HAWK_RETURN_IF_ERROR(begin_device_checks(buffers.checks, stream));
    switch (args.layout) {
      case IndexLayout::kUniform:
        detail::check_uniform_layout_kernel<Index><<<blocks, kDeviceCheckThreads, 0, stream>>>(
            idx, shape.num_rows, shape.num_gate_rows, args.rows_per_group, buffers.checks);
        return last_launch_status("gate_residual::check_uniform_layout_kernel");
      case IndexLayout::kContiguousSegments:
        HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(
            buffers.run_start, 0xFF, static_cast<std::size_t>(shape.num_gate_rows) * sizeof(std::int32_t), stream));
        detail::check_contiguous_segments_kernel<Index><<<blocks, kDeviceCheckThreads, 0, stream>>>(
            idx, shape.num_rows, shape.num_gate_rows, buffers.run_start, buffers.checks);
        return last_launch_status("gate_residual::check_contiguous_segments_kernel");
      case IndexLayout::kArbitrary:
        break;
    }
    detail::check_index_range_kernel<Index><<<blocks, kDeviceCheckThreads, 0, stream>>>(
        idx, shape.num_rows, shape.num_gate_rows, buffers.checks);
    return last_launch_status("gate_residual::check_index_range_kernel");
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
