//! \file
//! Host-side argument fuzzing of the gate-residual entry points (fuzz.hpp says what is checked):
//! Forward<Element, Gate, Index, Tile> and Backward<...> for a few type combinations and tiles (one that
//! requires the 16-byte path), and the default dispatch (forward_can_implement / forward_workspace_size /
//! forward, backward_can_implement / backward_workspace_size / backward).

#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "fuzz.hpp"
#include "hawk/core/element.cuh"
#include "hawk/gate_residual/dispatch.cuh"

namespace {

using namespace hawk_fuzz;
namespace gr = hawk::gate_residual;
using hawk::DType;
using hawk::IndexType;
using hawk::Status;
using hawk::StatusCode;

void* fake_workspace() { return reinterpret_cast<void*>(std::uintptr_t{1} << 45); }
bool host_refused(const Status& s) { return !s.ok() && s.code() != StatusCode::kCudaError; }

//! The verdict of an operator call: can_implement's; where it refuses, run() must refuse the same way (and
//! returns before any device work); where it passes and no device is present, run() itself (it checks the
//! workspace on the host, then fails at the first CUDA call). The workspace is the context's when a corruption
//! spoiled it, else exactly workspace_size(args) bytes.
template <class Ctx, class CanImplement, class WorkspaceSize, class Run>
Status verdict(const Ctx& c, Findings& f, const char* op, CanImplement can_implement, WorkspaceSize workspace_size,
               Run run) {
  const Status s = can_implement(c.a);
  if (s.code() == StatusCode::kCudaError) f.add(std::string(op) + "::can_implement returned a CUDA error: it makes no CUDA call");
  void* workspace = c.workspace_spoiled ? c.workspace : fake_workspace();
  const std::size_t bytes = c.workspace_spoiled ? c.workspace_bytes : workspace_size(c.a);
  if (host_refused(s)) {
    f.expect_same_code((std::string(op) + "::run").c_str(), s, run(c.a, workspace, bytes, nullptr));
    return s;
  }
  if (!launches_allowed()) return s;
  return run(c.a, workspace, bytes, nullptr);
}

//! The types and tile an entry point takes; `fixed`: an explicit operator (else the dispatch draws them).
struct Types {
  bool fixed = true;
  DType element = DType::kBFloat16;
  DType gate = DType::kBFloat16;
  IndexType index = IndexType::kInt64;
  bool vector_required = false;  //!< the tile insists on the 16-byte path
};

struct ForwardCtx {
  gr::ForwardArguments a;
  FakeHeap heap;
  Types types;
  void* workspace = nullptr;  //!< for run(), which checks the workspace on the host before any device work
  std::size_t workspace_bytes = 0;
  std::size_t workspace_needed = 0;  //!< workspace_size(a) of the valid struct
  bool workspace_spoiled = false;  //!< a workspace corruption applied: run() gets the spoiled one
};

struct BackwardCtx {
  gr::BackwardArguments a;
  FakeHeap heap;
  Types types;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::size_t workspace_needed = 0;
  bool workspace_spoiled = false;  //!< a workspace corruption applied: run() gets the spoiled one
};

//! A fake workspace of workspace_size(a) bytes (256-aligned, as cudaMalloc returns).
template <class Ctx>
void give_workspace(Ctx& c, std::size_t needed) {
  c.workspace_needed = needed;
  c.workspace_bytes = needed;
  c.workspace = c.heap.template take_as<void>(needed);
}

std::int64_t vec_of(DType element) { return element == DType::kFloat32 ? 4 : 8; }
std::size_t element_size(DType t) { return hawk::size_of(t); }
//! Bytes of a gate element for alignment purposes (fp32 or bf16; anything else counts as 2).
std::size_t gate_size(DType t) { return t == DType::kFloat32 ? 4 : 2; }
std::size_t index_size(IndexType t) { return t == IndexType::kInt64 ? 8 : 4; }

template <class Ctx>
std::size_t rows_bytes(const Ctx& c) {
  return extent(c.a.shape.num_rows, c.a.shape.dim, static_cast<std::int64_t>(element_size(c.a.shape.dtype)));
}
template <class Ctx>
std::size_t gate_bytes(const Ctx& c) {
  return extent(c.a.shape.num_gate_rows, c.a.shape.dim, static_cast<std::int64_t>(gate_size(c.a.shape.gate_dtype)));
}
template <class Ctx>
std::size_t idx_bytes(const Ctx& c) {
  return extent(c.a.shape.num_rows, static_cast<std::int64_t>(index_size(c.a.shape.index_type)));
}

//! Alignment the checks insist on: the element size, or 16 bytes (gate rows: min(16, kVec·gate)) when the tile
//! requires the vector path.
template <class Ctx>
std::size_t row_alignment(const Ctx& c) {
  return c.types.vector_required ? 16 : element_size(c.a.shape.dtype);
}
template <class Ctx>
std::size_t gate_alignment(const Ctx& c) {
  const std::size_t word = gate_size(c.a.shape.gate_dtype) * static_cast<std::size_t>(vec_of(c.a.shape.dtype));
  return c.types.vector_required ? (word < 16 ? word : 16) : gate_size(c.a.shape.gate_dtype);
}

template <class Ctx>
void make_shape(Rng& rng, Ctx& c, const Types& types) {
  gr::ProblemShape& s = c.a.shape;
  c.types = types;
  if (!types.fixed) {
    c.types.element = rng.pick(std::vector<DType>{DType::kFloat32, DType::kFloat16, DType::kBFloat16});
    c.types.gate = rng.pick(std::vector<DType>{DType::kFloat32, DType::kBFloat16});
    c.types.index = rng.chance(0.5) ? IndexType::kInt32 : IndexType::kInt64;
  }
  s.dtype = c.types.element;
  s.gate_dtype = c.types.gate;
  s.index_type = c.types.index;
  s.num_rows = rng.chance(0.1) ? rng.range(1, 4) : rng.range(1, 5000);
  s.dim = types.vector_required ? vec_of(s.dtype) * rng.range(1, 80) : rng.range(1, 600);
  s.num_gate_rows = rng.range(1, 64);
  s.validate_indices = rng.chance(0.7);
  s.wait_for_device_checks = rng.chance(0.3);
  s.device_check_report = rng.chance(0.2) ? c.heap.template take_as<unsigned int>(4) : nullptr;
}

//! A row pointer: 256-aligned, or (1 in 5, scalar path allowed) only element-aligned.
template <class Ctx>
std::uintptr_t take_rows(Rng& rng, Ctx& c) {
  const std::uintptr_t at = c.heap.take(rows_bytes(c) + 64);
  if (!c.types.vector_required && rng.chance(0.2)) return at + element_size(c.a.shape.dtype);
  return at;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

//! A declared index layout; for kUniform a rows_per_group with ceil(N / S) <= G.
template <class Ctx>
void make_layout(Rng& rng, Ctx& c) {
  const gr::ProblemShape& s = c.a.shape;
  c.a.layout = rng.pick(std::vector<gr::IndexLayout>{gr::IndexLayout::kArbitrary, gr::IndexLayout::kUniform,
                                                     gr::IndexLayout::kContiguousSegments});
  if (c.a.layout == gr::IndexLayout::kUniform) {
    const std::int64_t groups = rng.range(1, s.num_gate_rows);
    c.a.rows_per_group = ceil_div(s.num_rows, groups);  // ceil(N / S) <= groups <= G
  } else {
    c.a.rows_per_group = rng.chance(0.5) ? 0 : rng.range(-5, 100);  // ignored
  }
}

ForwardCtx make_forward(Rng& rng, const Types& types) {
  ForwardCtx c;
  make_shape(rng, c, types);
  make_layout(rng, c);
  c.a.residual = reinterpret_cast<const void*>(take_rows(rng, c));
  c.a.y = reinterpret_cast<const void*>(take_rows(rng, c));
  c.a.gate = c.heap.take_as<const void>(gate_bytes(c));
  c.a.idx = c.heap.take_as<const void>(idx_bytes(c));
  c.a.out = rng.chance(0.3) ? const_cast<void*>(c.a.residual) : reinterpret_cast<void*>(take_rows(rng, c));
  return c;
}

BackwardCtx make_backward(Rng& rng, const Types& types) {
  BackwardCtx c;
  make_shape(rng, c, types);
  const gr::ProblemShape& s = c.a.shape;
  make_layout(rng, c);
  c.a.dout = reinterpret_cast<const void*>(take_rows(rng, c));
  c.a.y = reinterpret_cast<const void*>(take_rows(rng, c));
  c.a.gate = c.heap.take_as<const void>(gate_bytes(c));
  c.a.idx = c.heap.take_as<const void>(idx_bytes(c));
  c.a.dy = reinterpret_cast<void*>(take_rows(rng, c));
  c.a.dgate_type = rng.chance(0.5) ? gr::DgateType::kFloat32 : gr::DgateType::kGateType;
  c.a.dgate = c.heap.take_as<void>(extent(s.num_gate_rows, s.dim, 4));
  const double draw = static_cast<double>(rng.next() % 100) / 100.0;
  if (draw < 0.3) c.a.dresidual = reinterpret_cast<void*>(take_rows(rng, c));
  else if (draw < 0.4) c.a.dresidual = const_cast<void*>(c.a.dout);  // same as absent
  return c;
}

template <class Ctx>
std::function<Need(const Ctx&)> required() {
  return [](const Ctx&) { return Need::kRequired; };
}
template <class Ctx>
std::function<std::size_t(const Ctx&)> rows_alignment() {
  return [](const Ctx& c) { return row_alignment(c); };
}
template <class Ctx>
std::function<std::size_t(const Ctx&)> rows_extent() {
  return [](const Ctx& c) { return rows_bytes(c); };
}

//! The largest alignments the checks can ask for, for the entry point's types (the names of the
//! misalignment corruptions: only those that can apply).
struct MaxAlignment {
  std::size_t rows, gate, index, dgate, element;
  explicit MaxAlignment(const Types& t)
      : rows(t.vector_required ? 16 : t.fixed ? element_size(t.element) : 4),
        gate(t.vector_required ? 16 : t.fixed ? gate_size(t.gate) : 4),
        index(t.fixed ? index_size(t.index) : 8),
        dgate(t.vector_required ? 16 : 4),
        element(t.fixed ? element_size(t.element) : 4) {}
};

template <class Ctx>
void add_input_fields(std::vector<PointerField<Ctx>>& f, const MaxAlignment& m) {
  f.push_back(pointer_field<Ctx>("y", HAWK_FUZZ_POINTER(Ctx, a.y), required<Ctx>(), rows_alignment<Ctx>(), m.rows,
                                 rows_extent<Ctx>(), false));
  f.push_back(pointer_field<Ctx>("gate", HAWK_FUZZ_POINTER(Ctx, a.gate), required<Ctx>(),
                                 [](const Ctx& c) { return gate_alignment(c); }, m.gate,
                                 [](const Ctx& c) { return gate_bytes(c); }, false));
  f.push_back(pointer_field<Ctx>("idx", HAWK_FUZZ_POINTER(Ctx, a.idx), required<Ctx>(),
                                 [](const Ctx& c) { return index_size(c.a.shape.index_type); }, m.index,
                                 [](const Ctx& c) { return idx_bytes(c); }, false));
  f.push_back(pointer_field<Ctx>("device_check_report", HAWK_FUZZ_POINTER(Ctx, a.shape.device_check_report),
                                 [](const Ctx&) { return Need::kOptional; }, std::size_t{4},
                                 [](const Ctx&) { return std::size_t{4}; }, false));
}

//! Shape, dtype and flag corruptions of the shared ProblemShape.
template <class Ctx>
void add_shape_corruptions(std::vector<Corruption<Ctx>>& out, bool fixed_types) {
  using X = Expectation;
  struct Size {
    const char* name;
    std::int64_t gr::ProblemShape::*member;
  };
  for (Size size : {Size{"num_rows", &gr::ProblemShape::num_rows}, Size{"dim", &gr::ProblemShape::dim},
                    Size{"num_gate_rows", &gr::ProblemShape::num_gate_rows}}) {
    const auto member = size.member;
    out.push_back(corruption<Ctx>(std::string(size.name) + " = 0", StatusCode::kInvalidArgument, [member](Ctx& c, Rng&, X&) {
      c.a.shape.*member = 0;
      return true;
    }));
    out.push_back(corruption<Ctx>(std::string(size.name) + " negative", StatusCode::kInvalidArgument,
                                  [member](Ctx& c, Rng& r, X& x) {
                                    c.a.shape.*member = r.pick(negative_values());
                                    x.detail = std::to_string(c.a.shape.*member);
                                    return true;
                                  }));
    out.push_back(corruption<Ctx>(std::string(size.name) + " huge", StatusCode::kInvalidArgument, [member](Ctx& c, Rng& r, X& x) {
      c.a.shape.*member = r.pick(huge_values());
      x.detail = std::to_string(c.a.shape.*member);
      return true;
    }));
    out.push_back(corruption<Ctx>(std::string(size.name) + " + 1", Expect::kAny, [member](Ctx& c, Rng&, X&) {
      c.a.shape.*member = wrapping_add(c.a.shape.*member, 1);
      return true;
    }));
    out.push_back(corruption<Ctx>(std::string(size.name) + " at its limit (2^31 - 1)", Expect::kAny, [member](Ctx& c, Rng&, X&) {
      c.a.shape.*member = (std::int64_t{1} << 31) - 1;
      return true;
    }));
  }
  for (DType other : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    out.push_back(corruption<Ctx>(std::string("dtype changed to ") + hawk::to_string(other), Expect::kAny,
                                  [fixed_types, other](Ctx& c, Rng&, X& x) {
                                    if (c.a.shape.dtype == other) return false;
                                    c.a.shape.dtype = other;
                                    if (fixed_types) x.reject(StatusCode::kUnsupportedConfiguration);
                                    return true;
                                  }));
    out.push_back(corruption<Ctx>(std::string("gate_dtype changed to ") + hawk::to_string(other), Expect::kAny,
                                  [fixed_types, other](Ctx& c, Rng&, X& x) {
                                    if (c.a.shape.gate_dtype == other) return false;
                                    c.a.shape.gate_dtype = other;
                                    // fp16 gates exist in no configuration
                                    if (fixed_types || other == DType::kFloat16) x.reject(StatusCode::kUnsupportedConfiguration);
                                    return true;
                                  }));
  }
  out.push_back(corruption<Ctx>("dtype out of range", StatusCode::kUnsupportedConfiguration, [](Ctx& c, Rng& r, X& x) {
    c.a.shape.dtype = static_cast<DType>(r.pick(std::vector<int>{-1, 3, 1 << 20}));
    x.detail = std::to_string(static_cast<int>(c.a.shape.dtype));
    return true;
  }));
  out.push_back(corruption<Ctx>("gate_dtype out of range", StatusCode::kUnsupportedConfiguration, [](Ctx& c, Rng& r, X& x) {
    c.a.shape.gate_dtype = static_cast<DType>(r.pick(std::vector<int>{-1, 3, 1 << 20}));
    x.detail = std::to_string(static_cast<int>(c.a.shape.gate_dtype));
    return true;
  }));
  out.push_back(corruption<Ctx>("index_type changed", Expect::kAny, [fixed_types](Ctx& c, Rng&, X& x) {
    c.a.shape.index_type = c.a.shape.index_type == IndexType::kInt32 ? IndexType::kInt64 : IndexType::kInt32;
    if (fixed_types) x.reject(StatusCode::kUnsupportedConfiguration);
    return true;
  }));
  out.push_back(corruption<Ctx>("index_type out of range", StatusCode::kUnsupportedConfiguration, [](Ctx& c, Rng& r, X& x) {
    c.a.shape.index_type = static_cast<IndexType>(r.pick(std::vector<int>{-1, 2, 99}));
    x.detail = std::to_string(static_cast<int>(c.a.shape.index_type));
    return true;
  }));
  out.push_back(corruption<Ctx>("validate_indices off", Expect::kAccept, [](Ctx& c, Rng&, X&) {
    if (!c.a.shape.validate_indices) return false;
    c.a.shape.validate_indices = false;
    return true;
  }));
  out.push_back(corruption<Ctx>("wait_for_device_checks flipped", Expect::kAccept, [](Ctx& c, Rng&, X&) {
    c.a.shape.wait_for_device_checks = !c.a.shape.wait_for_device_checks;
    return true;
  }));
  out.push_back(corruption<Ctx>("device_check_report added", Expect::kAccept, [](Ctx& c, Rng&, X&) {
    if (c.a.shape.device_check_report != nullptr) return false;
    c.a.shape.device_check_report = c.heap.template take_as<unsigned int>(4);
    return true;
  }));
}

//! The declared layout (forward and backward check it the same way, detail::check_layout).
template <class Ctx>
void add_layout_corruptions(std::vector<Corruption<Ctx>>& out) {
  using X = Expectation;
  out.push_back(corruption<Ctx>("layout out of range", StatusCode::kInvalidArgument, [](Ctx& c, Rng& r, X& x) {
    c.a.layout = static_cast<gr::IndexLayout>(r.pick(std::vector<int>{-1, 3, 64}));
    x.detail = std::to_string(static_cast<int>(c.a.layout));
    return true;
  }));
  out.push_back(corruption<Ctx>("layout changed to kArbitrary", Expect::kAccept, [](Ctx& c, Rng&, X&) {
    if (c.a.layout == gr::IndexLayout::kArbitrary) return false;
    c.a.layout = gr::IndexLayout::kArbitrary;
    return true;
  }));
  out.push_back(corruption<Ctx>("layout changed to kContiguousSegments", Expect::kAccept, [](Ctx& c, Rng&, X&) {
    if (c.a.layout == gr::IndexLayout::kContiguousSegments) return false;
    c.a.layout = gr::IndexLayout::kContiguousSegments;  // the host cannot tell; the device check does
    return true;
  }));
  out.push_back(corruption<Ctx>("rows_per_group = 0 with kUniform", StatusCode::kInvalidArgument, [](Ctx& c, Rng&, X&) {
    c.a.layout = gr::IndexLayout::kUniform;
    c.a.rows_per_group = 0;
    return true;
  }));
  out.push_back(corruption<Ctx>("rows_per_group negative with kUniform", StatusCode::kInvalidArgument, [](Ctx& c, Rng& r, X& x) {
    c.a.layout = gr::IndexLayout::kUniform;
    c.a.rows_per_group = r.pick(negative_values());
    x.detail = std::to_string(c.a.rows_per_group);
    return true;
  }));
  out.push_back(corruption<Ctx>("rows_per_group too small for num_gate_rows (kUniform)", StatusCode::kInvalidArgument,
                                [](Ctx& c, Rng&, X& x) {
                                  const gr::ProblemShape& shape = c.a.shape;
                                  if (shape.num_gate_rows < 1 || shape.num_gate_rows >= shape.num_rows) return false;
                                  const std::int64_t s = shape.num_rows / (shape.num_gate_rows + 1);
                                  if (s < 1) return false;
                                  c.a.layout = gr::IndexLayout::kUniform;
                                  c.a.rows_per_group = s;
                                  x.detail = std::to_string(s);
                                  return true;
                                }));
  out.push_back(corruption<Ctx>("rows_per_group huge with kUniform", Expect::kAccept, [](Ctx& c, Rng& r, X& x) {
    c.a.layout = gr::IndexLayout::kUniform;
    c.a.rows_per_group = r.pick(huge_values());  // one group: ceil(N / S) = 1
    x.detail = std::to_string(c.a.rows_per_group);
    return true;
  }));
  out.push_back(corruption<Ctx>("rows_per_group garbage without kUniform", Expect::kAccept, [](Ctx& c, Rng& r, X& x) {
    if (c.a.layout == gr::IndexLayout::kUniform) return false;
    c.a.rows_per_group = r.chance(0.5) ? r.pick(negative_values()) : r.pick(huge_values());
    x.detail = std::to_string(c.a.rows_per_group);
    return true;
  }));
}

//! run()'s workspace, checked on the host before any device work (judged only where run() may be called).
template <class Ctx>
void add_workspace_corruptions(std::vector<Corruption<Ctx>>& out) {
  using X = Expectation;
  auto judged = [](Ctx& c, X& x, StatusCode code) {
    if (!launches_allowed()) x.any();
    else if (c.workspace_needed == 0) x.accept();
    else x.reject(code);
  };
  out.push_back(corruption<Ctx>("workspace null", Expect::kAny, [judged](Ctx& c, Rng&, X& x) {
    if (c.workspace == nullptr) return false;
    c.workspace = nullptr;
    c.workspace_spoiled = true;
    judged(c, x, StatusCode::kNullPointer);  // workspace_bytes still claims enough (core/workspace.hpp)
    return true;
  }));
  out.push_back(corruption<Ctx>("workspace_bytes one short", Expect::kAny, [judged](Ctx& c, Rng&, X& x) {
    if (c.workspace_needed == 0) return false;
    c.workspace_bytes = c.workspace_needed - 1;
    c.workspace_spoiled = true;
    judged(c, x, StatusCode::kWorkspaceTooSmall);
    return true;
  }));
  out.push_back(corruption<Ctx>("workspace_bytes huge", Expect::kAccept, [](Ctx& c, Rng&, X&) {
    c.workspace_bytes = ~std::size_t{0};
    c.workspace_spoiled = true;
    return true;
  }));
  for (std::size_t k : {1, 4, 16, 128}) {
    out.push_back(corruption<Ctx>("workspace misaligned by " + std::to_string(k), Expect::kAny,
                                  [judged, k](Ctx& c, Rng&, X& x) {
                                    if (c.workspace == nullptr || c.workspace_needed == 0) return false;
                                    c.workspace = static_cast<unsigned char*>(c.workspace) + k;
                                    c.workspace_spoiled = true;
                                    judged(c, x, StatusCode::kMisalignedPointer);
                                    return true;
                                  }));
  }
}

Overlap forward_overlap(const std::string& out, const std::string& other) {
  if (other == "device_check_report") return Overlap::kUnchecked;
  if (out == "out" && other == "residual") return Overlap::kAliasAllowed;  // in place
  return Overlap::kForbidden;
}

Overlap backward_overlap(const std::string& out, const std::string& other) {
  if (other == "device_check_report") return Overlap::kUnchecked;
  if (out == "dresidual" && other == "dout") return Overlap::kAliasAllowed;  // dresidual == dout: nothing to copy
  return Overlap::kForbidden;
}

template <class Element, class Gate, class Index, class Tile>
std::string op_name(const char* op) {
  std::string name = std::string("gate_residual::") + op + "<" + hawk::ElementTraits<Element>::kName + ", " +
                     hawk::ElementTraits<Gate>::kName + ", " + (sizeof(Index) == 4 ? "int32" : "int64");
  if (Tile::kRequireVectorAccess) name += ", vector-only tile";
  return name + ">";
}

template <class Element, class Gate, class Index>
Types types_of(bool vector_required) {
  Types t;
  t.fixed = true;
  t.element = hawk::ElementTraits<Element>::kDType;
  t.gate = hawk::ElementTraits<Gate>::kDType;
  t.index = sizeof(Index) == 4 ? IndexType::kInt32 : IndexType::kInt64;
  t.vector_required = vector_required;
  return t;
}

//! Whether the runtime types name this operator's (so that the dispatch picks it, for the default tiles).
template <class Ctx>
bool same_types(const Ctx& c, const Types& t) {
  return c.a.shape.dtype == t.element && c.a.shape.gate_dtype == t.gate && c.a.shape.index_type == t.index;
}

std::vector<PointerField<ForwardCtx>> forward_fields(const MaxAlignment& m) {
  using Ctx = ForwardCtx;
  std::vector<PointerField<Ctx>> f;
  f.push_back(pointer_field<Ctx>("residual", HAWK_FUZZ_POINTER(Ctx, a.residual), required<Ctx>(), rows_alignment<Ctx>(),
                                 m.rows, rows_extent<Ctx>(), false));
  add_input_fields(f, m);
  f.push_back(pointer_field<Ctx>("out", HAWK_FUZZ_POINTER(Ctx, a.out), required<Ctx>(), rows_alignment<Ctx>(), m.rows,
                                 rows_extent<Ctx>(), true));
  return f;
}

std::vector<Corruption<ForwardCtx>> forward_corruptions(const Types& types) {
  std::vector<Corruption<ForwardCtx>> out;
  const auto fields = forward_fields(MaxAlignment(types));
  add_pointer_corruptions(out, fields);
  add_overlap_corruptions<ForwardCtx>(out, fields, forward_overlap);
  add_shape_corruptions<ForwardCtx>(out, types.fixed);
  add_layout_corruptions(out);
  add_workspace_corruptions(out);
  return out;
}

template <class Element, class Gate, class Index, class Tile>
EntryPoint<ForwardCtx> forward_entry() {
  using Op = gr::Forward<Element, Gate, Index, Tile>;
  constexpr bool kDefaultTile = std::is_same<Tile, gr::DefaultForwardTile>::value;
  const Types types = types_of<Element, Gate, Index>(Tile::kRequireVectorAccess);
  EntryPoint<ForwardCtx> e;
  e.name = op_name<Element, Gate, Index, Tile>("Forward");
  e.make_valid = [types](Rng& rng) {
    ForwardCtx c = make_forward(rng, types);
    give_workspace(c, Op::workspace_size(c.a));
    return c;
  };
  e.corruptions = forward_corruptions(types);
  e.probe = [types](const ForwardCtx& c, Findings& f) {
    const std::size_t bytes = Op::workspace_size(c.a);
    if (bytes != gr::forward_workspace_size(c.a)) f.add("Forward::workspace_size differs from forward_workspace_size");
    if (c.a.shape.validate_indices && bytes == 0) f.add("validate_indices but workspace_size is 0 (no check word)");
    if (kDefaultTile && same_types(c, types))
      f.expect_same_code("forward_can_implement", Op::can_implement(c.a), gr::forward_can_implement(c.a));
    return verdict(c, f, "Forward", Op::can_implement, Op::workspace_size, Op::run);
  };
  return e;
}

EntryPoint<ForwardCtx> dispatch_forward_entry() {
  EntryPoint<ForwardCtx> e;
  e.name = "gate_residual::forward (default dispatch)";
  Types types;
  types.fixed = false;
  e.make_valid = [types](Rng& rng) {
    ForwardCtx c = make_forward(rng, types);
    give_workspace(c, gr::forward_workspace_size(c.a));
    return c;
  };
  e.corruptions = forward_corruptions(types);
  e.probe = [](const ForwardCtx& c, Findings& f) {
    return verdict(c, f, "forward", gr::forward_can_implement, gr::forward_workspace_size, gr::forward);
  };
  return e;
}

std::vector<Corruption<BackwardCtx>> backward_corruptions(const Types& types) {
  using Ctx = BackwardCtx;
  using X = Expectation;
  const bool fixed_types = types.fixed;
  const MaxAlignment m(types);
  std::vector<PointerField<Ctx>> f;
  f.push_back(pointer_field<Ctx>("dout", HAWK_FUZZ_POINTER(Ctx, a.dout), required<Ctx>(), rows_alignment<Ctx>(), m.rows,
                                 rows_extent<Ctx>(), false));
  add_input_fields(f, m);
  f.push_back(pointer_field<Ctx>("dy", HAWK_FUZZ_POINTER(Ctx, a.dy), required<Ctx>(), rows_alignment<Ctx>(), m.rows,
                                 rows_extent<Ctx>(), true));
  auto dgate_is_float = [](const Ctx& c) {
    return c.a.dgate_type == gr::DgateType::kFloat32 || c.a.shape.gate_dtype == DType::kFloat32;
  };
  f.push_back(pointer_field<Ctx>(
      "dgate", HAWK_FUZZ_POINTER(Ctx, a.dgate), required<Ctx>(),
      [dgate_is_float](const Ctx& c) {
        if (!c.types.vector_required) return dgate_is_float(c) ? std::size_t{4} : gate_size(c.a.shape.gate_dtype);
        const std::size_t word = (dgate_is_float(c) ? 4 : gate_size(c.a.shape.gate_dtype)) *
                                 static_cast<std::size_t>(vec_of(c.a.shape.dtype));
        return word < 16 ? word : std::size_t{16};
      },
      m.dgate,
      [dgate_is_float](const Ctx& c) {
        return extent(c.a.shape.num_gate_rows, c.a.shape.dim,
                      dgate_is_float(c) ? 4 : static_cast<std::int64_t>(gate_size(c.a.shape.gate_dtype)));
      },
      true));
  f.push_back(pointer_field<Ctx>(
      "dresidual", HAWK_FUZZ_POINTER(Ctx, a.dresidual), [](const Ctx&) { return Need::kOptional; },
      [](const Ctx& c) { return element_size(c.a.shape.dtype); }, m.element, rows_extent<Ctx>(), true));
  std::vector<Corruption<Ctx>> out;
  add_pointer_corruptions(out, f);
  add_overlap_corruptions<Ctx>(out, f, backward_overlap);
  add_shape_corruptions<Ctx>(out, fixed_types);
  out.push_back(corruption<Ctx>("dgate_type out of range", StatusCode::kInvalidArgument, [](Ctx& c, Rng& r, X& x) {
    c.a.dgate_type = static_cast<gr::DgateType>(r.pick(std::vector<int>{-1, 2, 64}));
    x.detail = std::to_string(static_cast<int>(c.a.dgate_type));
    return true;
  }));
  out.push_back(corruption<Ctx>("dgate_type flipped", Expect::kAccept, [](Ctx& c, Rng&, X&) {
    c.a.dgate_type = c.a.dgate_type == gr::DgateType::kFloat32 ? gr::DgateType::kGateType : gr::DgateType::kFloat32;
    return true;
  }));
  add_layout_corruptions(out);
  add_workspace_corruptions(out);
  return out;
}

template <class Element, class Gate, class Index, class Tile>
EntryPoint<BackwardCtx> backward_entry() {
  using Op = gr::Backward<Element, Gate, Index, Tile>;
  constexpr bool kDefaultTile = std::is_same<Tile, gr::DefaultBackwardTile>::value;
  const Types types = types_of<Element, Gate, Index>(Tile::kRequireVectorAccess);
  EntryPoint<BackwardCtx> e;
  e.name = op_name<Element, Gate, Index, Tile>("Backward");
  e.make_valid = [types](Rng& rng) {
    BackwardCtx c = make_backward(rng, types);
    give_workspace(c, Op::workspace_size(c.a));
    return c;
  };
  e.corruptions = backward_corruptions(types);
  e.probe = [types](const BackwardCtx& c, Findings& f) {
    const Status s = Op::can_implement(c.a);
    const std::size_t bytes = Op::workspace_size(c.a);
    if (host_refused(s) && bytes != 0) f.add("workspace_size " + std::to_string(bytes) + " for refused arguments (documented: 0)");
    if (kDefaultTile && same_types(c, types)) {
      f.expect_same_code("backward_can_implement", s, gr::backward_can_implement(c.a));
      if (bytes != gr::backward_workspace_size(c.a)) f.add("Backward::workspace_size differs from backward_workspace_size");
    }
    return verdict(c, f, "Backward", Op::can_implement, Op::workspace_size, Op::run);
  };
  return e;
}

EntryPoint<BackwardCtx> dispatch_backward_entry() {
  EntryPoint<BackwardCtx> e;
  e.name = "gate_residual::backward (default dispatch)";
  Types types;
  types.fixed = false;
  e.make_valid = [types](Rng& rng) {
    BackwardCtx c = make_backward(rng, types);
    give_workspace(c, gr::backward_workspace_size(c.a));
    return c;
  };
  e.corruptions = backward_corruptions(types);
  e.probe = [](const BackwardCtx& c, Findings& f) {
    const Status s = gr::backward_can_implement(c.a);
    const std::size_t bytes = gr::backward_workspace_size(c.a);
    if (host_refused(s) && bytes != 0) f.add("backward_workspace_size " + std::to_string(bytes) + " for refused arguments (documented: 0)");
    return verdict(c, f, "backward", gr::backward_can_implement, gr::backward_workspace_size, gr::backward);
  };
  return e;
}

using Bf16 = __nv_bfloat16;
using Half = __half;
using VectorForwardTile = gr::ForwardTile<256, 4, true>;
using VectorBackwardTile = gr::BackwardTile<128, 32, 4, true>;

}  // namespace

TEST_CASE("gate_residual::Forward", "[fuzz][gate_residual]") {
  check_report(run_entry(forward_entry<Bf16, Bf16, std::int64_t, gr::DefaultForwardTile>()));
  check_report(run_entry(forward_entry<float, float, std::int32_t, gr::DefaultForwardTile>()));
  check_report(run_entry(forward_entry<Half, float, std::int64_t, VectorForwardTile>()));
}

TEST_CASE("gate_residual::Backward", "[fuzz][gate_residual]") {
  check_report(run_entry(backward_entry<Bf16, Bf16, std::int64_t, gr::DefaultBackwardTile>()));
  check_report(run_entry(backward_entry<float, float, std::int32_t, gr::DefaultBackwardTile>()));
  check_report(run_entry(backward_entry<Half, Bf16, std::int32_t, VectorBackwardTile>()));
}

TEST_CASE("gate_residual default dispatch", "[fuzz][gate_residual]") {
  check_report(run_entry(dispatch_forward_entry()));
  check_report(run_entry(dispatch_backward_entry()));
}
