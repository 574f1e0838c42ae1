// Bad input: every problem the operators can detect gives its StatusCode and leaves every output untouched
// (still poisoned). Problems decidable on the host are run()'s Status; problems in idx are found on the device
// and delivered as core/device_checks.cuh says: by run() in the blocking mode, by read_device_checks() on the
// workspace in the default deferred mode, and in the caller's report word; each is tested. The forward refuses
// the same layout declarations as the backward. Also the default dispatch: each runtime (dtype, gate dtype,
// index type) reaches a kernel that matches float64, and types hawk does not take are refused.
#include "bad_input_support.cuh"

using hawk_test::raw;

namespace {

using namespace gr_bad;

template <class Op = gr::Forward<E, Gt, I>>
StatusCode run_forward(Fixture& f, const gr::ForwardArguments& a) {
  const hawk::Status status = Op::run(a, raw(f.workspace), f.workspace.size(), 0);
  INFO(status.to_string());
  return status.code();
}

template <class Op = gr::Backward<E, Gt, I>>
StatusCode run_backward(Fixture& f, const gr::BackwardArguments& a) {
  const hawk::Status status = Op::run(a, raw(f.workspace), f.workspace.size(), 0);
  INFO(status.to_string());
  return status.code();
}

const void* shifted(const void* p, std::size_t bytes) { return static_cast<const char*>(p) + bytes; }
void* shifted(void* p, std::size_t bytes) { return static_cast<char*>(p) + bytes; }

}  // namespace

TEST_CASE("forward: bad shapes, null, misaligned or overlapping pointers return their status and write nothing",
          "[gate_residual][gpu][bad_input]") {
  Fixture f;
  auto expect = [&](gr::ForwardArguments a, StatusCode code) {
    CHECK(run_forward(f, a) == code);
    CHECK(f.outputs_untouched());
  };
  { auto a = f.forward_args(); a.shape.num_rows = 0; expect(a, StatusCode::kInvalidArgument); }
  { auto a = f.forward_args(); a.shape.dim = 0; expect(a, StatusCode::kInvalidArgument); }
  { auto a = f.forward_args(); a.shape.num_gate_rows = 0; expect(a, StatusCode::kInvalidArgument); }
  { auto a = f.forward_args(); a.residual = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.forward_args(); a.y = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.forward_args(); a.gate = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.forward_args(); a.idx = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.forward_args(); a.out = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.forward_args(); a.residual = shifted(a.residual, 1); expect(a, StatusCode::kMisalignedPointer); }
  { auto a = f.forward_args(); a.idx = shifted(a.idx, 4); expect(a, StatusCode::kMisalignedPointer); }
  { auto a = f.forward_args(); a.out = shifted(a.out, 1); expect(a, StatusCode::kMisalignedPointer); }
  { auto a = f.forward_args(); a.shape.dtype = hawk::DType::kFloat16; expect(a, StatusCode::kUnsupportedConfiguration); }
  { auto a = f.forward_args(); a.shape.index_type = hawk::IndexType::kInt32; expect(a, StatusCode::kUnsupportedConfiguration); }
  { auto a = f.forward_args(); a.out = const_cast<void*>(a.y); expect(a, StatusCode::kInvalidArgument); }
  { auto a = f.forward_args(); a.residual = shifted(a.out, 16); expect(a, StatusCode::kInvalidArgument); }
  // (out overlaps residual without being it: in place means exactly out == residual)
  {
    // A tile that demands the 16-byte path refuses D = 7 and a misaligned view; the default tile takes both.
    using Strict = gr::Forward<E, Gt, I, gr::ForwardTile<256, 4, true>>;
    auto a = f.forward_args();
    a.shape.dim = 7;
    CHECK(run_forward<Strict>(f, a) == StatusCode::kUnsupportedConfiguration);
    auto b = f.forward_args();
    b.shape.num_rows = f.N - 1;
    b.residual = shifted(b.residual, sizeof(E));
    CHECK(run_forward<Strict>(f, b) == StatusCode::kMisalignedPointer);
    CHECK(f.outputs_untouched());
  }
  {
    auto a = f.forward_args();
    CHECK(gr::Forward<E, Gt, I>::run(a, nullptr, 0, 0).code() == StatusCode::kWorkspaceTooSmall);
    CHECK(f.outputs_untouched());
  }
}

TEST_CASE("forward: idx out of range is found on the device, delivered in every mode, and nothing is written",
          "[gate_residual][gpu][bad_input]") {
  // Under compute-sanitizer (HAWK_SANITIZE) the middle row is left out: 18 fixtures instead of 27.
  const std::vector<std::int64_t> rows = gr_test::sanitizing() ? std::vector<std::int64_t>{0, 256}
                                                                : std::vector<std::int64_t>{0, 128, 256};
  for (std::int64_t bad : {std::int64_t{9}, std::int64_t{-1}, std::int64_t{1} << 40}) {
    for (std::int64_t row : rows) {
      for (gr::IndexLayout layout :
           {gr::IndexLayout::kArbitrary, gr::IndexLayout::kUniform, gr::IndexLayout::kContiguousSegments}) {
        Fixture f;
        f.set_idx(row, bad);
        INFO("idx[" << row << "] = " << bad << ", layout " << gr::to_string(layout));
        expect_device_rejection<gr::Forward<E, Gt, I>>(f, f.forward_args(layout, 30), StatusCode::kIndexOutOfRange,
                                                       "idx", hawk::kCheckIdxOutOfRange);
      }
    }
  }
}

TEST_CASE("backward: bad shapes, pointers and layout descriptions return their status and write nothing",
          "[gate_residual][gpu][bad_input]") {
  Fixture f;
  auto expect = [&](gr::BackwardArguments a, StatusCode code) {
    CHECK(run_backward(f, a) == code);
    CHECK(f.outputs_untouched());
  };
  { auto a = f.backward_args(); a.shape.num_rows = 0; expect(a, StatusCode::kInvalidArgument); }
  { auto a = f.backward_args(); a.shape.dim = 0; expect(a, StatusCode::kInvalidArgument); }
  { auto a = f.backward_args(); a.dout = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.backward_args(); a.y = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.backward_args(); a.gate = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.backward_args(); a.idx = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.backward_args(); a.dy = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.backward_args(); a.dgate = nullptr; expect(a, StatusCode::kNullPointer); }
  { auto a = f.backward_args(); a.dgate = shifted(a.dgate, 2); expect(a, StatusCode::kMisalignedPointer); }
  { auto a = f.backward_args(); a.dy = shifted(a.dy, 1); expect(a, StatusCode::kMisalignedPointer); }
  { auto a = f.backward_args(); a.dy = const_cast<void*>(a.dout); expect(a, StatusCode::kInvalidArgument); }
  { auto a = f.backward_args(); a.dgate = a.dy; expect(a, StatusCode::kInvalidArgument); }
  { auto a = f.backward_args(); a.shape.gate_dtype = hawk::DType::kFloat32; expect(a, StatusCode::kUnsupportedConfiguration); }
  { auto a = f.backward_args(gr::IndexLayout::kUniform, 0); expect(a, StatusCode::kInvalidArgument); }
  // ceil(257 / 20) = 13 groups > G = 9
  { auto a = f.backward_args(gr::IndexLayout::kUniform, 20); expect(a, StatusCode::kInvalidArgument); }
  { auto a = f.backward_args(); a.layout = static_cast<gr::IndexLayout>(7); expect(a, StatusCode::kInvalidArgument); }
  {
    using Strict = gr::Backward<E, Gt, I, gr::BackwardTile<128, 32, 4, true>>;
    auto a = f.backward_args();
    a.shape.dim = 7;
    CHECK(run_backward<Strict>(f, a) == StatusCode::kUnsupportedConfiguration);
    CHECK(f.outputs_untouched());
  }
  {
    auto a = f.backward_args();
    const std::size_t needed = gr::Backward<E, Gt, I>::workspace_size(a);
    REQUIRE(needed > 0);
    CHECK(gr::Backward<E, Gt, I>::run(a, raw(f.workspace), needed - 1, 0).code() == StatusCode::kWorkspaceTooSmall);
    CHECK(f.outputs_untouched());
  }
}

TEST_CASE("backward: a layout declaration idx does not follow is found on the device and nothing is written",
          "[gate_residual][gpu][bad_input]") {
  Fixture f;
  // idx = r / 30 declared uniform with S = 31: host-valid (ceil(257 / 31) = 9 gate rows), false on the device.
  expect_device_rejection<gr::Backward<E, Gt, I>>(f, f.backward_args(gr::IndexLayout::kUniform, 31),
                                                  StatusCode::kInvalidArgument, "rows_per_group",
                                                  hawk::kCheckIdxNotUniform);
  // Group 0 appears in two runs: not contiguous segments (but fine as arbitrary).
  f.set_idx(200, 0);
  expect_device_rejection<gr::Backward<E, Gt, I>>(f, f.backward_args(gr::IndexLayout::kContiguousSegments),
                                                  StatusCode::kInvalidArgument, "layout",
                                                  hawk::kCheckIdxNotContiguous);
  const Outcome o = run_with<gr::Backward<E, Gt, I>>(f, f.backward_args(gr::IndexLayout::kArbitrary),
                                                     Delivery::kBlocking);
  INFO(o.returned.to_string());
  CHECK(o.returned.ok());
  CHECK_FALSE(f.outputs_untouched());
}

TEST_CASE("backward: idx out of range is found under every layout, delivered in every mode, and nothing is written",
          "[gate_residual][gpu][bad_input]") {
  for (gr::IndexLayout layout :
       {gr::IndexLayout::kArbitrary, gr::IndexLayout::kContiguousSegments, gr::IndexLayout::kUniform}) {
    for (std::int64_t bad : {std::int64_t{9}, std::int64_t{-1}, std::int64_t{1} << 40}) {
      Fixture f;
      f.set_idx(256, bad);
      INFO("layout " << gr::to_string(layout) << ", idx[256] = " << bad);
      expect_device_rejection<gr::Backward<E, Gt, I>>(f, f.backward_args(layout, 30), StatusCode::kIndexOutOfRange,
                                                      "idx", hawk::kCheckIdxOutOfRange);
    }
  }
}

TEST_CASE("forward: refuses the layout declarations the backward refuses, with the same words",
          "[gate_residual][gpu][bad_input]") {
  Fixture f;
  SECTION("on the host: the same Status and message as the backward's, naming layout or rows_per_group") {
    struct Declaration {
      gr::IndexLayout layout;
      std::int64_t rows_per_group;
      const char* word;
    };
    const Declaration declarations[] = {
        {gr::IndexLayout::kUniform, 0, "rows_per_group"},
        {gr::IndexLayout::kUniform, -3, "rows_per_group"},
        {gr::IndexLayout::kUniform, 20, "rows_per_group"},  // ceil(257 / 20) = 13 gate rows > G = 9
        {static_cast<gr::IndexLayout>(7), 0, "layout"},
    };
    for (const Declaration& d : declarations) {
      INFO("layout " << static_cast<int>(d.layout) << ", rows_per_group " << d.rows_per_group);
      auto fa = f.forward_args(d.layout, d.rows_per_group);
      fa.shape.validate_indices = false;  // a host check: refused whether or not the device would look
      const hawk::Status forward = gr::Forward<E, Gt, I>::run(fa, raw(f.workspace), f.workspace.size(), 0);
      const hawk::Status backward =
          gr::Backward<E, Gt, I>::run(f.backward_args(d.layout, d.rows_per_group), raw(f.workspace),
                                      f.workspace.size(), 0);
      INFO("forward: " << forward.to_string() << "; backward: " << backward.to_string());
      CHECK(forward.code() == StatusCode::kInvalidArgument);
      CHECK(mentions(forward, d.word));
      CHECK(forward.code() == backward.code());
      CHECK(forward.message() == backward.message());
      CHECK(gr::forward_can_implement(fa).code() == StatusCode::kInvalidArgument);
      CHECK(f.outputs_untouched());
    }
  }
  SECTION("on the device: a false kUniform claim") {
    expect_device_rejection<gr::Forward<E, Gt, I>>(f, f.forward_args(gr::IndexLayout::kUniform, 31),
                                                   StatusCode::kInvalidArgument, "rows_per_group",
                                                   hawk::kCheckIdxNotUniform);
  }
  SECTION("on the device: a false kContiguousSegments claim") {
    f.set_idx(200, 0);
    expect_device_rejection<gr::Forward<E, Gt, I>>(f, f.forward_args(gr::IndexLayout::kContiguousSegments),
                                                   StatusCode::kInvalidArgument, "layout",
                                                   hawk::kCheckIdxNotContiguous);
    // The same idx declared arbitrary is fine.
    const Outcome o = run_with<gr::Forward<E, Gt, I>>(f, f.forward_args(gr::IndexLayout::kArbitrary),
                                                      Delivery::kBlocking);
    INFO(o.returned.to_string());
    CHECK(o.returned.ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    CHECK(hawk_test::compare(hawk_test::to_host(f.out), hawk_test::to_host(f.residual)).non_finite == 0);
  }
  SECTION("true claims pass: idx = r / 30 is uniform with S = 30 and contiguous") {
    for (gr::IndexLayout layout : {gr::IndexLayout::kUniform, gr::IndexLayout::kContiguousSegments}) {
      f.poison_outputs();
      const Outcome o = run_with<gr::Forward<E, Gt, I>>(f, f.forward_args(layout, 30), Delivery::kReport);
      INFO(gr::to_string(layout) << ": " << o.returned.to_string() << " / " << o.verdict.to_string());
      CHECK(o.returned.ok());
      CHECK(o.verdict.ok());
      CHECK(o.report_bits == 0u);
      CHECK(hawk_test::compare(hawk_test::to_host(f.out), hawk_test::to_host(f.residual)).non_finite == 0);
    }
  }
}

TEST_CASE("the report word is sticky and the workspace holds the last call's verdict",
          "[gate_residual][gpu][bad_input]") {
  Fixture f;
  HAWK_TEST_CUDA(cudaMemset(raw(f.report), 0, sizeof(unsigned)));
  auto fa = f.forward_args(gr::IndexLayout::kUniform, 30);
  fa.shape.device_check_report = raw(f.report);
  auto ba = f.backward_args(gr::IndexLayout::kUniform, 30);
  ba.shape.device_check_report = raw(f.report);
  using F = gr::Forward<E, Gt, I>;
  using B = gr::Backward<E, Gt, I>;

  f.set_idx(17, 8);  // in range, but not 17 / 30
  REQUIRE(F::run(fa, raw(f.workspace), f.workspace.size(), 0).ok());
  CHECK(hawk::read_device_checks(raw(f.workspace), 0).code() == StatusCode::kInvalidArgument);
  CHECK(f.report_bits() == static_cast<unsigned>(hawk::kCheckIdxNotUniform));
  f.set_idx(18, -1);
  REQUIRE(B::run(ba, raw(f.workspace), f.workspace.size(), 0).ok());
  CHECK(hawk::read_device_checks(raw(f.workspace), 0).code() == StatusCode::kIndexOutOfRange);
  CHECK(f.report_bits() == (hawk::kCheckIdxNotUniform | hawk::kCheckIdxOutOfRange));
  CHECK(f.outputs_untouched());

  // Good idx again: the calls write and their own verdict is clean, but the report keeps what it saw.
  f.set_idx_uniform(30);
  REQUIRE(F::run(fa, raw(f.workspace), f.workspace.size(), 0).ok());
  REQUIRE(B::run(ba, raw(f.workspace), f.workspace.size(), 0).ok());
  CHECK(hawk::read_device_checks(raw(f.workspace), 0).ok());
  CHECK(f.report_bits() == (hawk::kCheckIdxNotUniform | hawk::kCheckIdxOutOfRange));
  CHECK_FALSE(f.outputs_untouched());
}

TEST_CASE("negative control: with valid input the same fixture writes every output", "[gate_residual][gpu][bad_input]") {
  for (Delivery delivery : kEveryDelivery) {
    INFO(to_string(delivery));
    Fixture f;
    const Outcome forward = run_with<gr::Forward<E, Gt, I>>(f, f.forward_args(gr::IndexLayout::kUniform, 30), delivery);
    const Outcome backward =
        run_with<gr::Backward<E, Gt, I>>(f, f.backward_args(gr::IndexLayout::kUniform, 30), delivery);
    INFO(forward.verdict.to_string() << " / " << backward.verdict.to_string());
    CHECK(forward.returned.ok());
    CHECK(forward.verdict.ok());
    CHECK(backward.returned.ok());
    CHECK(backward.verdict.ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    CHECK_FALSE(f.outputs_untouched());
    for (const auto* v : {&f.out, &f.dy, &f.dres})
      CHECK(hawk_test::compare(hawk_test::to_host(*v), hawk_test::to_host(f.dout)).non_finite == 0);
    CHECK(hawk_test::compare(hawk_test::to_host(f.dgate), std::vector<double>(f.dgate.size(), 1.0)).non_finite == 0);
  }
}

namespace {

template <class Et, class Gtt, class It>
void check_dispatch_combination() {
  const std::int64_t N = 129, D = 40;
  const gr_test::IndexPlan plan = gr_test::make_index_plan(gr::IndexLayout::kArbitrary, N, 0, gr::kDefaultChunkRows,
                                                           hawk_test::fresh_seed());
  const std::int64_t G = plan.num_gate_rows;
  const auto residual = gr_test::random_values<Et>(static_cast<std::size_t>(N * D), -2, 2, hawk_test::fresh_seed());
  const auto y = gr_test::random_values<Et>(residual.size(), -2, 2, hawk_test::fresh_seed());
  const auto dout = gr_test::random_values<Et>(residual.size(), -2, 2, hawk_test::fresh_seed());
  const auto gate = gr_test::random_values<Gtt>(static_cast<std::size_t>(G * D), -1.5, 1.5, hawk_test::fresh_seed());
  const gr_test::Reference ref = gr_test::reference(residual, y, gate, dout, plan, N, D);
  auto d_residual = gr_test::upload<Et>(residual), d_y = gr_test::upload<Et>(y), d_dout = gr_test::upload<Et>(dout);
  auto d_gate = gr_test::upload<Gtt>(gate);
  auto d_idx = gr_test::upload_index<It>(plan.idx);
  thrust::device_vector<Et> out(residual.size()), dy(residual.size());
  thrust::device_vector<float> dgate(gate.size());
  hawk_test::poison(out);
  hawk_test::poison(dy);
  hawk_test::poison(dgate);

  gr::ForwardArguments f;
  f.shape = gr_test::shape_of<Et, Gtt, It>(N, D, G);
  f.residual = raw(d_residual);
  f.y = raw(d_y);
  f.gate = raw(d_gate);
  f.idx = raw(d_idx);
  f.out = raw(out);
  gr::BackwardArguments b;
  b.shape = f.shape;
  b.dout = raw(d_dout);
  b.y = raw(d_y);
  b.gate = raw(d_gate);
  b.idx = raw(d_idx);
  b.dy = raw(dy);
  b.dgate = raw(dgate);
  REQUIRE(gr::forward_can_implement(f).ok());
  REQUIRE(gr::backward_can_implement(b).ok());
  thrust::device_vector<unsigned char> workspace(std::max(gr::forward_workspace_size(f), gr::backward_workspace_size(b)));
  REQUIRE(gr::forward(f, raw(workspace), workspace.size(), 0).ok());
  REQUIRE(gr::backward(b, raw(workspace), workspace.size(), 0).ok());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  gr_test::require_within_ulps<Et>(hawk_test::to_host(out), ref.out, 1.0, "out");
  gr_test::require_within_ulps<Et>(hawk_test::to_host(dy), ref.dy, 1.0, "dy");
  gr_test::require_dgate_close<float>(hawk_test::to_host(dgate), ref, D);
}

}  // namespace

TEST_CASE("default dispatch: every runtime dtype combination runs and matches float64", "[gate_residual][gpu][dispatch]") {
  check_dispatch_combination<float, float, std::int32_t>();
  check_dispatch_combination<float, __nv_bfloat16, std::int64_t>();
  check_dispatch_combination<__half, float, std::int64_t>();
  check_dispatch_combination<__half, __nv_bfloat16, std::int32_t>();
  check_dispatch_combination<__nv_bfloat16, float, std::int32_t>();
  check_dispatch_combination<__nv_bfloat16, __nv_bfloat16, std::int64_t>();
}

TEST_CASE("default dispatch: a gate dtype hawk does not take is refused", "[gate_residual][gpu][dispatch]") {
  Fixture f;
  auto a = f.forward_args();
  a.shape.gate_dtype = hawk::DType::kFloat16;
  CHECK(gr::forward(a, raw(f.workspace), f.workspace.size(), 0).code() == StatusCode::kUnsupportedConfiguration);
  auto b = f.backward_args();
  b.shape.gate_dtype = hawk::DType::kFloat16;
  CHECK(gr::backward(b, raw(f.workspace), f.workspace.size(), 0).code() == StatusCode::kUnsupportedConfiguration);
  CHECK(f.outputs_untouched());
}
