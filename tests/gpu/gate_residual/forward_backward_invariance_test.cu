// Batch invariance of the gate-residual forward and row gradients, bitwise, following the seed-003 protocol:
// every row alone vs in its batch (batches of 64, 257, 2048 samples), a full batch of 131072 rows vs
// sub-batches of 1, 7, 4097, 32768 and 65536 rows, the batch-size sweep 1 ... 2048 with probe rows, a batch
// permutation, and a negative control showing that the comparison does fail on a one-ulp change.
#include <cstdlib>
#include <vector>

#include "support.cuh"

using hawk_test::raw;

namespace {

using E = __nv_bfloat16;
using Gt = __nv_bfloat16;
using I = std::int64_t;

//! A pool of rows on the device with everything forward and backward read, and arbitrary idx over G rows.
struct Pool {
  std::int64_t N, D, G;
  thrust::device_vector<E> residual, y, dout;
  thrust::device_vector<Gt> gate;
  std::vector<std::int64_t> idx_host;
  thrust::device_vector<I> idx;

  Pool(std::int64_t rows, std::int64_t dim, std::int64_t gate_rows) : N(rows), D(dim), G(gate_rows) {
    const std::size_t n = static_cast<std::size_t>(N * D);
    residual.resize(n);
    y.resize(n);
    dout.resize(n);
    gate.resize(static_cast<std::size_t>(G * D));
    gr_test::fill_uniform(residual, -2.0f, 2.0f, hawk_test::fresh_seed());
    gr_test::fill_uniform(y, -2.0f, 2.0f, hawk_test::fresh_seed());
    gr_test::fill_uniform(dout, -2.0f, 2.0f, hawk_test::fresh_seed());
    gr_test::fill_uniform(gate, -1.5f, 1.5f, hawk_test::fresh_seed());
    std::mt19937_64 rng(hawk_test::fresh_seed());
    std::uniform_int_distribution<std::int64_t> pick(0, G - 1);
    idx_host.resize(static_cast<std::size_t>(N));
    for (auto& i : idx_host) i = pick(rng);
    idx = gr_test::upload_index<I>(idx_host);
  }
  std::size_t row_bytes() const { return static_cast<std::size_t>(D) * sizeof(E); }
};

//! out and dy of rows [first, first + count) of the pool, computed as one batch, written at the same rows of
//! `out` and `dy` (dgate goes to a scratch buffer: it is not a row quantity).
struct RowOutputs {
  thrust::device_vector<E> out, dy;
  thrust::device_vector<float> dgate_scratch;
  thrust::device_vector<unsigned char> workspace;
  explicit RowOutputs(const Pool& pool)
      : out(pool.residual.size()), dy(pool.residual.size()), dgate_scratch(static_cast<std::size_t>(pool.G * pool.D)) {
    hawk_test::poison(out);
    hawk_test::poison(dy);
  }
};

void run_rows(Pool& pool, RowOutputs& o, std::int64_t first, std::int64_t count, bool validate = false) {
  const auto shape = gr_test::shape_of<E, Gt, I>(count, pool.D, pool.G, validate);
  const std::int64_t offset = first * pool.D;
  hawk::Status status = gr_test::forward<E, Gt, I>(shape, raw(pool.residual) + offset, raw(pool.y) + offset,
                                                   raw(pool.gate), raw(pool.idx) + first, raw(o.out) + offset,
                                                   o.workspace);
  INFO(status.to_string());
  REQUIRE(status.ok());
  status = gr_test::backward<E, Gt, I>(shape, gr_test::gr::IndexLayout::kArbitrary, 0, raw(pool.dout) + offset,
                                       raw(pool.y) + offset, raw(pool.gate), raw(pool.idx) + first,
                                       raw(o.dy) + offset, raw(o.dgate_scratch), gr_test::gr::DgateType::kFloat32,
                                       o.workspace);
  INFO(status.to_string());
  REQUIRE(status.ok());
}

//! Row r entirely alone: one row, one gate row (its own), idx 0.
void run_row_alone(Pool& pool, RowOutputs& o, const thrust::device_vector<I>& zero_index, std::int64_t r) {
  const auto shape = gr_test::shape_of<E, Gt, I>(1, pool.D, 1, false);
  const std::int64_t offset = r * pool.D;
  const Gt* own_gate = raw(pool.gate) + pool.idx_host[r] * pool.D;
  REQUIRE(gr_test::forward<E, Gt, I>(shape, raw(pool.residual) + offset, raw(pool.y) + offset, own_gate,
                                     raw(zero_index), raw(o.out) + offset, o.workspace)
              .ok());
  REQUIRE(gr_test::backward<E, Gt, I>(shape, gr_test::gr::IndexLayout::kUniform, 1, raw(pool.dout) + offset,
                                      raw(pool.y) + offset, own_gate, raw(zero_index), raw(o.dy) + offset,
                                      raw(o.dgate_scratch), gr_test::gr::DgateType::kFloat32, o.workspace)
              .ok());
}

struct Bytes {
  std::vector<unsigned char> out, dy;
};
Bytes bytes_of(const RowOutputs& o) {
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  return Bytes{hawk_test::bytes_of(o.out), hawk_test::bytes_of(o.dy)};
}

//! Rows in `rows` whose out or dy bytes differ.
std::size_t count_differing(const Bytes& a, const Bytes& b, const std::vector<std::int64_t>& rows, std::size_t row_bytes,
                            std::size_t& out_differ, std::size_t& dy_differ) {
  out_differ = dy_differ = 0;
  for (std::int64_t r : rows) {
    const std::size_t at = static_cast<std::size_t>(r) * row_bytes;
    out_differ += std::memcmp(a.out.data() + at, b.out.data() + at, row_bytes) != 0;
    dy_differ += std::memcmp(a.dy.data() + at, b.dy.data() + at, row_bytes) != 0;
  }
  return out_differ + dy_differ;
}

}  // namespace

TEST_CASE("every row's output and row gradient are the same alone as in batches of 64, 257 and 2048 samples",
          "[gate_residual][gpu][invariance]") {
  // Under compute-sanitizer every row of the 2048-sample batch run alone (6144 launches) takes minutes.
  const std::vector<std::int64_t> batches = gr_test::sanitizing() ? std::vector<std::int64_t>{64, 257}
                                                                   : std::vector<std::int64_t>{64, 257, 2048};
  for (std::int64_t batch : batches) {
    const std::int64_t rows = 3 * batch;  // three modality rows per sample, as in the seed
    Pool pool(rows, 3072, batch);
    RowOutputs in_batch(pool), alone(pool);
    run_rows(pool, in_batch, 0, rows, true);
    const thrust::device_vector<I> zero_index(1, 0);
    for (std::int64_t r = 0; r < rows; ++r) run_row_alone(pool, alone, zero_index, r);
    std::vector<std::int64_t> all(static_cast<std::size_t>(rows));
    std::iota(all.begin(), all.end(), 0);
    std::size_t out_differ = 0, dy_differ = 0;
    count_differing(bytes_of(in_batch), bytes_of(alone), all, pool.row_bytes(), out_differ, dy_differ);
    INFO("batch " << batch << ": " << rows << " rows, fwd_differ " << out_differ << ", rowgrad_differ " << dy_differ);
    CHECK(out_differ == 0);
    CHECK(dy_differ == 0);
  }
}

TEST_CASE("a full batch of 131072 rows gives the bits of sub-batches of 1, 7, 4097, 32768 and 65536 rows",
          "[gate_residual][gpu][invariance]") {
  // Under compute-sanitizer (HAWK_SANITIZE, tests/run_sanitizer.py) a launch over all rows takes seconds: the
  // same protocol on 16384 rows, with sub-batches of 1, 7, 4097 and 8192 rows.
  const bool sanitizing = std::getenv("HAWK_SANITIZE") != nullptr;
  const std::int64_t N = sanitizing ? 16384 : 131072;
  const std::vector<std::int64_t> sizes =
      sanitizing ? std::vector<std::int64_t>{1, 7, 4097, 8192} : std::vector<std::int64_t>{1, 7, 4097, 32768, 65536};
  const int random_starts = sanitizing ? 40 : 400;
  Pool pool(N, 1152, 64);
  RowOutputs full(pool);
  run_rows(pool, full, 0, N, true);
  const Bytes full_bytes = bytes_of(full);
  std::mt19937_64 rng(hawk_test::fresh_seed());
  std::size_t sub_batches = 0;
  for (std::int64_t size : sizes) {
    RowOutputs pieces(pool);
    std::vector<std::int64_t> covered;
    auto run_piece = [&](std::int64_t first) {
      const std::int64_t count = std::min(size, N - first);
      run_rows(pool, pieces, first, count);
      for (std::int64_t r = first; r < first + count; ++r) covered.push_back(r);
      ++sub_batches;
    };
    if (size <= 7) {
      // All 131072 (or 18725) launches would take long: the first, the last and 400 random sub-batches.
      std::uniform_int_distribution<std::int64_t> pick(0, (N - 1) / size);
      std::vector<std::int64_t> starts = {0, ((N - 1) / size) * size};
      for (int k = 0; k < random_starts; ++k) starts.push_back(pick(rng) * size);
      std::sort(starts.begin(), starts.end());
      starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
      for (std::int64_t first : starts) run_piece(first);
    } else {
      for (std::int64_t first = 0; first < N; first += size) run_piece(first);
    }
    std::size_t out_differ = 0, dy_differ = 0;
    count_differing(full_bytes, bytes_of(pieces), covered, pool.row_bytes(), out_differ, dy_differ);
    INFO("sub-batch size " << size << ": " << covered.size() << " rows compared, fwd_differ " << out_differ
                           << ", rowgrad_differ " << dy_differ);
    CHECK(out_differ == 0);
    CHECK(dy_differ == 0);
  }
  INFO(sub_batches << " sub-batches");
  CHECK(sub_batches > 0);
}

TEST_CASE("probe rows are the same at every batch size of the sweep 1 ... 2048", "[gate_residual][gpu][invariance]") {
  const std::vector<std::int64_t> sizes = {1,  2,  3,  4,   5,   6,   7,   8,   9,   15,   16,   17,   31,   32,  33,   63,
                                           64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025, 2047, 2048};
  const std::vector<std::int64_t> probes = {0, 259, 515, 771, 1027, 1283, 1539, 2047};
  Pool pool(2048, 3072, 64);
  RowOutputs largest(pool);
  run_rows(pool, largest, 0, 2048, true);
  const Bytes want = bytes_of(largest);
  std::size_t comparisons = 0, differ = 0;
  for (std::int64_t size : sizes) {
    RowOutputs o(pool);
    run_rows(pool, o, 0, size);
    const Bytes got = bytes_of(o);
    std::vector<std::int64_t> rows;
    for (std::int64_t p : probes)
      if (p < size) rows.push_back(p);
    std::size_t out_differ = 0, dy_differ = 0;
    differ += count_differing(want, got, rows, pool.row_bytes(), out_differ, dy_differ);
    comparisons += 2 * rows.size();
    if (out_differ + dy_differ != 0) FAIL_CHECK("batch size " << size << " changed a probe row");
  }
  INFO(comparisons << " comparisons");
  CHECK(comparisons == 2 * 57);  // (size, probe row < size) pairs, forward and row gradient
  CHECK(differ == 0);
}

TEST_CASE("permuting the batch permutes the outputs and row gradients, bit for bit",
          "[gate_residual][gpu][invariance]") {
  const std::int64_t N = 4097, D = 3072;
  Pool pool(N, D, 97);
  RowOutputs original(pool);
  run_rows(pool, original, 0, N, true);

  std::vector<std::int64_t> perm(static_cast<std::size_t>(N));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(hawk_test::fresh_seed()));
  // Permuted pool: row i of it is row perm[i] of the original.
  auto permute = [&](const thrust::device_vector<E>& source) {
    thrust::device_vector<E> target(source.size());
    for (std::int64_t i = 0; i < N; ++i)
      HAWK_TEST_CUDA(cudaMemcpyAsync(raw(target) + i * D, raw(source) + perm[i] * D, pool.row_bytes(),
                                     cudaMemcpyDeviceToDevice));
    return target;
  };
  Pool permuted = pool;
  permuted.residual = permute(pool.residual);
  permuted.y = permute(pool.y);
  permuted.dout = permute(pool.dout);
  for (std::int64_t i = 0; i < N; ++i) permuted.idx_host[i] = pool.idx_host[perm[i]];
  permuted.idx = gr_test::upload_index<I>(permuted.idx_host);
  RowOutputs shuffled(permuted);
  run_rows(permuted, shuffled, 0, N, true);

  const Bytes a = bytes_of(original), b = bytes_of(shuffled);
  std::size_t out_differ = 0, dy_differ = 0;
  const std::size_t rb = pool.row_bytes();
  for (std::int64_t i = 0; i < N; ++i) {
    out_differ += std::memcmp(b.out.data() + i * rb, a.out.data() + perm[i] * rb, rb) != 0;
    dy_differ += std::memcmp(b.dy.data() + i * rb, a.dy.data() + perm[i] * rb, rb) != 0;
  }
  CHECK(out_differ == 0);
  CHECK(dy_differ == 0);
}

TEST_CASE("negative control: a change in one input element shows up in exactly that row",
          "[gate_residual][gpu][invariance][negative_control]") {
  // The memcmp comparisons above must be able to fail: change one element of y and of dout in a neighbour row
  // of a probe row and check that the same comparison then reports exactly that row, and not the probe row.
  const std::int64_t N = 2048, D = 3072;
  Pool pool(N, D, 64);
  RowOutputs before(pool);
  run_rows(pool, before, 0, N, true);
  const Bytes a = bytes_of(before);

  const std::int64_t neighbour = 260;  // next to probe row 259
  // A column where |gate| >= 0.5, so that adding 1 to y or dout moves out and dy by many ulps.
  const std::vector<double> gate_row = hawk_test::to_host(thrust::device_vector<Gt>(
      pool.gate.begin() + pool.idx_host[neighbour] * D, pool.gate.begin() + (pool.idx_host[neighbour] + 1) * D));
  std::int64_t column = 0;
  while (column < D - 1 && std::fabs(gate_row[column]) < 0.5) ++column;
  REQUIRE(std::fabs(gate_row[column]) >= 0.5);
  auto add_one = [&](thrust::device_vector<E>& v) {
    const E value = v[neighbour * D + column];
    v[neighbour * D + column] = hawk::from_float<E>(hawk::to_float(value) + 1.0f);
  };
  add_one(pool.y);     // out depends on y (dy does not)
  add_one(pool.dout);  // dy depends on dout
  RowOutputs after(pool);
  run_rows(pool, after, 0, N, true);
  const Bytes b = bytes_of(after);

  CHECK(gr_test::differing_rows(a.out, b.out, pool.row_bytes()) == std::vector<std::int64_t>{neighbour});
  CHECK(gr_test::differing_rows(a.dy, b.dy, pool.row_bytes()) == std::vector<std::int64_t>{neighbour});
  std::size_t out_differ = 0, dy_differ = 0;
  CHECK(count_differing(a, b, {neighbour}, pool.row_bytes(), out_differ, dy_differ) == 2);
  CHECK(count_differing(a, b, {259}, pool.row_bytes(), out_differ, dy_differ) == 0);
}
