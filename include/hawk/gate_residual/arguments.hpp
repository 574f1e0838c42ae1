#pragma once
//! \file
//! What the gate-residual operators take: plain structs of device pointers and shapes (CUTLASS's `Arguments`).
//!
//! SPEC §2:  out[r] = residual[r] + gate[idx[r]] · y[r]          (one fp32 fma, one rounding)
//!           dres = dout,  dy[r] = dout[r] · gate[idx[r]],  dgate[g] = Σ_{r : idx[r] = g} dout[r] · y[r]
//!
//! Layout: residual, y, out, dout, dy, dres are [N, D] row-major and contiguous in the element type E (fp32,
//! fp16 or bf16); gate is [G, D] in fp32 or bf16; idx is [N] int32 or int64 with 0 <= idx[r] < G; dgate is
//! [G, D] in fp32, or rounded once to gate's type when asked. Every pointer is a device pointer.
//!
//! Aliasing: `out` may be `residual` (in place); no other output may overlap an input or another output.
//! `dres` is dout itself: the backward never needs to write it. Pass `dresidual` only if a separate buffer
//! must hold a copy.

#include <cstddef>
#include <cstdint>

#include "hawk/core/dtype.hpp"

namespace hawk {
namespace gate_residual {

//! How idx maps rows to gate rows: the caller says which, and the backward takes the matching path. All
//! three give the same dgate bits for the same data (see the reduction contract in backward.cuh).
enum class IndexLayout : int {
  kArbitrary,           //!< any idx, unsorted: rows are grouped by an integer-only stable radix sort first
  kUniform,             //!< idx[r] == r / rows_per_group (S rows per gate row, e.g. tokens of one frame)
  kContiguousSegments,  //!< the rows of each gate row form one contiguous run (runs in any order)
};

inline const char* to_string(IndexLayout layout) {
  switch (layout) {
    case IndexLayout::kArbitrary: return "arbitrary";
    case IndexLayout::kUniform: return "uniform";
    case IndexLayout::kContiguousSegments: return "contiguous_segments";
  }
  return "unknown layout";
}

//! The type dgate is written in. fp32 keeps the full accumulated precision; kGateType rounds the fp32 sum once.
enum class DgateType : int { kFloat32, kGateType };

//! Shapes and types shared by forward and backward.
struct ProblemShape {
  std::int64_t num_rows = 0;       //!< N
  std::int64_t dim = 0;            //!< D, any value >= 1 (D % 8 == 0 for 16-bit E, or D % 4 for fp32, is fastest)
  std::int64_t num_gate_rows = 0;  //!< G
  DType dtype = DType::kBFloat16;        //!< E: residual, y, out, dout, dy, dres
  DType gate_dtype = DType::kBFloat16;   //!< gate: fp32 or bf16
  IndexType index_type = IndexType::kInt64;
  //! idx lives on the device. With this set (the default), small kernels check 0 <= idx < G and the declared
  //! layout (`layout`, `rows_per_group`) on the device, and every kernel of the call that writes an output
  //! reads their verdict first and writes nothing when it is bad. No host synchronisation unless
  //! `wait_for_device_checks`; safe inside CUDA-graph capture (each replay checks the idx it finds).
  //! What the caller sees (core/device_checks.cuh):
  //! - `wait_for_device_checks` set, stream not capturing: run() returns the verdict as its Status;
  //! - otherwise run() returns success once the work is queued, and the verdict is the first word of the
  //!   workspace: hawk::read_device_checks(workspace, stream) returns it (until the workspace is reused), and
  //!   `device_check_report`, when given, has the bits OR-ed in.
  //! Off: the forward checks nothing (no workspace, nothing to read back) and skips every row whose idx is
  //! outside [0, G), leaving its out row untouched. The backward still builds its chunk table for
  //! kArbitrary / kContiguousSegments, which finds out-of-range idx and a false kContiguousSegments claim as a
  //! by-product: it then writes nothing and reports as above. kUniform is not checked at all: the backward never
  //! reads idx and computes the gradients of idx[r] = r / rows_per_group. Wrong answers, but no kernel reads or
  //! writes outside its buffers, whatever idx holds.
  bool validate_indices = true;
  //! run() synchronises once and returns the verdict of the device checks as its Status (the blocking mode,
  //! for tests and debugging), unless the stream is being captured. Applies to every call that carries a check
  //! word: every backward, and the forward when validate_indices.
  bool wait_for_device_checks = false;
  //! Optional caller-owned word (device memory or mapped pinned memory) into which the verdict's bits
  //! (hawk::DeviceCheckBit) are OR-ed on the stream; hawk never clears it. Same calls as above.
  unsigned int* device_check_report = nullptr;
};

struct ForwardArguments {
  ProblemShape shape;
  //! The layout the caller declares for idx, the same as the backward's. The forward computes the same bits
  //! under every layout; it checks the declaration (on the host, and on the device when validate_indices) so
  //! that a wrong one fails at the forward, not only at the backward. kContiguousSegments costs a 4·G-byte
  //! table in the workspace.
  IndexLayout layout = IndexLayout::kArbitrary;
  std::int64_t rows_per_group = 0;  //!< S for kUniform (ignored otherwise)
  const void* residual = nullptr;  //!< [N, D] E
  const void* y = nullptr;         //!< [N, D] E
  const void* gate = nullptr;      //!< [G, D] gate_dtype
  const void* idx = nullptr;       //!< [N] index_type
  void* out = nullptr;             //!< [N, D] E; may equal residual
};

struct BackwardArguments {
  ProblemShape shape;
  IndexLayout layout = IndexLayout::kArbitrary;  //!< kArbitrary is always correct; the others are faster
  std::int64_t rows_per_group = 0;               //!< S for kUniform (ignored otherwise)

  const void* dout = nullptr;  //!< [N, D] E
  const void* y = nullptr;     //!< [N, D] E (the forward's input)
  const void* gate = nullptr;  //!< [G, D] gate_dtype
  const void* idx = nullptr;   //!< [N] index_type

  void* dy = nullptr;                      //!< [N, D] E
  void* dgate = nullptr;                   //!< [G, D] fp32 or gate_dtype; fully overwritten, unused rows get 0
  DgateType dgate_type = DgateType::kFloat32;
  void* dresidual = nullptr;  //!< optional [N, D] E: receives a copy of dout when non-null and != dout
};

}  // namespace gate_residual
}  // namespace hawk
