#pragma once
//! \file
//! Host-side checks shared by the operators' can_implement: everything that can be decided without touching
//! the device (null and misaligned pointers, shapes, types, overlapping buffers).

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "hawk/core/dtype.hpp"
#include "hawk/core/element.cuh"
#include "hawk/core/status.hpp"
#include "hawk/core/tensor_bytes.hpp"
#include "hawk/gate_residual/arguments.hpp"

namespace hawk {
namespace gate_residual {
namespace detail {

inline Status check_pointer(const void* pointer, std::size_t alignment, const char* name) {
  if (pointer == nullptr) return Status(StatusCode::kNullPointer, std::string("gate_residual: ") + name + " is null");
  if (!is_aligned(pointer, alignment))
    return Status(StatusCode::kMisalignedPointer, std::string("gate_residual: ") + name + " is not aligned to " +
                                                      std::to_string(alignment) + " bytes");
  return Status::success();
}

//! The runtime name of an index type.
template <class Index>
constexpr IndexType index_type_of() {
  static_assert(std::is_same<Index, std::int32_t>::value || std::is_same<Index, std::int64_t>::value,
                "gate_residual: idx must be int32_t or int64_t");
  return sizeof(Index) == 4 ? IndexType::kInt32 : IndexType::kInt64;
}

//! A grid of `tasks` / `per_block` blocks must fit the launch limit.
inline Status check_grid(std::uint64_t tasks, std::uint64_t per_block) {
  HAWK_REQUIRE((tasks + per_block - 1) / per_block < (std::uint64_t{1} << 31), StatusCode::kInvalidArgument,
               "gate_residual: problem too large for one launch");
  return Status::success();
}

//! The shape checks every operator shares, and that the runtime types name the template's types.
inline Status check_shape(const ProblemShape& shape, DType element, DType gate, IndexType index) {
  HAWK_REQUIRE(shape.num_rows >= 1, StatusCode::kInvalidArgument, "gate_residual: num_rows (N) must be >= 1");
  HAWK_REQUIRE(shape.dim >= 1, StatusCode::kInvalidArgument, "gate_residual: dim (D) must be >= 1");
  HAWK_REQUIRE(shape.num_gate_rows >= 1, StatusCode::kInvalidArgument,
               "gate_residual: num_gate_rows (G) must be >= 1");
  // Row numbers, group keys and chunk tables are 32-bit; element offsets are 64-bit.
  HAWK_REQUIRE(shape.num_rows < (std::int64_t{1} << 31) - 1, StatusCode::kInvalidArgument,
               "gate_residual: num_rows must be < 2^31 - 1");
  HAWK_REQUIRE(shape.num_gate_rows < (std::int64_t{1} << 31), StatusCode::kInvalidArgument,
               "gate_residual: num_gate_rows must be < 2^31");
  HAWK_REQUIRE(shape.dim < (std::int64_t{1} << 31), StatusCode::kInvalidArgument, "gate_residual: dim must be < 2^31");
  HAWK_REQUIRE(shape.dtype == element, StatusCode::kUnsupportedConfiguration,
               std::string("gate_residual: dtype is ") + to_string(shape.dtype) +
                   " but the operator was instantiated for " + to_string(element));
  HAWK_REQUIRE(shape.gate_dtype == gate, StatusCode::kUnsupportedConfiguration,
               std::string("gate_residual: gate_dtype is ") + to_string(shape.gate_dtype) +
                   " but the operator was instantiated for " + to_string(gate));
  HAWK_REQUIRE(shape.index_type == index, StatusCode::kUnsupportedConfiguration,
               "gate_residual: index_type differs from the operator's index type");
  HAWK_REQUIRE(is_aligned(shape.device_check_report, 4), StatusCode::kMisalignedPointer,
               "gate_residual: device_check_report must be 4-byte aligned (an unsigned int)");
  return Status::success();
}

//! The declared index layout (`layout`, `rows_per_group`), shared by forward and backward so that both refuse
//! the same declarations with the same words. What idx really holds is checked on the device.
inline Status check_layout(const ProblemShape& shape, IndexLayout layout, std::int64_t rows_per_group) {
  HAWK_REQUIRE(layout == IndexLayout::kArbitrary || layout == IndexLayout::kUniform ||
                   layout == IndexLayout::kContiguousSegments,
               StatusCode::kInvalidArgument,
               "gate_residual: layout " + std::to_string(static_cast<int>(layout)) +
                   " is not an IndexLayout (kArbitrary, kUniform or kContiguousSegments)");
  if (layout != IndexLayout::kUniform) return Status::success();
  HAWK_REQUIRE(rows_per_group >= 1, StatusCode::kInvalidArgument,
               "gate_residual: layout kUniform needs rows_per_group >= 1 (idx[r] == r / rows_per_group), got " +
                   std::to_string(rows_per_group));
  const std::int64_t groups = shape.num_rows / rows_per_group + (shape.num_rows % rows_per_group != 0 ? 1 : 0);
  HAWK_REQUIRE(groups <= shape.num_gate_rows, StatusCode::kInvalidArgument,
               "gate_residual: layout kUniform with rows_per_group = " + std::to_string(rows_per_group) +
                   " names ceil(num_rows / rows_per_group) = " + std::to_string(groups) +
                   " gate rows, more than num_gate_rows = " + std::to_string(shape.num_gate_rows));
  return Status::success();
}

//! What Forward and Backward check first: the shape against the operator's Element, Gate and Index types
//! (check_shape), then the declared layout (check_layout). `Arguments`: ForwardArguments or BackwardArguments.
template <class Element, class Gate, class Index, class Arguments>
inline Status check_problem(const Arguments& args) {
  HAWK_RETURN_IF_ERROR(check_shape(args.shape, ElementTraits<Element>::kDType, ElementTraits<Gate>::kDType,
                                   index_type_of<Index>()));
  return check_layout(args.shape, args.layout, args.rows_per_group);
}

//! A tile that requires the 16-byte vector path (Tile::kRequireVectorAccess) gets it: D a multiple of the
//! vector width `vec`, and the row tensors aligned (`aligned`; `tensors` lists them for the message).
//! `tile` names the tile type: "ForwardTile" or "BackwardTile".
inline Status check_vector_path_required(std::int64_t dim, int vec, bool aligned, const char* tile,
                                         const char* tensors) {
  HAWK_REQUIRE(dim % vec == 0, StatusCode::kUnsupportedConfiguration,
               std::string("gate_residual: this ") + tile + " requires the 16-byte path, which needs D % " +
                   std::to_string(vec) + " == 0");
  HAWK_REQUIRE(aligned, StatusCode::kMisalignedPointer,
               std::string("gate_residual: this ") + tile + " requires 16-byte aligned " + tensors);
  return Status::success();
}

}  // namespace detail
}  // namespace gate_residual
}  // namespace hawk
