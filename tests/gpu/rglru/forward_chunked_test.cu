// The chunked forwards' properties beyond the per-dtype bitwise comparisons (forward_chunked_{bf16,fp16,fp32}_test.cu):
// a CUDA graph replayed on new inputs starts from clear carries and ticket counters, and a long chain (hundreds
// of chunks per sequence, far more tickets than resident CTAs) is bitwise repeatable, for the one-shot and the
// persistent kernels and on persistent grids from one CTA to one wave.

#include "forward_chunked_tests.cuh"

using namespace rglru_chunked_test;

TEST_CASE("a replayed CUDA graph of the chunked forward starts each replay from clear carries (inputs changed between "
          "replays)",
          "[rglru][forward][chunked][graph]") {
  using E = __nv_bfloat16;
  const std::int64_t W = 256, H = 2;
  const Problem first = rglru_test::make_problem<E>(W, H, {300, 0, 517, 64}, true, kFused, hawk::rglru::ResetMode::kFlags, true);
  Problem second = rglru_test::make_problem<E>(W, H, {300, 0, 517, 64}, true, kFused, hawk::rglru::ResetMode::kFlags, true);
  second.params = first.params;
  second.reset = first.reset;
  second.h0 = first.h0;
  // Eager references through the default dispatch (the sequential forward: the same bits).
  auto eager = [&](const Problem& p) {
    DeviceProblem<E> d(p);
    const hawk::Status status = rglru_test::run_forward<void>(d.arguments(p), d.workspace);
    INFO(status.to_string());
    REQUIRE(status.ok());
    return std::make_pair(hawk_test::bytes_of(d.y), hawk_test::bytes_of(d.h_final));
  };
  const auto want_first = eager(first), want_second = eager(second);
  REQUIRE(want_first.first != want_second.first);

  DeviceProblem<E> d(first);
  const ForwardArguments a = d.arguments(first);
  cudaStream_t stream;
  HAWK_TEST_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  HAWK_TEST_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  using Chunked = hawk::rglru::ChunkedForward<Shipped<E, hawk::rglru::ResetFlags, kFused, 128>>;
  const hawk::Status captured = Chunked::run(a, hawk_test::raw(d.workspace), d.workspace.size(), stream);
  HAWK_TEST_CUDA(cudaStreamEndCapture(stream, &graph));
  INFO(captured.to_string());
  REQUIRE(captured.ok());
  cudaGraphExec_t exec;
  HAWK_TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  auto replay = [&](const Problem& p) {
    const auto x = hawk_test::to_device<E>(p.x);
    thrust::copy(x.begin(), x.end(), d.x.begin());
    hawk_test::poison(d.y);
    hawk_test::poison(d.h_final);
    HAWK_TEST_CUDA(cudaDeviceSynchronize());
    HAWK_TEST_CUDA(cudaGraphLaunch(exec, stream));
    HAWK_TEST_CUDA(cudaStreamSynchronize(stream));
    return std::make_pair(hawk_test::bytes_of(d.y), hawk_test::bytes_of(d.h_final));
  };
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    CHECK(replay(first) == want_first);
    CHECK(replay(second) == want_second);
  }
  HAWK_TEST_CUDA(cudaGraphExecDestroy(exec));
  HAWK_TEST_CUDA(cudaGraphDestroy(graph));
  HAWK_TEST_CUDA(cudaStreamDestroy(stream));
}

TEST_CASE("a long chain (up to 313 chunks per sequence, dense and packed) is bitwise repeatable and equals the sequential "
          "forward",
          "[rglru][forward][chunked][determinism]") {
  using E = __nv_bfloat16;
  using Seq = Sequential<E, NoReset, kLogits, 0>;
  using Chain = ChunkedForwardConfig<E, 0, 32, 64, 64, 256, NoReset, kLogits>;
  using Persistent = PersistentChunkedConfig<E, 0, 32, 64, 32, 256, NoReset, kLogits, 3>;
  // Far more CTAs than fit on the GPU at once (dense: chunk-major tickets; packed: slot-major tickets and the
  // bisection over cu_seqlens), so a CTA's predecessor is often not yet running when the CTA is launched.
  for (bool packed : {false, true}) {
    INFO("packed=" << packed);
    const std::vector<std::int64_t> lengths =
        packed ? std::vector<std::int64_t>{20000, 0, 7777, 13, 20000} : std::vector<std::int64_t>{20000, 20000};
    const Problem p = rglru_test::make_problem<E>(256, 1, lengths, packed, kLogits, hawk::rglru::ResetMode::kNone, true);
    const Outputs sequential = run_op<E, hawk::rglru::Forward<Seq>>(p);
    for (int run = 0; run < 10; ++run) {
      INFO("run " << run);
      const Outputs chained = run_op<E, hawk::rglru::ChunkedForward<Chain>>(p);
      REQUIRE(chained == sequential);
      // The persistent kernel: one wave, and small grids on which each CTA holds many tickets of one chain.
      const int grid = run % 5 == 0 ? 0 : run % 5;
      INFO("persistent, max_ctas " << grid);
      REQUIRE(run_op<E, hawk::rglru::ChunkedForward<Persistent>>(p, grid) == sequential);
      REQUIRE(run_op<E, hawk::rglru::ChunkedForward<Shipped<E, NoReset, kLogits, 0>>>(p, grid) == sequential);
    }
  }
}
