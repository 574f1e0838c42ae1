// dgate determinism, bitwise: repeatable over 10 runs for every layout path, identical across the three
// layout descriptions of the same idx, identical when the batch is split in pieces that keep each group
// whole, identical inside a CUDA graph; and negative controls showing that these comparisons can fail.
#include "support.cuh"

using hawk_test::raw;

namespace {

using E = __nv_bfloat16;
using Gt = __nv_bfloat16;
using I = std::int32_t;
namespace gr = hawk::gate_residual;

struct Problem {
  std::int64_t N, D, G;
  gr_test::IndexPlan plan;
  thrust::device_vector<E> dout, y;
  thrust::device_vector<Gt> gate;
  thrust::device_vector<I> idx;
  thrust::device_vector<unsigned char> workspace;

  Problem(gr::IndexLayout layout, std::int64_t rows, std::int64_t dim, std::int64_t rows_per_group)
      : N(rows), D(dim) {
    plan = gr_test::make_index_plan(layout, N, rows_per_group, gr::kDefaultChunkRows, hawk_test::fresh_seed());
    G = plan.num_gate_rows;
    dout.resize(static_cast<std::size_t>(N * D));
    y.resize(dout.size());
    gate.resize(static_cast<std::size_t>(G * D));
    gr_test::fill_uniform(dout, -2.0f, 2.0f, hawk_test::fresh_seed());
    gr_test::fill_uniform(y, -2.0f, 2.0f, hawk_test::fresh_seed());
    gr_test::fill_uniform(gate, -1.5f, 1.5f, hawk_test::fresh_seed());
    idx = gr_test::upload_index<I>(plan.idx);
  }
};

//! dgate bytes (fp32, or gate type) of one backward run described with `layout`.
template <class Tile = gr::DefaultBackwardTile>
std::vector<unsigned char> dgate_bytes(Problem& p, gr::IndexLayout layout, gr::DgateType type = gr::DgateType::kFloat32) {
  thrust::device_vector<E> dy(p.dout.size());
  thrust::device_vector<float> dgate32(static_cast<std::size_t>(p.G * p.D));
  thrust::device_vector<Gt> dgate16(dgate32.size());
  hawk_test::poison(dgate32);
  hawk_test::poison(dgate16);
  void* dgate = type == gr::DgateType::kFloat32 ? static_cast<void*>(raw(dgate32)) : static_cast<void*>(raw(dgate16));
  const hawk::Status status = gr_test::backward<E, Gt, I, Tile>(gr_test::shape_of<E, Gt, I>(p.N, p.D, p.G), layout,
                                                                p.plan.rows_per_group, raw(p.dout), raw(p.y),
                                                                raw(p.gate), raw(p.idx), raw(dy), dgate, type,
                                                                p.workspace);
  INFO(status.to_string());
  REQUIRE(status.ok());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  return type == gr::DgateType::kFloat32 ? hawk_test::bytes_of(dgate32) : hawk_test::bytes_of(dgate16);
}

}  // namespace

TEST_CASE("dgate is bitwise identical over 10 runs, for every index layout", "[gate_residual][gpu][determinism]") {
  for (gr::IndexLayout layout :
       {gr::IndexLayout::kUniform, gr::IndexLayout::kContiguousSegments, gr::IndexLayout::kArbitrary}) {
    INFO("layout " << gr::to_string(layout));
    // Under compute-sanitizer (HAWK_SANITIZE) a smaller problem and 3 runs: the sanitizer looks for hazards, which
    // repeat in every run, and the full size takes minutes there.
    const bool sanitizing = gr_test::sanitizing();
    Problem p(layout, sanitizing ? 4096 : 32768, 1152, 256);
    const auto first = dgate_bytes(p, layout);
    for (int run = 1; run < (sanitizing ? 3 : 10); ++run) REQUIRE(gr_test::same_bytes(dgate_bytes(p, layout), first));
  }
}

TEST_CASE("uniform, contiguous-segment and arbitrary descriptions of the same idx give the same dgate bits",
          "[gate_residual][gpu][determinism]") {
  for (std::int64_t S : {3, 32, 33, 100, 256}) {  // one chunk, exactly one full chunk, two chunks, several
    INFO("rows per group " << S);
    Problem p(gr::IndexLayout::kUniform, 8191, 1152, S);
    for (gr::DgateType type : {gr::DgateType::kFloat32, gr::DgateType::kGateType}) {
      const auto uniform = dgate_bytes(p, gr::IndexLayout::kUniform, type);
      CHECK(gr_test::same_bytes(dgate_bytes(p, gr::IndexLayout::kContiguousSegments, type), uniform));
      CHECK(gr_test::same_bytes(dgate_bytes(p, gr::IndexLayout::kArbitrary, type), uniform));
    }
  }
  Problem segments(gr::IndexLayout::kContiguousSegments, 8191, 1152, 0);
  CHECK(gr_test::same_bytes(dgate_bytes(segments, gr::IndexLayout::kArbitrary),
                            dgate_bytes(segments, gr::IndexLayout::kContiguousSegments)));
}

TEST_CASE("dgate is the same when the batch is split in pieces that keep each group whole",
          "[gate_residual][gpu][determinism]") {
  const std::int64_t D = 1152;
  SECTION("uniform: pieces at multiples of S, each with its own slice of gate and dgate") {
    const std::int64_t S = 100;
    Problem p(gr::IndexLayout::kUniform, 10000, D, S);
    const auto whole = dgate_bytes(p, gr::IndexLayout::kUniform);
    thrust::device_vector<float> assembled(static_cast<std::size_t>(p.G * D));
    hawk_test::poison(assembled);
    thrust::device_vector<E> dy(p.dout.size());
    const std::int64_t cuts[] = {0, 300, 5000, 5100, 10000};
    for (int k = 0; k + 1 < 5; ++k) {
      const std::int64_t first = cuts[k], rows = cuts[k + 1] - cuts[k];
      const std::int64_t group0 = first / S, groups = (rows + S - 1) / S;
      // idx of the piece counts from its own first group: the pool's idx[0 .. rows) is exactly r / S.
      REQUIRE(gr_test::backward<E, Gt, I>(gr_test::shape_of<E, Gt, I>(rows, D, groups), gr::IndexLayout::kUniform, S,
                                          raw(p.dout) + first * D, raw(p.y) + first * D, raw(p.gate) + group0 * D,
                                          raw(p.idx), raw(dy) + first * D, raw(assembled) + group0 * D,
                                          gr::DgateType::kFloat32, p.workspace)
                  .ok());
    }
    // The plan's G has 3 unused rows at the end, zero in the whole run; the pieces never wrote them.
    HAWK_TEST_CUDA(cudaMemset(raw(assembled) + 10000 / S * D, 0, 3 * D * sizeof(float)));
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    CHECK(gr_test::same_bytes(hawk_test::bytes_of(assembled), whole));
  }
  SECTION("contiguous segments: pieces at run boundaries") {
    Problem p(gr::IndexLayout::kContiguousSegments, 10000, D, 0);
    const auto whole = dgate_bytes(p, gr::IndexLayout::kContiguousSegments);
    std::vector<std::int64_t> cuts = {0};
    for (std::int64_t r = 1; r < p.N; ++r)
      if (p.plan.idx[r] != p.plan.idx[r - 1] && r - cuts.back() >= 2500) cuts.push_back(r);
    cuts.push_back(p.N);
    REQUIRE(cuts.size() >= 3);
    thrust::device_vector<E> dy(p.dout.size());
    thrust::device_vector<float> piece_dgate(static_cast<std::size_t>(p.G * D));
    const std::size_t row_bytes = static_cast<std::size_t>(D) * sizeof(float);
    std::size_t groups_compared = 0, groups_differ = 0;
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      const std::int64_t first = cuts[k], rows = cuts[k + 1] - cuts[k];
      REQUIRE(gr_test::backward<E, Gt, I>(gr_test::shape_of<E, Gt, I>(rows, D, p.G),
                                          gr::IndexLayout::kContiguousSegments, 0, raw(p.dout) + first * D,
                                          raw(p.y) + first * D, raw(p.gate), raw(p.idx) + first, raw(dy) + first * D,
                                          raw(piece_dgate), gr::DgateType::kFloat32, p.workspace)
                  .ok());
      HAWK_TEST_CUDA(cudaDeviceSynchronize());
      const auto piece = hawk_test::bytes_of(piece_dgate);
      for (std::int64_t r = first; r < first + rows; ++r) {
        if (r > first && p.plan.idx[r] == p.plan.idx[r - 1]) continue;
        const std::size_t at = static_cast<std::size_t>(p.plan.idx[r]) * row_bytes;
        ++groups_compared;
        groups_differ += std::memcmp(piece.data() + at, whole.data() + at, row_bytes) != 0;
      }
    }
    INFO(groups_compared << " groups compared over " << cuts.size() - 1 << " pieces");
    CHECK(groups_differ == 0);
  }
  SECTION("arbitrary: the rows of half of the groups gathered in order into a batch of their own") {
    Problem p(gr::IndexLayout::kArbitrary, 10000, D, 0);
    const auto whole = dgate_bytes(p, gr::IndexLayout::kArbitrary);
    std::vector<std::int64_t> rows;
    for (std::int64_t r = 0; r < p.N; ++r)
      if (p.plan.idx[r] % 2 == 0) rows.push_back(r);
    const std::int64_t n = static_cast<std::int64_t>(rows.size());
    thrust::device_vector<E> dout(static_cast<std::size_t>(n * D)), y(dout.size()), dy(dout.size());
    std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      HAWK_TEST_CUDA(cudaMemcpyAsync(raw(dout) + i * D, raw(p.dout) + rows[i] * D, D * sizeof(E), cudaMemcpyDeviceToDevice));
      HAWK_TEST_CUDA(cudaMemcpyAsync(raw(y) + i * D, raw(p.y) + rows[i] * D, D * sizeof(E), cudaMemcpyDeviceToDevice));
      idx[i] = p.plan.idx[rows[i]];
    }
    auto d_idx = gr_test::upload_index<I>(idx);
    thrust::device_vector<float> dgate(static_cast<std::size_t>(p.G * D));
    REQUIRE(gr_test::backward<E, Gt, I>(gr_test::shape_of<E, Gt, I>(n, D, p.G), gr::IndexLayout::kArbitrary, 0,
                                        raw(dout), raw(y), raw(p.gate), raw(d_idx), raw(dy), raw(dgate),
                                        gr::DgateType::kFloat32, p.workspace)
                .ok());
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    const auto half = hawk_test::bytes_of(dgate);
    const std::size_t row_bytes = static_cast<std::size_t>(D) * sizeof(float);
    std::size_t even_differ = 0, odd_nonzero = 0;
    const std::vector<double> half_values = hawk_test::to_host(dgate);
    for (std::int64_t g = 0; g < p.G; ++g) {
      if (g % 2 == 0) {
        even_differ += std::memcmp(half.data() + g * row_bytes, whole.data() + g * row_bytes, row_bytes) != 0;
      } else {
        for (std::int64_t c = 0; c < D; ++c) odd_nonzero += half_values[g * D + c] != 0.0;
      }
    }
    CHECK(even_differ == 0);
    CHECK(odd_nonzero == 0);
  }
}

TEST_CASE("forward and backward inside a CUDA graph (validate_indices off) give the direct run's bits",
          "[gate_residual][gpu][determinism]") {
  const std::int64_t N = 4097, D = 3072;
  for (gr::IndexLayout layout : {gr::IndexLayout::kUniform, gr::IndexLayout::kArbitrary}) {
    INFO("layout " << gr::to_string(layout));
    Problem p(layout, N, D, 3);
    thrust::device_vector<E> residual(p.dout.size()), out(p.dout.size()), dy(p.dout.size());
    gr_test::fill_uniform(residual, -2.0f, 2.0f, hawk_test::fresh_seed());
    thrust::device_vector<float> dgate(static_cast<std::size_t>(p.G * D));
    gr::ForwardArguments fwd;
    fwd.shape = gr_test::shape_of<E, Gt, I>(N, D, p.G, false);
    fwd.residual = raw(residual);
    fwd.y = raw(p.y);
    fwd.gate = raw(p.gate);
    fwd.idx = raw(p.idx);
    fwd.out = raw(out);
    gr::BackwardArguments bwd;
    bwd.shape = fwd.shape;
    bwd.layout = layout;
    bwd.rows_per_group = p.plan.rows_per_group;
    bwd.dout = raw(p.dout);
    bwd.y = raw(p.y);
    bwd.gate = raw(p.gate);
    bwd.idx = raw(p.idx);
    bwd.dy = raw(dy);
    bwd.dgate = raw(dgate);
    using F = gr::Forward<E, Gt, I>;
    using B = gr::Backward<E, Gt, I>;
    thrust::device_vector<unsigned char> workspace(std::max(F::workspace_size(fwd), B::workspace_size(bwd)));
    cudaStream_t stream;
    HAWK_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // The fills above ran on the legacy default stream, which a non-blocking stream does not wait for: finish
    // them first. (Without this, racecheck's serialisation let a late fill land after the kernels.)
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    REQUIRE(F::run(fwd, raw(workspace), workspace.size(), stream).ok());
    REQUIRE(B::run(bwd, raw(workspace), workspace.size(), stream).ok());
    HAWK_TEST_CUDA(cudaStreamSynchronize(stream));
    const auto out_direct = hawk_test::bytes_of(out), dy_direct = hawk_test::bytes_of(dy),
               dgate_direct = hawk_test::bytes_of(dgate);
    hawk_test::poison(out);
    hawk_test::poison(dy);
    hawk_test::poison(dgate);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());  // the poison (legacy default stream) lands before the graph runs

    cudaGraph_t graph;
    HAWK_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const hawk::Status fs = F::run(fwd, raw(workspace), workspace.size(), stream);
    const hawk::Status bs = B::run(bwd, raw(workspace), workspace.size(), stream);
    HAWK_TEST_CUDA(cudaStreamEndCapture(stream, &graph));
    INFO(fs.to_string() << " / " << bs.to_string());
    REQUIRE(fs.ok());
    REQUIRE(bs.ok());
    cudaGraphExec_t exec;
    HAWK_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    HAWK_TEST_CUDA(cudaGraphLaunch(exec, stream));
    HAWK_TEST_CUDA(cudaStreamSynchronize(stream));
    CHECK(gr_test::same_bytes(hawk_test::bytes_of(out), out_direct));
    CHECK(gr_test::same_bytes(hawk_test::bytes_of(dy), dy_direct));
    CHECK(gr_test::same_bytes(hawk_test::bytes_of(dgate), dgate_direct));
    HAWK_TEST_CUDA(cudaGraphExecDestroy(exec));
    HAWK_TEST_CUDA(cudaGraphDestroy(graph));
    HAWK_TEST_CUDA(cudaStreamDestroy(stream));
  }
}

TEST_CASE("negative controls: another chunk size, or one changed dout element, changes the dgate bits",
          "[gate_residual][gpu][determinism][negative_control]") {
  // The bitwise comparisons above must be able to fail. A configuration summing in chunks of 16 rows instead of
  // 32 reassociates the sums of groups longer than 16 rows: some bits differ (the comparison sees it).
  Problem p(gr::IndexLayout::kUniform, 8191, 1152, 100);
  const auto default_chunks = dgate_bytes(p, gr::IndexLayout::kUniform);
  const auto chunks_of_16 = dgate_bytes<gr::BackwardTile<128, 16, 4>>(p, gr::IndexLayout::kUniform);
  CHECK_FALSE(gr_test::same_bytes(chunks_of_16, default_chunks));
  // Same chunking, every layout: equal again (the difference above is the chunking, not noise).
  CHECK(gr_test::same_bytes(dgate_bytes<gr::BackwardTile<128, 16, 4>>(p, gr::IndexLayout::kArbitrary), chunks_of_16));

  // One dout element changed: exactly that (group, column) of dgate changes.
  const std::int64_t row = 4321, column = 555, D = 1152;
  const E value = p.dout[row * D + column];
  p.dout[row * D + column] = hawk::from_float<E>(hawk::to_float(value) + 1.0f);
  const auto changed = dgate_bytes(p, gr::IndexLayout::kUniform);
  std::vector<std::size_t> differing;
  for (std::size_t i = 0; i < changed.size() / sizeof(float); ++i)
    if (std::memcmp(changed.data() + i * 4, default_chunks.data() + i * 4, 4) != 0) differing.push_back(i);
  REQUIRE(differing.size() == 1);
  CHECK(differing[0] == static_cast<std::size_t>((row / 100) * D + column));
}
