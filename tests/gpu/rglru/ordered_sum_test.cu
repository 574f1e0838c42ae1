// The backward's ordered sums (kernels/ordered_sum_kernel.cuh: loads in whole batches of 32, then 8, then one at a
// time) against the kernel they replaced (previous_ordered_sum_kernel.cuh: one load per addition), byte for byte,
// and against the same additions done in order on the host. The jobs are the backward's kinds (d a_param: index
// order, scaled by sigmoid(a_param); dW, db: the last segment first, from zero or onto the output of a later time
// slice), with counts of partials around every batch edge (0, 1, 7, 8, 9, 31, 32, 33, 40, 41, 64, 65, 129, 1025)
// and partials that hold signed zeros, infinities, NaN, subnormals and values large enough to overflow. Outputs
// start poisoned (all-ones bytes, a NaN no addition produces), so an element left unwritten fails; the grid is also
// cut to a few CTAs (the per-element order does not depend on it) and one job is longer than the largest grid. A
// failed device check writes nothing; negative controls show the bytewise comparison can fail (the additions in
// the other order; one partial changed).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hawk/rglru/kernels/ordered_sum_kernel.cuh"
#include "hawk_test/device_buffers.cuh"
#include "previous_ordered_sum_kernel.cuh"

namespace {

using hawk::rglru::OrderedSumJob;
using hawk::rglru::OrderedSumJobs;
using hawk_test::raw;
using Bytes = std::vector<unsigned char>;

constexpr std::uint32_t kPoisonWord = 0xFFFFFFFFu;

//! Random partials over many magnitudes (never all zeros). With `specials`, about one in 50 is a signed zero, a
//! subnormal or a value near the largest float (sums that overflow), and about one in 2,000 an infinity or a NaN, so
//! that most sums of even a thousand partials stay finite. Generated as floats directly: the grid-stride case has
//! 45 M of them.
std::vector<float> random_partials(std::size_t n, bool specials) {
  std::mt19937_64 engine(hawk_test::fresh_seed());
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f), exponent(-4.0f, 4.0f), pick(0.0f, 1.0f);
  const float finite_specials[5] = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min() * 3.0f, -1.0e-40f, 3.0e38f};
  const float non_finite[3] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = mantissa(engine) * std::pow(10.0f, exponent(engine));
    if (!specials) continue;
    const float p = pick(engine);
    if (p < 0.0005f) {
      out[i] = non_finite[static_cast<int>(p / 0.0005f * 3.0f) % 3];
    } else if (p < 0.02f) {
      out[i] = finite_specials[static_cast<int>(p / 0.02f * 5.0f) % 5];
    }
  }
  return out;
}

//! What one job asks, and its buffers.
struct JobCase {
  std::int64_t count = 0, num_partials = 0, stride = 0;
  bool reverse = false, accumulate = false, scaled = false;
  thrust::device_vector<float> partials, scale_of, start;  // start: the output before the kernel (accumulate)

  JobCase(std::int64_t elements, std::int64_t partial_count, bool reverse_, bool accumulate_, bool scaled_,
          bool specials)
      : count(elements), num_partials(partial_count), stride(elements + 3), reverse(reverse_),
        accumulate(accumulate_), scaled(scaled_) {
    // Rows `stride` floats apart with 3 floats of padding that no sum may read (they hold NaN).
    std::vector<float> host = random_partials(static_cast<std::size_t>(stride * (num_partials > 0 ? num_partials : 1)),
                                              specials);
    for (std::int64_t p = 0; p < num_partials; ++p)
      for (std::int64_t e = count; e < stride; ++e)
        host[static_cast<std::size_t>(p * stride + e)] = std::numeric_limits<float>::quiet_NaN();
    partials = thrust::device_vector<float>(host.begin(), host.end());
    if (scaled) {
      const std::vector<double> a = hawk_test::random_uniform(static_cast<std::size_t>(count), -4.0, 4.0,
                                                              hawk_test::fresh_seed());
      scale_of = hawk_test::to_device<float>(a);
    }
    if (accumulate) {
      std::vector<float> s = random_partials(static_cast<std::size_t>(count), specials);
      start = thrust::device_vector<float>(s.begin(), s.end());
    }
  }

  OrderedSumJob job(float* out) const {
    OrderedSumJob j{raw(partials), count, stride, num_partials, scaled ? raw(scale_of) : nullptr, out};
    j.reverse = reverse;
    j.accumulate = accumulate;
    return j;
  }

  //! The same additions in the same order on the host (before any scale).
  std::vector<float> host_sums() const {
    thrust::host_vector<float> p(partials);
    std::vector<float> out(static_cast<std::size_t>(count));
    thrust::host_vector<float> s0(start);
    for (std::int64_t e = 0; e < count; ++e) {
      float sum = accumulate ? s0[static_cast<std::size_t>(e)] : 0.0f;
      for (std::int64_t k = 0; k < num_partials; ++k) {
        const std::int64_t row = reverse ? num_partials - 1 - k : k;
        sum += p[static_cast<std::size_t>(row * stride + e)];
      }
      out[static_cast<std::size_t>(e)] = sum;
    }
    return out;
  }
};

enum class Kernel { kShipped, kPrevious };

//! Runs the jobs through one kernel into fresh outputs (poisoned, or the job's start values when accumulating),
//! with the library's grid (`blocks` = 0) or `blocks` CTAs a job; returns each output's bytes.
std::vector<Bytes> run_jobs(const std::vector<const JobCase*>& cases, Kernel kernel, unsigned int blocks,
                            const unsigned int* checks = nullptr) {
  std::vector<thrust::device_vector<float>> outputs;
  outputs.reserve(cases.size());
  OrderedSumJobs jobs;
  jobs.checks = checks;
  for (const JobCase* c : cases) {
    outputs.emplace_back(static_cast<std::size_t>(c->count));
    if (c->accumulate) {
      thrust::copy(c->start.begin(), c->start.end(), outputs.back().begin());
    } else {
      hawk_test::poison(outputs.back());
    }
    jobs.job[jobs.num_jobs++] = c->job(raw(outputs.back()));
  }
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  constexpr int kThreads = hawk::rglru::kOrderedSumThreads;
  dim3 sum_grid = hawk::rglru::ordered_sum_grid(jobs);  // the library's grid
  if (blocks != 0) sum_grid.x = blocks;
  if (kernel == Kernel::kShipped) {
    hawk::rglru::ordered_sum_kernel<kThreads><<<sum_grid, kThreads>>>(jobs);
  } else {
    hawk::rglru::previous::ordered_sum_kernel<kThreads><<<sum_grid, kThreads>>>(jobs);
  }
  HAWK_TEST_CUDA(cudaGetLastError());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  std::vector<Bytes> bytes;
  for (const auto& o : outputs) bytes.push_back(hawk_test::bytes_of(o));
  return bytes;
}

std::uint32_t word_at(const Bytes& bytes, std::size_t e) {
  std::uint32_t w;
  std::memcpy(&w, bytes.data() + 4 * e, 4);
  return w;
}

//! Every element of an unscaled job equals the host's in-order sum bit for bit (NaN: any NaN), and none is the
//! poison.
void check_against_host(const JobCase& c, const Bytes& got) {
  const std::vector<float> want = c.host_sums();
  std::size_t mismatches = 0, first = 0;
  for (std::size_t e = 0; e < want.size(); ++e) {
    float g;
    std::memcpy(&g, got.data() + 4 * e, 4);
    const bool same = std::isnan(want[e]) ? std::isnan(g) : std::memcmp(&g, &want[e], 4) == 0;
    if (!same || word_at(got, e) == kPoisonWord) {
      if (mismatches++ == 0) first = e;
    }
  }
  INFO("count " << c.count << ", partials " << c.num_partials << ", reverse " << c.reverse << ", accumulate "
                << c.accumulate << "; first mismatch at " << first);
  CHECK(mismatches == 0);
}

//! A scaled job: finite where the host's is, within a few ulps of the host's sum times its sigmoid (the device's
//! expf is not the host's), NaN where the host's is, never the poison.
void check_scaled_against_host(const JobCase& c, const Bytes& got) {
  const std::vector<float> sums = c.host_sums();
  thrust::host_vector<float> a(c.scale_of);
  std::size_t bad = 0;
  for (std::size_t e = 0; e < sums.size(); ++e) {
    float g;
    std::memcpy(&g, got.data() + 4 * e, 4);
    const double want = static_cast<double>(sums[e]) * hawk::math::sigmoid(static_cast<double>(a[e]));
    const bool ok = std::isnan(want) ? std::isnan(g)
                    : std::isinf(want) ? g == static_cast<float>(want)
                                       : std::fabs(g - want) <= 1e-6 * std::fabs(want) + 1e-38;
    if (!ok || word_at(got, e) == kPoisonWord) ++bad;
  }
  INFO("scaled job: count " << c.count << ", partials " << c.num_partials);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("ordered sums: the batched loads give the previous kernel's bits and the host's in-order sums",
          "[backward][ordered_sum]") {
  const bool specials = GENERATE(false, true);
  const std::int64_t partial_count = GENERATE(0, 1, 2, 7, 8, 9, 31, 32, 33, 40, 41, 64, 65, 129, 1025);
  INFO("partials " << partial_count << ", special values " << specials);
  // The backward's job kinds in one launch: d a_param (index order, scaled), dW and db (the last segment first,
  // from zero), and a later slice's dW (onto the output), at element counts that leave a partial CTA.
  const JobCase da_param(300, partial_count, false, false, true, specials);
  const JobCase weights(1000, partial_count, true, false, false, specials);
  const JobCase bias(77, partial_count, true, false, false, specials);
  const JobCase weights_onto(513, partial_count, true, true, false, specials);
  const JobCase forward_plain(257, partial_count, false, false, false, specials);
  const std::vector<const JobCase*> cases = {&da_param, &weights, &bias, &weights_onto, &forward_plain};

  const std::vector<Bytes> shipped = run_jobs(cases, Kernel::kShipped, 0);
  const std::vector<Bytes> previous = run_jobs(cases, Kernel::kPrevious, 0);
  const std::vector<Bytes> few_ctas = run_jobs(cases, Kernel::kShipped, 1);
  for (std::size_t j = 0; j < cases.size(); ++j) {
    INFO("job " << j);
    CHECK(shipped[j] == previous[j]);
    CHECK(few_ctas[j] == shipped[j]);
    if (cases[j]->scaled) {
      check_scaled_against_host(*cases[j], shipped[j]);
    } else {
      check_against_host(*cases[j], shipped[j]);
    }
  }
}

TEST_CASE("ordered sums: a job longer than the largest grid is walked by the grid stride, with the previous "
          "kernel's bits",
          "[backward][ordered_sum]") {
  // 4096 CTAs of 256 threads cover 1,048,576 elements: these have more, with 8 partials (dW at 1024-token segments)
  // and 41 (a batch of 32, one of 8, one single).
  const std::int64_t partial_count = GENERATE(8, 41);
  const JobCase big(1100003, partial_count, true, false, false, true);
  const std::vector<const JobCase*> cases = {&big};
  const std::vector<Bytes> shipped = run_jobs(cases, Kernel::kShipped, 0);
  CHECK(shipped[0] == run_jobs(cases, Kernel::kPrevious, 0)[0]);
  check_against_host(big, shipped[0]);
}

TEST_CASE("ordered sums: a failed device check writes nothing", "[backward][ordered_sum]") {
  const JobCase job(300, 33, false, false, true, false);
  const std::vector<const JobCase*> cases = {&job};
  thrust::device_vector<unsigned int> failed(1, 1u), passed(1, 0u);
  const std::vector<Bytes> untouched = run_jobs(cases, Kernel::kShipped, 0, raw(failed));
  for (std::size_t e = 0; e < 300; ++e) REQUIRE(word_at(untouched[0], e) == kPoisonWord);
  const std::vector<Bytes> written = run_jobs(cases, Kernel::kShipped, 0, raw(passed));
  check_scaled_against_host(job, written[0]);
}

TEST_CASE("ordered sums: the bytewise comparison fails when the order of the additions or one partial differs "
          "(negative controls)",
          "[backward][ordered_sum]") {
  JobCase job(300, 65, true, false, false, false);
  const std::vector<const JobCase*> cases = {&job};
  const Bytes before = run_jobs(cases, Kernel::kShipped, 0)[0];
  REQUIRE(before == run_jobs(cases, Kernel::kPrevious, 0)[0]);
  // The same partials added first to last instead of last to first: rounding differs in some elements.
  job.reverse = false;
  CHECK_FALSE(run_jobs(cases, Kernel::kShipped, 0)[0] == before);
  job.reverse = true;
  // One partial of element 17 changed (row 40 of 65, in the first 32-batch of the reverse walk): that element's sum
  // must change, in both kernels alike.
  const std::size_t at = static_cast<std::size_t>(40 * job.stride + 17);
  const float old_value = job.partials[at];
  job.partials[at] = old_value + 1000.0f;
  const Bytes after = run_jobs(cases, Kernel::kShipped, 0)[0];
  CHECK_FALSE(after == before);
  CHECK(after == run_jobs(cases, Kernel::kPrevious, 0)[0]);
}
