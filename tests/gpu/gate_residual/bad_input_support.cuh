#pragma once
// Shared by the bad-input and device-check tests: a small valid problem with poisoned outputs that a test breaks
// one thing at a time, and the three ways a caller receives the verdict of the device checks
// (core/device_checks.cuh): run()'s Status in the blocking mode, read_device_checks() on the workspace in the
// default deferred mode, and the caller's sticky report word.

#include <string>

#include "support.cuh"
#include "hawk/core/device_checks.cuh"

namespace gr_bad {

using E = __nv_bfloat16;
using Gt = __nv_bfloat16;
using I = std::int64_t;
namespace gr = hawk::gate_residual;
using hawk::StatusCode;
using hawk_test::raw;

inline bool mentions(const hawk::Status& status, const char* word) {
  return status.message().find(word) != std::string::npos;
}

inline bool all_bytes_are(const std::vector<unsigned char>& bytes, unsigned char value) {
  return std::all_of(bytes.begin(), bytes.end(), [value](unsigned char b) { return b == value; });
}

//! How the caller receives the verdict of the device checks.
enum class Delivery {
  kBlocking,  //!< shape.wait_for_device_checks: run() returns it
  kDeferred,  //!< the default: run() returns success, hawk::read_device_checks(workspace) returns it
  kReport,    //!< shape.device_check_report: the bits are OR-ed into the caller's word
};
constexpr Delivery kEveryDelivery[] = {Delivery::kBlocking, Delivery::kDeferred, Delivery::kReport};

inline const char* to_string(Delivery delivery) {
  switch (delivery) {
    case Delivery::kBlocking: return "blocking (wait_for_device_checks)";
    case Delivery::kDeferred: return "deferred (read_device_checks)";
    case Delivery::kReport: return "report word";
  }
  return "?";
}

//! What a caller sees of one call.
struct Outcome {
  hawk::Status returned;      //!< run()'s Status
  hawk::Status verdict;       //!< the device checks' verdict, received as the Delivery says
  unsigned report_bits = 0;   //!< the report word after the call (Delivery::kReport)
};

//! A small valid problem with poisoned outputs; tests break one thing at a time.
struct Fixture {
  std::int64_t N = 257, D = 1152, G = 9;
  thrust::device_vector<E> residual, y, dout, out, dy, dres;
  thrust::device_vector<Gt> gate;
  thrust::device_vector<I> idx;
  thrust::device_vector<float> dgate;
  thrust::device_vector<unsigned char> workspace;
  thrust::device_vector<unsigned> report;
  std::vector<std::int64_t> idx_host;

  Fixture() {
    const std::size_t n = static_cast<std::size_t>(N * D);
    for (auto* v : {&residual, &y, &dout}) {
      v->resize(n);
      gr_test::fill_uniform(*v, -2.0f, 2.0f, hawk_test::fresh_seed());
    }
    for (auto* v : {&out, &dy, &dres}) v->resize(n);
    gate.resize(static_cast<std::size_t>(G * D));
    gr_test::fill_uniform(gate, -1.5f, 1.5f, hawk_test::fresh_seed());
    dgate.resize(static_cast<std::size_t>(G * D));
    report.resize(1);
    set_idx_uniform(30);  // idx = r / 30: valid for every layout
    poison_outputs();
    workspace.resize(64 << 20);
  }
  //! idx = r / S, written into the existing buffer: arguments made earlier keep pointing at it.
  void set_idx_uniform(std::int64_t S) {
    idx_host.resize(static_cast<std::size_t>(N));
    for (std::int64_t r = 0; r < N; ++r) idx_host[r] = r / S;
    const thrust::device_vector<I> uploaded = gr_test::upload_index<I>(idx_host);
    idx.resize(uploaded.size());
    thrust::copy(uploaded.begin(), uploaded.end(), idx.begin());
  }
  void set_idx(std::int64_t row, std::int64_t value) {
    idx_host[row] = value;
    idx[row] = value;
  }
  void poison_outputs() {
    hawk_test::poison(out);
    hawk_test::poison(dy);
    hawk_test::poison(dres);
    hawk_test::poison(dgate);
  }
  unsigned report_bits() {
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    return report[0];
  }
  gr::ForwardArguments forward_args(gr::IndexLayout layout = gr::IndexLayout::kArbitrary, std::int64_t S = 0) {
    gr::ForwardArguments a;
    a.shape = gr_test::shape_of<E, Gt, I>(N, D, G);
    a.layout = layout;
    a.rows_per_group = S;
    a.residual = raw(residual);
    a.y = raw(y);
    a.gate = raw(gate);
    a.idx = raw(idx);
    a.out = raw(out);
    return a;
  }
  gr::BackwardArguments backward_args(gr::IndexLayout layout = gr::IndexLayout::kArbitrary, std::int64_t S = 0) {
    gr::BackwardArguments a;
    a.shape = gr_test::shape_of<E, Gt, I>(N, D, G);
    a.layout = layout;
    a.rows_per_group = S;
    a.dout = raw(dout);
    a.y = raw(y);
    a.gate = raw(gate);
    a.idx = raw(idx);
    a.dy = raw(dy);
    a.dgate = raw(dgate);
    a.dresidual = raw(dres);
    return a;
  }
  bool outputs_untouched() {
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    for (const auto* v : {&out, &dy, &dres}) {
      if (!all_bytes_are(hawk_test::bytes_of(*v), 0xFF)) return false;
    }
    return all_bytes_are(hawk_test::bytes_of(dgate), 0xFF);
  }
};

//! Runs `Op` with the verdict delivered as asked and returns what the caller sees. Host problems are run()'s
//! Status whatever the delivery. (Only for calls that carry a check word: a forward without validation has
//! none, and read_device_checks would read what an earlier call left in the workspace.)
template <class Op, class Args>
Outcome run_with(Fixture& f, Args a, Delivery delivery) {
  a.shape.wait_for_device_checks = delivery == Delivery::kBlocking;
  a.shape.device_check_report = nullptr;
  if (delivery == Delivery::kReport) {
    HAWK_TEST_CUDA(cudaMemset(raw(f.report), 0, sizeof(unsigned)));
    a.shape.device_check_report = raw(f.report);
  }
  Outcome outcome;
  outcome.returned = Op::run(a, raw(f.workspace), f.workspace.size(), 0);
  outcome.verdict = outcome.returned;
  if (!outcome.returned.ok() || delivery == Delivery::kBlocking) return outcome;
  outcome.verdict = hawk::read_device_checks(raw(f.workspace), 0);
  if (delivery == Delivery::kReport) {
    outcome.report_bits = f.report_bits();
    const hawk::Status reported = hawk::device_check_verdict(outcome.report_bits);
    CHECK(reported.code() == outcome.verdict.code());
    CHECK(reported.message() == outcome.verdict.message());
    outcome.verdict = reported;
  }
  return outcome;
}

//! A problem only the device can see: under every delivery nothing is written and the verdict has `code`, names
//! `word` and carries `bit`; run() itself returns it only in the blocking mode.
template <class Op, class Args>
void expect_device_rejection(Fixture& f, const Args& a, StatusCode code, const char* word, unsigned bit) {
  for (Delivery delivery : kEveryDelivery) {
    const Outcome o = run_with<Op>(f, a, delivery);
    INFO(to_string(delivery) << ": run() returned \"" << o.returned.to_string() << "\", verdict \""
                             << o.verdict.to_string() << "\"");
    if (delivery == Delivery::kBlocking) {
      CHECK(o.returned.code() == code);
    } else {
      CHECK(o.returned.ok());
    }
    CHECK(o.verdict.code() == code);
    CHECK(mentions(o.verdict, word));
    if (delivery == Delivery::kReport) CHECK((o.report_bits & bit) != 0u);
    CHECK(f.outputs_untouched());
  }
}

}  // namespace gr_bad
