#pragma once
//! \file
//! `Backward<Element, Gate, Index, Tile>`: the explicit backward operator (CUTLASS style).
//!
//!     using Op = hawk::gate_residual::Backward<__nv_bfloat16, __nv_bfloat16, std::int64_t>;
//!     HAWK_RETURN_IF_ERROR(Op::can_implement(args));
//!     const std::size_t bytes = Op::workspace_size(args);   // check word, chunk tables, fp32 partial sums
//!     HAWK_RETURN_IF_ERROR(Op::run(args, workspace, bytes, stream));
//!
//! Outputs: dy (E), dgate (fp32, or gate's type with DgateType::kGateType: the fp32 sum rounded once), and,
//! only if `dresidual` is given and differs from dout, a copy of dout (dres == dout, SPEC §2).
//!
//! dgate's summation order is fixed (operators/chunk_table.cuh): chunks of Tile::kChunkRows rows anchored at each
//! group's first row, summed in row order, chunk sums combined in chunk order. It depends on neither the
//! layout path, nor the batch around a group, nor the device: dgate is bitwise repeatable, identical for
//! kUniform / kContiguousSegments / kArbitrary descriptions of the same idx, and identical when the batch is
//! split into pieces that keep each group whole.
//!
//! What a caller sees:
//! - Anything decidable on the host (shapes, types, pointers, overlaps, the declared `layout` /
//!   `rows_per_group`, the workspace size): run() returns the Status before any device work.
//! - On the device, every call clears its check word, the first word of the workspace (core/device_checks.cuh).
//!   The checks raise bits in it; the kernels that write dy, dgate and the dresidual copy read it first and
//!   write nothing when a bit is set. run() does not synchronise: it returns success, and the verdict stays in
//!   the workspace for hawk::read_device_checks(workspace, stream) and, when given, shape.device_check_report.
//!   With shape.wait_for_device_checks (and the stream not capturing) run() synchronises once at its end and
//!   returns the verdict itself. In a CUDA graph every replay re-checks the idx it finds.
//! - What is checked: with shape.validate_indices, every idx in [0, G) and the declared layout (kUniform:
//!   idx[r] == r / rows_per_group; kContiguousSegments: one run per gate row). Without it, kArbitrary and
//!   kContiguousSegments are checked all the same, because building their chunk table finds out-of-range idx
//!   and a second run of a gate row as a by-product (operators/chunk_table.cuh): such a call writes nothing and reports
//!   like a validated one. kUniform without validation reads no idx at all: it computes the gradients of
//!   idx[r] = r / rows_per_group, whatever idx holds.
//! - No layout claim, true or false, validated or not, makes a kernel read or write outside its buffers: the
//!   chunk table is bounded by the sizes carved for it, whatever idx holds.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/element.cuh"
#include "hawk/core/status.hpp"
#include "hawk/core/workspace.hpp"
#include "hawk/gate_residual/arguments.hpp"
#include "hawk/gate_residual/block/vector_access.cuh"
#include "hawk/gate_residual/config.hpp"
#include "hawk/gate_residual/kernels/backward_kernel.cuh"
#include "hawk/gate_residual/kernels/dgate_reduce_kernel.cuh"
#include "hawk/gate_residual/kernels/index_checks_kernels.cuh"
#include "hawk/gate_residual/kernels/layout_detection_kernel.cuh"
#include "hawk/gate_residual/operators/checks.hpp"
#include "hawk/gate_residual/operators/chunk_table.cuh"

namespace hawk {
namespace gate_residual {

//! Where a kArbitrary backward keeps its layout detection in the workspace (every instantiation alike).
constexpr std::size_t kLayoutDetectionOffset = 64;
//! Byte offset, in a kArbitrary backward's workspace, of the detection's 32-bit verdict rows_per_group: S when
//! idx turned out uniform (idx[r] == r / S), 0 otherwise, once the call has run. A caller may copy it out after
//! the call, in stream order (the PyTorch binding does, to declare kUniform for later calls on the same idx
//! without a synchronisation).
constexpr std::size_t kDetectedRowsPerGroupOffset = kLayoutDetectionOffset +
                                                    offsetof(detail::LayoutDetection, verdict) +
                                                    offsetof(detail::UniformVerdict, rows_per_group);

template <class Element_, class Gate_, class Index_, class Tile_ = DefaultBackwardTile>
class Backward {
 public:
  using Element = Element_;
  using Gate = Gate_;
  using Index = Index_;
  using Tile = Tile_;
  static constexpr int kVec = ElementTraits<Element>::kVecSize;
  static constexpr int kChunkRows = Tile::kChunkRows;

  //! Host-only checks: shapes, types, layout description, null/misaligned/overlapping pointers.
  static Status can_implement(const BackwardArguments& args) {
    const ProblemShape& shape = args.shape;
    HAWK_RETURN_IF_ERROR((detail::check_problem<Element, Gate, Index>(args)));
    HAWK_REQUIRE(args.dgate_type == DgateType::kFloat32 || args.dgate_type == DgateType::kGateType,
                 StatusCode::kInvalidArgument, "gate_residual: unknown DgateType");
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.dout, sizeof(Element), "dout"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.y, sizeof(Element), "y"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.gate, sizeof(Gate), "gate"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.idx, sizeof(Index), "idx"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.dy, sizeof(Element), "dy"));
    HAWK_RETURN_IF_ERROR(detail::check_pointer(args.dgate, dgate_is_float(args) ? 4 : sizeof(Gate), "dgate"));
    if (args.dresidual != nullptr)
      HAWK_RETURN_IF_ERROR(detail::check_pointer(args.dresidual, sizeof(Element), "dresidual"));
    if (Tile::kRequireVectorAccess) {
      HAWK_RETURN_IF_ERROR(detail::check_vector_path_required(shape.dim, kVec, vector_aligned(args), "BackwardTile",
                                                              "dout, y, dy (and gate, dgate rows)"));
    }
    const std::size_t rows_bytes = static_cast<std::size_t>(shape.num_rows * shape.dim) * sizeof(Element);
    const std::size_t gate_elements = static_cast<std::size_t>(shape.num_gate_rows * shape.dim);
    const TensorBytes dout{args.dout, rows_bytes, "dout"};
    const TensorBytes y{args.y, rows_bytes, "y"};
    const TensorBytes gate{args.gate, gate_elements * sizeof(Gate), "gate"};
    const TensorBytes idx{args.idx, static_cast<std::size_t>(shape.num_rows) * sizeof(Index), "idx"};
    const TensorBytes dy{args.dy, rows_bytes, "dy"};
    const TensorBytes dgate{args.dgate, gate_elements * (dgate_is_float(args) ? 4 : sizeof(Gate)), "dgate"};
    const TensorBytes dresidual{args.dresidual == args.dout ? nullptr : args.dresidual, rows_bytes,
                                      "dresidual"};
    for (const TensorBytes& output : {dy, dgate, dresidual}) {
      for (const TensorBytes& input : {dout, y, gate, idx}) {
        HAWK_RETURN_IF_ERROR(check_no_overlap(output, input));
      }
    }
    HAWK_RETURN_IF_ERROR(check_no_overlap(dy, dgate));
    HAWK_RETURN_IF_ERROR(check_no_overlap(dresidual, dy));
    HAWK_RETURN_IF_ERROR(check_no_overlap(dresidual, dgate));
    const std::uint64_t vectors = static_cast<std::uint64_t>((shape.dim + kVec - 1) / kVec);
    HAWK_RETURN_IF_ERROR(detail::check_grid(static_cast<std::uint64_t>(shape.num_rows) * vectors, Tile::kThreads));
    HAWK_RETURN_IF_ERROR(detail::check_grid(static_cast<std::uint64_t>(gate_elements), detail::kReduceThreads));
    return Status::success();
  }

  //! Bytes of device workspace run() needs: the check word (kDeviceCheckBytes), the chunk table
  //! (kContiguousSegments, kArbitrary: about 40 bytes per row, plus CUB's sort/scan storage) and fp32 partial
  //! sums for groups of more than kChunkRows rows (at most 2·N/kChunkRows rows of D floats). Returns 0 if CUB's size query fails (run()
  //! then reports the error).
  static std::size_t workspace_size(const BackwardArguments& args) {
    if (!can_implement(args).ok()) return 0;
    WorkspaceCarver carver(nullptr);
    Buffers buffers;
    if (!carve(carver, args, buffers).ok()) return 0;
    return carver.bytes();
  }

  //! kArbitrary keeps its layout detection (detail::LayoutDetection) at this byte offset of the workspace, in
  //! the bytes reserved after the check word (kDeviceCheckBytes), so that one memset clears both. After a
  //! kArbitrary call, `verdict.rows_per_group` there says which path ran (S: uniform; 0: chunk table); the tests
  //! read it.
  static constexpr std::size_t kDetectionOffset = kLayoutDetectionOffset;
  static constexpr std::size_t kClearedBytes = kDetectionOffset + sizeof(detail::LayoutDetection);
  static_assert(kClearedBytes <= kDeviceCheckBytes, "the layout detection must fit the check word's reserved bytes");

  //! True when run() takes the 16-byte vector path for these arguments.
  static bool uses_vector_path(const BackwardArguments& args) {
    return args.shape.dim % kVec == 0 && vector_aligned(args);
  }

  //! Host checks, then the device checks and the guarded kernels. Returns the verdict of the device checks
  //! only with shape.wait_for_device_checks; see the file comment.
  static Status run(const BackwardArguments& args, void* workspace, std::size_t workspace_bytes,
                    cudaStream_t stream) {
    HAWK_RETURN_IF_ERROR(can_implement(args));
    const ProblemShape& shape = args.shape;
    std::size_t needed = 0;
    {
      WorkspaceCarver measure(nullptr);
      Buffers unused;
      HAWK_RETURN_IF_ERROR(carve(measure, args, unused));
      needed = measure.bytes();
    }
    HAWK_RETURN_IF_ERROR(check_workspace(workspace, workspace_bytes, needed, "gate_residual::Backward"));
    WorkspaceCarver carver(workspace);
    Buffers buffers;
    HAWK_RETURN_IF_ERROR(carve(carver, args, buffers));
    if (buffers.detection != nullptr) {
      // The check word and the layout detection in one memset (both must start at zero).
      HAWK_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(buffers.checks, 0, kClearedBytes, stream));
    } else {
      HAWK_RETURN_IF_ERROR(begin_device_checks(buffers.checks, stream));
    }
    HAWK_RETURN_IF_ERROR(launch_outputs(args, buffers, stream));
    return end_device_checks(buffers.checks, shape.wait_for_device_checks, shape.device_check_report, stream);
  }

 private:
  struct Buffers {
    unsigned* checks = nullptr;  //!< the check word, at offset 0
    detail::LayoutDetection* detection = nullptr;  //!< kArbitrary: inside the check word's reserved bytes
    detail::ChunkTableBuffers table;
    float* partials = nullptr;
  };

  //! kArbitrary's partial rows: either path may run (decided on the device), so the larger of the two.
  static std::int64_t arbitrary_partial_rows(const ProblemShape& shape) {
    return std::max(detail::detected_uniform_bounds(shape.num_rows, shape.num_gate_rows, kChunkRows).partial_rows,
                    detail::table_bounds(shape.num_rows, shape.num_gate_rows, kChunkRows).partial_rows);
  }

  static bool dgate_is_float(const BackwardArguments& args) {
    return args.dgate_type == DgateType::kFloat32 || ElementTraits<Gate>::kDType == DType::kFloat32;
  }

  static bool vector_aligned(const BackwardArguments& args) {
    const bool dgate_aligned = dgate_is_float(args)
                                   ? is_aligned(args.dgate, detail::Fragment<float, kVec>::kWordBytes)
                                   : is_aligned(args.dgate, detail::Fragment<Gate, kVec>::kWordBytes);
    return is_aligned(args.dout, 16) && is_aligned(args.y, 16) && is_aligned(args.dy, 16) &&
           is_aligned(args.gate, detail::Fragment<Gate, kVec>::kWordBytes) && dgate_aligned;
  }

  static Status carve(WorkspaceCarver& carver, const BackwardArguments& args, Buffers& buffers) {
    const ProblemShape& shape = args.shape;
    // The check word first, at offset 0, so that hawk::read_device_checks(workspace) finds it.
    unsigned char* reserved = carver.take<unsigned char>(kDeviceCheckBytes);
    buffers.checks = reinterpret_cast<unsigned*>(reserved);
    if (reserved != nullptr && args.layout == IndexLayout::kArbitrary)
      buffers.detection = reinterpret_cast<detail::LayoutDetection*>(reserved + kDetectionOffset);
    std::int64_t partial_rows = 0;
    if (args.layout == IndexLayout::kUniform) {
      partial_rows = detail::UniformChunks<kChunkRows>::make(shape.num_rows, args.rows_per_group).partial_rows();
    } else {
      HAWK_RETURN_IF_ERROR(detail::ChunkTableBuffers::carve(carver, args.layout, shape.num_rows, shape.num_gate_rows,
                                                            kChunkRows, buffers.table));
      partial_rows = args.layout == IndexLayout::kArbitrary
                         ? arbitrary_partial_rows(shape)
                         : detail::table_bounds(shape.num_rows, shape.num_gate_rows, kChunkRows).partial_rows;
    }
    buffers.partials = carver.take<float>(static_cast<std::size_t>(partial_rows * shape.dim));
    return Status::success();
  }

  //! The checks (validating kUniform), the chunk table (kArbitrary, kContiguousSegments: it checks idx as it
  //! goes), then the guarded kernels that write dy, dgate and the dresidual copy.
  static Status launch_outputs(const BackwardArguments& args, const Buffers& buffers, cudaStream_t stream) {
    const ProblemShape& shape = args.shape;
    const Index* idx = static_cast<const Index*>(args.idx);
    if (args.layout == IndexLayout::kUniform) {
      if (shape.validate_indices) {
        detail::check_uniform_layout_kernel<Index>
            <<<device_check_blocks(shape.num_rows), kDeviceCheckThreads, 0, stream>>>(
                idx, shape.num_rows, shape.num_gate_rows, args.rows_per_group, buffers.checks);
        HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::check_uniform_layout_kernel"));
      }
      HAWK_RETURN_IF_ERROR(copy_dresidual(args, buffers.checks, stream));
      const auto chunks = detail::UniformChunks<kChunkRows>::make(shape.num_rows, args.rows_per_group);
      HAWK_RETURN_IF_ERROR(launch_rows(args, buffers, chunks, chunks.chunk_ids(), stream));
      // Groups of one chunk are final already; only the multi-chunk groups and the unused tail remain.
      const std::int64_t begin = chunks.chunks_per_group > 1 ? 0 : chunks.used_groups;
      return launch_reduce(args, buffers, chunks, begin, stream);
    }

    if (args.layout == IndexLayout::kArbitrary) return launch_arbitrary(args, buffers, stream);

    detail::TableChunks table{};
    HAWK_RETURN_IF_ERROR((detail::build_chunk_table<Index, kChunkRows>(
        idx, shape.num_rows, shape.num_gate_rows, args.layout, buffers.table, buffers.checks, stream, table)));
    HAWK_RETURN_IF_ERROR(copy_dresidual(args, buffers.checks, stream));
    HAWK_RETURN_IF_ERROR(launch_rows(args, buffers, table, table.chunk_bound, stream));
    return launch_reduce(args, buffers, table, 0, stream);
  }

  //! kArbitrary, decided on the device without a host synchronisation (kernels/layout_detection_kernel.cuh): a
  //! pass over idx finds whether idx[r] == r / S for some S. Then the uniform path's kernels run with that S and
  //! the chunk table's consumers return at once; otherwise the reverse. Both paths give the same bits (the
  //! reduction contract), so this is kArbitrary's old result. The table is still built, and CUB's sort and scan
  //! still run, whatever the verdict: their launches cannot wait for a device-side decision. What a uniform idx
  //! pays for that is kept small: the detection writes the sort's input as it reads idx, the table's row kernel
  //! returns from a bounded grid, and the reductions skip the groups that are final already
  //! (bench/probes/gate_residual_default_call_probe.cu measures what remains).
  static Status launch_arbitrary(const BackwardArguments& args, const Buffers& buffers, cudaStream_t stream) {
    const ProblemShape& shape = args.shape;
    const Index* idx = static_cast<const Index*>(args.idx);
    const detail::DetectedUniformBounds bounds =
        detail::detected_uniform_bounds(shape.num_rows, shape.num_gate_rows, kChunkRows);
    detail::detect_uniform_layout_kernel<Index, kChunkRows>
        <<<device_check_blocks(shape.num_rows), kDeviceCheckThreads, 0, stream>>>(
            idx, shape.num_rows, shape.num_gate_rows, bounds.chunk_ids, arbitrary_partial_rows(shape),
            buffers.detection, buffers.table.keys, buffers.table.rows, buffers.checks);
    HAWK_RETURN_IF_ERROR(last_launch_status("gate_residual::detect_uniform_layout_kernel"));
    HAWK_RETURN_IF_ERROR(copy_dresidual(args, buffers.checks, stream));

    // The uniform path (active when the verdict holds an S).
    const detail::DetectedUniformChunks<kChunkRows> uniform{&buffers.detection->verdict, shape.num_rows};
    HAWK_RETURN_IF_ERROR(launch_rows(args, buffers, uniform, bounds.chunk_ids, stream));
    HAWK_RETURN_IF_ERROR(launch_reduce_groups(args, buffers, uniform, stream));

    // The chunk table (active when the verdict is 0).
    detail::TableChunks table{};
    HAWK_RETURN_IF_ERROR((detail::build_chunk_table<Index, kChunkRows>(idx, shape.num_rows, shape.num_gate_rows,
                                                                       args.layout, buffers.table, buffers.checks,
                                                                       stream, table, /*keys_written=*/true)));
    table.skip_if_uniform = &buffers.detection->verdict;
    HAWK_RETURN_IF_ERROR(launch_rows(args, buffers, table, table.chunk_bound, stream, kDecidedRowsMaxBlocks));
    return launch_reduce_groups(args, buffers, table, stream);
  }

  //! dgate_reduce_groups_kernel over every group: what a device-decided map needs (its single-chunk groups and
  //! an inactive map cost nearly nothing there).
  template <class GroupMap>
  static Status launch_reduce_groups(const BackwardArguments& args, const Buffers& buffers, const GroupMap& groups,
                                     cudaStream_t stream) {
    const ProblemShape& shape = args.shape;
    const detail::DgateReduceParams params{buffers.partials, args.dgate, dgate_is_float(args), buffers.checks,
                                           shape.dim,        0,          0};
    const std::int64_t wanted = shape.num_gate_rows;
    const unsigned blocks = static_cast<unsigned>(
        wanted < static_cast<std::int64_t>(detail::kReduceGroupsMaxBlocks) ? wanted : detail::kReduceGroupsMaxBlocks);
    detail::dgate_reduce_groups_kernel<Gate, GroupMap>
        <<<blocks, detail::kReduceThreads, 0, stream>>>(params, groups, shape.num_gate_rows);
    return last_launch_status("gate_residual::dgate_reduce_groups_kernel");
  }

  //! dresidual = dout, when asked for a separate copy, by a kernel guarded like the others.
  static Status copy_dresidual(const BackwardArguments& args, const unsigned* checks, cudaStream_t stream) {
    if (args.dresidual == nullptr || args.dresidual == args.dout) return Status::success();
    const std::size_t bytes = static_cast<std::size_t>(args.shape.num_rows * args.shape.dim) * sizeof(Element);
    std::size_t word = 16;
    while (word > sizeof(Element) &&
           !(bytes % word == 0 && is_aligned(args.dout, word) && is_aligned(args.dresidual, word))) {
      word /= 2;
    }
    switch (word) {
      case 16: return launch_copy<int4>(args.dout, args.dresidual, bytes, checks, stream);
      case 8: return launch_copy<int2>(args.dout, args.dresidual, bytes, checks, stream);
      case 4: return launch_copy<int>(args.dout, args.dresidual, bytes, checks, stream);
      default: return launch_copy<short>(args.dout, args.dresidual, bytes, checks, stream);
    }
  }

  template <class Word>
  static Status launch_copy(const void* source, void* target, std::size_t bytes, const unsigned* checks,
                            cudaStream_t stream) {
    const std::uint64_t words = bytes / sizeof(Word);
    const std::uint64_t needed = (words + detail::kCopyThreads - 1) / detail::kCopyThreads;
    const unsigned blocks = static_cast<unsigned>(needed < detail::kCopyMaxBlocks ? needed : detail::kCopyMaxBlocks);
    detail::copy_dresidual_kernel<Word><<<blocks, detail::kCopyThreads, 0, stream>>>(
        static_cast<const Word*>(source), static_cast<Word*>(target), words, checks);
    return last_launch_status("gate_residual::copy_dresidual_kernel");
  }

  //! The grid of the chunk table's row kernel in a kArbitrary call: a bounded grid that strides over the tasks,
  //! so that its early return (the usual case: idx turned out uniform) costs a few thousand CTAs, not one per
  //! 128 tasks (35,000 CTAs, 25 µs, at N = 32768, D = 3072); two waves of the H200's 132 SMs when it does run.
  static constexpr unsigned kDecidedRowsMaxBlocks = 4096;

  //! `max_blocks` (0: none) bounds the grid; the kernel strides over the tasks beyond it.
  template <class ChunkMap>
  static Status launch_rows(const BackwardArguments& args, const Buffers& buffers, const ChunkMap& chunks,
                            std::int64_t chunk_ids, cudaStream_t stream, unsigned max_blocks = 0) {
    const ProblemShape& shape = args.shape;
    const std::uint32_t vectors = static_cast<std::uint32_t>((shape.dim + kVec - 1) / kVec);
    detail::BackwardParams<Element, Gate> params{static_cast<const Element*>(args.dout),
                                                 static_cast<const Element*>(args.y),
                                                 static_cast<const Gate*>(args.gate),
                                                 static_cast<Element*>(args.dy),
                                                 args.dgate,
                                                 dgate_is_float(args),
                                                 buffers.partials,
                                                 buffers.checks,
                                                 shape.dim,
                                                 vectors,
                                                 static_cast<std::uint64_t>(chunk_ids) * vectors};
    if (params.total_tasks == 0) return Status::success();
    const std::uint64_t needed = (params.total_tasks + Tile::kThreads - 1) / Tile::kThreads;
    const unsigned blocks = static_cast<unsigned>(max_blocks != 0 && needed > max_blocks ? max_blocks : needed);
    if (uses_vector_path(args)) {
      detail::backward_rows_kernel<Element, Gate, Tile, ChunkMap, true>
          <<<blocks, Tile::kThreads, 0, stream>>>(params, chunks);
    } else {
      detail::backward_rows_kernel<Element, Gate, Tile, ChunkMap, false>
          <<<blocks, Tile::kThreads, 0, stream>>>(params, chunks);
    }
    return last_launch_status("gate_residual::backward_rows_kernel");
  }

  template <class GroupMap>
  static Status launch_reduce(const BackwardArguments& args, const Buffers& buffers, const GroupMap& groups,
                              std::int64_t group_begin, cudaStream_t stream) {
    const ProblemShape& shape = args.shape;
    const std::uint64_t total = static_cast<std::uint64_t>((shape.num_gate_rows - group_begin) * shape.dim);
    if (total == 0) return Status::success();
    const detail::DgateReduceParams params{buffers.partials, args.dgate,  dgate_is_float(args), buffers.checks,
                                           shape.dim,        group_begin, total};
    const unsigned blocks = static_cast<unsigned>((total + detail::kReduceThreads - 1) / detail::kReduceThreads);
    detail::dgate_reduce_kernel<Gate, GroupMap><<<blocks, detail::kReduceThreads, 0, stream>>>(params, groups);
    return last_launch_status("gate_residual::dgate_reduce_kernel");
  }
};

}  // namespace gate_residual
}  // namespace hawk
