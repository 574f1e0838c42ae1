// Device checks of idx beyond single bad values (core/device_checks.cuh):
// - a false kContiguousSegments claim that overflows the chunk table's bound stays inside the workspace (guard
//   bytes right after workspace_size() bytes stay untouched) and writes nothing, validated or not;
// - a fuzz of random idx (in range, out of range, negative, false layout claims): whenever the verdict is bad
//   every output is still poisoned, whenever it is good the results match float64; with validation off, the
//   documented results (forward: rows with bad idx skipped; backward: kUniform computes r / S, the table
//   layouts refuse as when validated);
// - a CUDA graph captured with validation on re-checks idx at every replay: idx overwritten in place between
//   replays gives untouched outputs and a verdict naming the argument, good idx again gives the right results.
#include <limits>
#include <sstream>

#include "bad_input_support.cuh"

using hawk_test::raw;

namespace {

using namespace gr_bad;

template <class T>
bool untouched(const thrust::device_vector<T>& v) {
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  return all_bytes_are(hawk_test::bytes_of(v), 0xFF);
}

constexpr unsigned char kGuardByte = 0x5A;

//! A workspace of `bytes` followed by `guard` bytes, all set to kGuardByte: what a call writes past its
//! workspace shows up in the guard.
struct GuardedWorkspace {
  std::size_t bytes, guard;
  thrust::device_vector<unsigned char> buffer;
  GuardedWorkspace(std::size_t workspace_bytes, std::size_t guard_bytes)
      : bytes(workspace_bytes), guard(guard_bytes), buffer(workspace_bytes + guard_bytes) {
    HAWK_TEST_CUDA(cudaMemset(raw(buffer), kGuardByte, buffer.size()));
  }
  void* data() { return raw(buffer); }
  bool guard_untouched() {
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    const std::vector<unsigned char> all = hawk_test::bytes_of(buffer);
    return std::all_of(all.begin() + static_cast<std::ptrdiff_t>(bytes), all.end(),
                       [](unsigned char b) { return b == kGuardByte; });
  }
};

//! Random inputs for N rows, G gate rows, and their device copies.
struct Inputs {
  std::vector<double> residual, y, dout, gate;
  thrust::device_vector<E> d_residual, d_y, d_dout;
  thrust::device_vector<Gt> d_gate;
  Inputs(std::int64_t N, std::int64_t D, std::int64_t G) {
    const std::size_t n = static_cast<std::size_t>(N * D);
    residual = gr_test::random_values<E>(n, -2.0, 2.0, hawk_test::fresh_seed());
    y = gr_test::random_values<E>(n, -2.0, 2.0, hawk_test::fresh_seed());
    dout = gr_test::random_values<E>(n, -2.0, 2.0, hawk_test::fresh_seed());
    gate = gr_test::random_values<Gt>(static_cast<std::size_t>(G * D), -1.5, 1.5, hawk_test::fresh_seed());
    d_residual = gr_test::upload<E>(residual);
    d_y = gr_test::upload<E>(y);
    d_dout = gr_test::upload<E>(dout);
    d_gate = gr_test::upload<Gt>(gate);
  }
  gr_test::Reference reference(const std::vector<std::int64_t>& idx, std::int64_t N, std::int64_t D,
                               std::int64_t G) const {
    gr_test::IndexPlan plan;
    plan.num_gate_rows = G;
    plan.idx = idx;
    return gr_test::reference(residual, y, gate, dout, plan, N, D);
  }
};

//! The outputs of one forward and one backward, poisoned.
struct Outputs {
  thrust::device_vector<E> out, dy, dres;
  thrust::device_vector<float> dgate;
  Outputs(std::int64_t N, std::int64_t D, std::int64_t G)
      : out(static_cast<std::size_t>(N * D)), dy(out.size()), dres(out.size()),
        dgate(static_cast<std::size_t>(G * D)) {
    poison();
  }
  void poison() {
    hawk_test::poison(out);
    hawk_test::poison(dy);
    hawk_test::poison(dres);
    hawk_test::poison(dgate);
  }
  bool backward_untouched() { return untouched(dy) && untouched(dres) && untouched(dgate); }
  bool all_untouched() { return untouched(out) && backward_untouched(); }
};

template <class Index>
gr::ForwardArguments forward_args(Inputs& in, const thrust::device_vector<Index>& idx, Outputs& o, std::int64_t N,
                                  std::int64_t D, std::int64_t G, gr::IndexLayout layout, std::int64_t S,
                                  bool validate) {
  gr::ForwardArguments a;
  a.shape = gr_test::shape_of<E, Gt, Index>(N, D, G, validate);
  a.layout = layout;
  a.rows_per_group = S;
  a.residual = raw(in.d_residual);
  a.y = raw(in.d_y);
  a.gate = raw(in.d_gate);
  a.idx = raw(idx);
  a.out = raw(o.out);
  return a;
}

template <class Index>
gr::BackwardArguments backward_args(Inputs& in, const thrust::device_vector<Index>& idx, Outputs& o, std::int64_t N,
                                    std::int64_t D, std::int64_t G, gr::IndexLayout layout, std::int64_t S,
                                    bool validate) {
  gr::BackwardArguments a;
  a.shape = gr_test::shape_of<E, Gt, Index>(N, D, G, validate);
  a.layout = layout;
  a.rows_per_group = S;
  a.dout = raw(in.d_dout);
  a.y = raw(in.d_y);
  a.gate = raw(in.d_gate);
  a.idx = raw(idx);
  a.dy = raw(o.dy);
  a.dgate = raw(o.dgate);
  a.dresidual = raw(o.dres);
  return a;
}

//! Every backward output against float64 (dres: dout bit for bit).
void require_backward_matches(Outputs& o, const Inputs& in, const gr_test::Reference& ref, std::int64_t D) {
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  gr_test::require_within_ulps<E>(hawk_test::to_host(o.dy), ref.dy, 1.0, "dy");
  gr_test::require_dgate_close<float>(hawk_test::to_host(o.dgate), ref, D);
  REQUIRE(gr_test::same_bytes(hawk_test::bytes_of(o.dres), hawk_test::bytes_of(in.d_dout)));
}

}  // namespace

TEST_CASE("a false kContiguousSegments claim stays inside the workspace and writes nothing, validated or not",
          "[gate_residual][gpu][device_checks]") {
  using F = gr::Forward<E, Gt, I>;
  using B = gr::Backward<E, Gt, I>;
  // idx = r % 32 declared contiguous: every row starts a run, so nearly every row becomes a chunk head, ~N
  // chunks against a table sized for N / 32 + 32. Unbounded, the table writer ran up to 4·N bytes past the
  // start of chunk_slot; with D = 1 the partial sums carved after it are small, so that ran off the end of the
  // workspace into the guard bytes (the negative control this test would have failed). D = 16 takes the
  // 16-byte path.
  const std::int64_t N = gr_test::sanitizing() ? (1 << 12) : (1 << 16), G = 32;
  REQUIRE(gr::detail::table_bounds(N, G, gr::kDefaultChunkRows).chunks < N / 8);
  std::vector<std::int64_t> idx_host(static_cast<std::size_t>(N));
  for (std::int64_t r = 0; r < N; ++r) idx_host[r] = r % G;
  const thrust::device_vector<I> idx = gr_test::upload_index<I>(idx_host);
  constexpr std::size_t kGuardBytes = std::size_t{1} << 20;

  for (std::int64_t D : {std::int64_t{1}, std::int64_t{16}}) {
    Inputs in(N, D, G);
    const gr_test::Reference ref = in.reference(idx_host, N, D, G);
    Outputs o(N, D, G);
    for (bool validate : {true, false}) {
      INFO("N " << N << ", D " << D << ", validate_indices " << validate);
      o.poison();
      gr::BackwardArguments b =
          backward_args(in, idx, o, N, D, G, gr::IndexLayout::kContiguousSegments, 0, validate);
      GuardedWorkspace backward_workspace(B::workspace_size(b), kGuardBytes);
      REQUIRE(backward_workspace.bytes > 0);

      // Deferred (the default): run() queues the work and returns; the verdict waits in the workspace.
      const hawk::Status returned = B::run(b, backward_workspace.data(), backward_workspace.bytes, 0);
      INFO(returned.to_string());
      CHECK(returned.ok());
      const hawk::Status verdict = hawk::read_device_checks(backward_workspace.data(), 0);
      INFO(verdict.to_string());
      CHECK(verdict.code() == StatusCode::kInvalidArgument);
      CHECK(mentions(verdict, "kContiguousSegments"));
      CHECK(backward_workspace.guard_untouched());
      CHECK(o.backward_untouched());

      // Blocking: the same verdict as run()'s Status, the same nothing written.
      b.shape.wait_for_device_checks = true;
      const hawk::Status blocking = B::run(b, backward_workspace.data(), backward_workspace.bytes, 0);
      INFO(blocking.to_string());
      CHECK(blocking.code() == StatusCode::kInvalidArgument);
      CHECK(backward_workspace.guard_untouched());
      CHECK(o.backward_untouched());

      // The forward with the same claim: validated, it refuses it the same way; not validated, it does not look
      // at the layout, and every idx is in range, so every row is computed.
      const gr::ForwardArguments f =
          forward_args(in, idx, o, N, D, G, gr::IndexLayout::kContiguousSegments, 0, validate);
      GuardedWorkspace forward_workspace(F::workspace_size(f), kGuardBytes);
      const hawk::Status forward = F::run(f, forward_workspace.data(), forward_workspace.bytes, 0);
      INFO(forward.to_string());
      CHECK(forward.ok());
      CHECK(forward_workspace.guard_untouched());
      if (validate) {
        const hawk::Status forward_verdict = hawk::read_device_checks(forward_workspace.data(), 0);
        INFO(forward_verdict.to_string());
        CHECK(forward_verdict.code() == StatusCode::kInvalidArgument);
        CHECK(mentions(forward_verdict, "layout"));
        CHECK(untouched(o.out));
      } else {
        CHECK(forward_workspace.bytes == 0);
        HAWK_TEST_CUDA(cudaDeviceSynchronize());
        gr_test::require_within_ulps<E>(hawk_test::to_host(o.out), ref.out, 1.0, "out");
      }
    }
  }
}

namespace {

// ---- fuzz -----------------------------------------------------------------------------------------------------

struct FuzzCase {
  std::int64_t N = 0, D = 0, G = 0;
  gr::IndexLayout layout = gr::IndexLayout::kArbitrary;  //!< the declared layout, true or not
  std::int64_t S = 0;
  std::vector<std::int64_t> idx;
  std::string story;  //!< how idx was made, for failure messages
};

std::int64_t uniform_int(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

//! Values outside [0, G) that an Index can hold.
template <class Index>
std::int64_t bad_value(std::mt19937_64& rng, std::int64_t G) {
  const std::int64_t lowest = std::numeric_limits<Index>::min(), highest = std::numeric_limits<Index>::max();
  switch (uniform_int(rng, 0, 7)) {
    case 0: return G;
    case 1: return G + uniform_int(rng, 1, 1000);
    case 2: return -1;
    case 3: return -uniform_int(rng, 2, 1000);
    case 4: return highest;
    case 5: return lowest;
    case 6: return sizeof(Index) == 8 ? (std::int64_t{1} << 40) : highest - 1;
    default: return sizeof(Index) == 8 ? -(std::int64_t{1} << 40) : lowest + 1;
  }
}

//! Valid idx in one of the three layouts (declared truthfully), then one twist that may break it: values out of
//! range, a declared layout that may not hold, or a row moved to another gate row.
template <class Index>
FuzzCase make_fuzz_case(std::mt19937_64& rng) {
  FuzzCase c;
  std::ostringstream story;
  c.N = uniform_int(rng, 1, 700);
  const std::int64_t dims[] = {1, 5, 8, 64};
  c.D = dims[uniform_int(rng, 0, 3)];
  c.idx.resize(static_cast<std::size_t>(c.N));
  switch (uniform_int(rng, 0, 2)) {
    case 0: {
      c.layout = gr::IndexLayout::kUniform;
      c.S = uniform_int(rng, 1, c.N + 3);
      c.G = (c.N + c.S - 1) / c.S + uniform_int(rng, 0, 2);
      for (std::int64_t r = 0; r < c.N; ++r) c.idx[r] = r / c.S;
      story << "uniform idx (S = " << c.S << ")";
      break;
    }
    case 1: {
      c.layout = gr::IndexLayout::kContiguousSegments;
      std::vector<std::int64_t> lengths;
      for (std::int64_t r = 0; r < c.N;) {
        lengths.push_back(std::min(uniform_int(rng, 1, 3 * gr::kDefaultChunkRows + 5), c.N - r));
        r += lengths.back();
      }
      c.G = static_cast<std::int64_t>(lengths.size()) + uniform_int(rng, 0, 2);
      std::vector<std::int64_t> order(static_cast<std::size_t>(c.G));
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), rng);
      std::int64_t r = 0;
      for (std::size_t run = 0; run < lengths.size(); ++run)
        for (std::int64_t k = 0; k < lengths[run]; ++k) c.idx[r++] = order[run];
      story << "contiguous idx (" << lengths.size() << " runs)";
      break;
    }
    default: {
      c.layout = gr::IndexLayout::kArbitrary;
      c.G = uniform_int(rng, 1, 40);
      for (auto& v : c.idx) v = uniform_int(rng, 0, c.G - 1);
      story << "arbitrary idx";
      break;
    }
  }
  switch (uniform_int(rng, 0, 4)) {
    case 0: story << ", as declared"; break;
    case 1: {
      const std::int64_t count = uniform_int(rng, 1, 3);
      story << ", out of range:";
      for (std::int64_t k = 0; k < count; ++k) {
        const std::int64_t r = uniform_int(rng, 0, c.N - 1);
        c.idx[r] = bad_value<Index>(rng, c.G);
        story << " idx[" << r << "] = " << c.idx[r];
      }
      break;
    }
    case 2:
      c.layout = gr::IndexLayout::kContiguousSegments;
      story << ", declared contiguous";
      break;
    case 3:
      c.layout = gr::IndexLayout::kUniform;
      c.S = (c.N + c.G - 1) / c.G + uniform_int(rng, 0, 2);  // ceil(N / S) <= G: the host accepts it
      story << ", declared uniform with S = " << c.S;
      break;
    default: {
      const std::int64_t r = uniform_int(rng, 0, c.N - 1), from = uniform_int(rng, 0, c.N - 1);
      c.idx[r] = c.idx[from];
      story << ", idx[" << r << "] = idx[" << from << "]";
      break;
    }
  }
  story << ", declared " << gr::to_string(c.layout);
  c.story = story.str();
  return c;
}

bool in_range(const FuzzCase& c, std::int64_t value) { return value >= 0 && value < c.G; }

//! The bits the device checks must raise for the declared layout, worked out on the host.
unsigned expected_bits(const FuzzCase& c) {
  unsigned bits = 0;
  std::vector<char> seen(static_cast<std::size_t>(c.G), 0);
  for (std::int64_t r = 0; r < c.N; ++r) {
    const std::int64_t v = c.idx[r];
    if (!in_range(c, v)) {
      bits |= hawk::kCheckIdxOutOfRange;
      continue;
    }
    if (c.layout == gr::IndexLayout::kUniform && v != r / c.S) bits |= hawk::kCheckIdxNotUniform;
    if (c.layout == gr::IndexLayout::kContiguousSegments && (r == 0 || c.idx[r - 1] != v)) {
      if (seen[v]) bits |= hawk::kCheckIdxNotContiguous;
      seen[v] = 1;
    }
  }
  return bits;
}

//! The backward's chunk table sees out-of-range idx as gate row 0, which may add or hide a second run: with
//! kContiguousSegments and values out of range, only the out-of-range bit is certain.
void require_backward_bits(unsigned got, unsigned expected, const FuzzCase& c) {
  INFO("backward report bits " << got << ", expected " << expected);
  if (c.layout == gr::IndexLayout::kContiguousSegments && (expected & hawk::kCheckIdxOutOfRange) != 0u) {
    REQUIRE((got & hawk::kCheckIdxOutOfRange) != 0u);
    REQUIRE((got & ~(hawk::kCheckIdxOutOfRange | hawk::kCheckIdxNotContiguous)) == 0u);
  } else {
    REQUIRE(got == expected);
  }
}

//! Rows whose idx is in range match float64 within one ulp; the others are still poisoned.
void require_valid_rows(const thrust::device_vector<E>& out, const std::vector<double>& want, const FuzzCase& c) {
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  const std::vector<unsigned char> bytes = hawk_test::bytes_of(out);
  const std::vector<double> got = hawk_test::to_host(out);
  const std::size_t D = static_cast<std::size_t>(c.D);
  std::vector<double> got_valid, want_valid;
  for (std::int64_t r = 0; r < c.N; ++r) {
    const std::size_t first = static_cast<std::size_t>(r) * D;
    if (in_range(c, c.idx[r])) {
      got_valid.insert(got_valid.end(), got.begin() + first, got.begin() + first + D);
      want_valid.insert(want_valid.end(), want.begin() + first, want.begin() + first + D);
    } else {
      INFO("row " << r << " (idx " << c.idx[r] << ") was written");
      REQUIRE(std::all_of(bytes.begin() + first * sizeof(E), bytes.begin() + (first + D) * sizeof(E),
                          [](unsigned char b) { return b == 0xFF; }));
    }
  }
  if (!got_valid.empty()) gr_test::require_within_ulps<E>(got_valid, want_valid, 1.0, "out (rows with valid idx)");
}

template <class Index>
void run_fuzz_case(const FuzzCase& c) {
  using F = gr::Forward<E, Gt, Index>;
  using B = gr::Backward<E, Gt, Index>;
  const std::int64_t N = c.N, D = c.D, G = c.G;
  const unsigned expected = expected_bits(c);
  INFO("N " << N << ", D " << D << ", G " << G << ", int" << 8 * sizeof(Index) << ": " << c.story
            << "; expected bits " << expected);
  Inputs in(N, D, G);
  std::vector<std::int64_t> clamped = c.idx;  // a reference for the rows whose idx is in range
  for (auto& v : clamped) v = in_range(c, v) ? v : 0;
  const gr_test::Reference ref = in.reference(clamped, N, D, G);
  const thrust::device_vector<Index> idx = gr_test::upload_index<Index>(c.idx);
  Outputs o(N, D, G);
  thrust::device_vector<unsigned> reports(2, 0u);  // forward, backward
  thrust::device_vector<unsigned char> forward_workspace, backward_workspace;

  // Validated, deferred, with report words.
  {
    gr::ForwardArguments f = forward_args(in, idx, o, N, D, G, c.layout, c.S, true);
    gr::BackwardArguments b = backward_args(in, idx, o, N, D, G, c.layout, c.S, true);
    f.shape.device_check_report = raw(reports);
    b.shape.device_check_report = raw(reports) + 1;
    forward_workspace.resize(F::workspace_size(f));
    backward_workspace.resize(B::workspace_size(b));
    const hawk::Status forward = F::run(f, raw(forward_workspace), forward_workspace.size(), 0);
    const hawk::Status backward = B::run(b, raw(backward_workspace), backward_workspace.size(), 0);
    INFO("run(): " << forward.to_string() << " / " << backward.to_string());
    REQUIRE(forward.ok());
    REQUIRE(backward.ok());
    const hawk::Status forward_verdict = hawk::read_device_checks(raw(forward_workspace), 0);
    const hawk::Status backward_verdict = hawk::read_device_checks(raw(backward_workspace), 0);
    const hawk::Status want = hawk::device_check_verdict(expected);
    INFO("verdicts: " << forward_verdict.to_string() << " / " << backward_verdict.to_string());
    REQUIRE(forward_verdict.code() == want.code());
    REQUIRE(backward_verdict.code() == want.code());
    REQUIRE(reports[0] == expected);
    require_backward_bits(reports[1], expected, c);
    if (expected != 0u) {
      REQUIRE(o.all_untouched());
    } else {
      HAWK_TEST_CUDA(cudaDeviceSynchronize());
      gr_test::require_within_ulps<E>(hawk_test::to_host(o.out), ref.out, 1.0, "out");
      require_backward_matches(o, in, ref, D);
    }
  }

  // Not validated: the forward skips rows whose idx is out of range; the backward's table layouts still refuse
  // what their table build finds, and kUniform computes the gradients of idx[r] = r / S.
  {
    o.poison();
    HAWK_TEST_CUDA(cudaMemset(raw(reports) + 1, 0, sizeof(unsigned)));
    gr::ForwardArguments f = forward_args(in, idx, o, N, D, G, c.layout, c.S, false);
    gr::BackwardArguments b = backward_args(in, idx, o, N, D, G, c.layout, c.S, false);
    b.shape.device_check_report = raw(reports) + 1;
    REQUIRE(F::workspace_size(f) == 0);
    backward_workspace.resize(B::workspace_size(b));
    REQUIRE(F::run(f, nullptr, 0, 0).ok());
    REQUIRE(B::run(b, raw(backward_workspace), backward_workspace.size(), 0).ok());
    require_valid_rows(o.out, ref.out, c);
    const hawk::Status backward_verdict = hawk::read_device_checks(raw(backward_workspace), 0);
    INFO("backward verdict without validation: " << backward_verdict.to_string());
    if (c.layout == gr::IndexLayout::kUniform) {
      REQUIRE(backward_verdict.ok());
      REQUIRE(reports[1] == 0u);
      std::vector<std::int64_t> uniform(static_cast<std::size_t>(N));
      for (std::int64_t r = 0; r < N; ++r) uniform[r] = r / c.S;
      require_backward_matches(o, in, in.reference(uniform, N, D, G), D);
    } else {
      REQUIRE(backward_verdict.code() == hawk::device_check_verdict(expected).code());
      require_backward_bits(reports[1], expected, c);
      if (expected != 0u) {
        REQUIRE(o.backward_untouched());
      } else {
        require_backward_matches(o, in, ref, D);
      }
    }
  }
}

}  // namespace

TEST_CASE("fuzz: random idx and layout claims; a bad verdict means nothing written, a good one float64 results",
          "[gate_residual][gpu][device_checks]") {
  const int cases = gr_test::sanitizing() ? 24 : 300;
  std::mt19937_64 rng(hawk_test::fresh_seed());
  int bad_verdicts = 0;
  for (int k = 0; k < cases; ++k) {
    INFO("fuzz case " << k);
    if (k % 2 == 0) {
      const FuzzCase c = make_fuzz_case<std::int32_t>(rng);
      bad_verdicts += expected_bits(c) != 0u;
      run_fuzz_case<std::int32_t>(c);
    } else {
      const FuzzCase c = make_fuzz_case<std::int64_t>(rng);
      bad_verdicts += expected_bits(c) != 0u;
      run_fuzz_case<std::int64_t>(c);
    }
  }
  // Both kinds of case were met (the twists make about half the cases bad).
  CHECK(bad_verdicts > 0);
  CHECK(bad_verdicts < cases);
}

TEST_CASE("a CUDA graph captured with validation on re-checks idx at every replay",
          "[gate_residual][gpu][device_checks]") {
  using F = gr::Forward<E, Gt, I>;
  using B = gr::Backward<E, Gt, I>;
  const std::int64_t N = gr_test::sanitizing() ? 300 : 1000, D = 64, S = 7;
  for (gr::IndexLayout layout :
       {gr::IndexLayout::kUniform, gr::IndexLayout::kContiguousSegments, gr::IndexLayout::kArbitrary}) {
    INFO("layout " << gr::to_string(layout));
    const gr_test::IndexPlan plan =
        gr_test::make_index_plan(layout, N, S, gr::kDefaultChunkRows, hawk_test::fresh_seed());
    const std::int64_t G = plan.num_gate_rows;
    Inputs in(N, D, G);
    const gr_test::Reference ref = in.reference(plan.idx, N, D, G);
    thrust::device_vector<I> idx = gr_test::upload_index<I>(plan.idx);
    Outputs o(N, D, G);
    thrust::device_vector<unsigned> report(1, 0u);

    // wait_for_device_checks is set: inside a capture run() must not synchronise, and does not.
    gr::ForwardArguments f = forward_args(in, idx, o, N, D, G, layout, plan.rows_per_group, true);
    gr::BackwardArguments b = backward_args(in, idx, o, N, D, G, layout, plan.rows_per_group, true);
    for (gr::ProblemShape* shape : {&f.shape, &b.shape}) {
      shape->wait_for_device_checks = true;
      shape->device_check_report = raw(report);
    }
    thrust::device_vector<unsigned char> forward_workspace(F::workspace_size(f)),
        backward_workspace(B::workspace_size(b));
    cudaStream_t stream;
    HAWK_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    HAWK_TEST_CUDA(cudaDeviceSynchronize());  // the uploads (legacy default stream) land before the capture
    cudaGraph_t graph;
    HAWK_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const hawk::Status captured_forward = F::run(f, raw(forward_workspace), forward_workspace.size(), stream);
    const hawk::Status captured_backward = B::run(b, raw(backward_workspace), backward_workspace.size(), stream);
    HAWK_TEST_CUDA(cudaStreamEndCapture(stream, &graph));
    INFO(captured_forward.to_string() << " / " << captured_backward.to_string());
    REQUIRE(captured_forward.ok());
    REQUIRE(captured_backward.ok());
    cudaGraphExec_t exec;
    HAWK_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));

    auto replay = [&] {
      o.poison();
      HAWK_TEST_CUDA(cudaDeviceSynchronize());  // the poison (legacy default stream) lands before the replay
      HAWK_TEST_CUDA(cudaGraphLaunch(exec, stream));
      HAWK_TEST_CUDA(cudaStreamSynchronize(stream));
    };
    auto require_good_replay = [&] {
      replay();
      REQUIRE(hawk::read_device_checks(raw(forward_workspace), stream).ok());
      REQUIRE(hawk::read_device_checks(raw(backward_workspace), stream).ok());
      gr_test::require_within_ulps<E>(hawk_test::to_host(o.out), ref.out, 1.0, "out");
      require_backward_matches(o, in, ref, D);
    };
    auto write_idx = [&](std::int64_t row, std::int64_t value) {
      const I v = static_cast<I>(value);
      HAWK_TEST_CUDA(cudaMemcpy(raw(idx) + row, &v, sizeof(I), cudaMemcpyHostToDevice));
    };

    require_good_replay();
    REQUIRE(report[0] == 0u);

    struct Edit {
      std::int64_t row, value;
      StatusCode code;
      const char* word;
      unsigned bit;
    };
    std::vector<Edit> edits = {{N / 2, G, StatusCode::kIndexOutOfRange, "idx", hawk::kCheckIdxOutOfRange},
                               {N / 3, -1, StatusCode::kIndexOutOfRange, "idx", hawk::kCheckIdxOutOfRange}};
    if (layout == gr::IndexLayout::kUniform) {
      REQUIRE((N - 1) / S != 0);
      edits.push_back({N - 1, 0, StatusCode::kInvalidArgument, "rows_per_group", hawk::kCheckIdxNotUniform});
    } else if (layout == gr::IndexLayout::kContiguousSegments) {
      REQUIRE(plan.idx[N - 2] != plan.idx[0]);  // row N - 1 becomes a second run of idx[0]
      edits.push_back({N - 1, plan.idx[0], StatusCode::kInvalidArgument, "layout", hawk::kCheckIdxNotContiguous});
    }
    unsigned seen = 0;
    for (const Edit& edit : edits) {
      INFO("idx[" << edit.row << "] = " << edit.value << " written in place before the replay");
      write_idx(edit.row, edit.value);
      replay();
      CHECK(o.all_untouched());
      for (const void* workspace : {static_cast<const void*>(raw(forward_workspace)),
                                    static_cast<const void*>(raw(backward_workspace))}) {
        const hawk::Status verdict = hawk::read_device_checks(workspace, stream);
        INFO(verdict.to_string());
        CHECK(verdict.code() == edit.code);
        CHECK(mentions(verdict, edit.word));
      }
      seen |= edit.bit;
      CHECK((report[0] & edit.bit) != 0u);
      write_idx(edit.row, plan.idx[edit.row]);
    }

    // Good idx again: every replay clears its own check word, so the results and the verdicts are good again;
    // the report word keeps everything it saw.
    require_good_replay();
    CHECK((report[0] & seen) == seen);

    HAWK_TEST_CUDA(cudaGraphExecDestroy(exec));
    HAWK_TEST_CUDA(cudaGraphDestroy(graph));
    HAWK_TEST_CUDA(cudaStreamDestroy(stream));
  }
}
