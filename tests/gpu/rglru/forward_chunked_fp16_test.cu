// The chunked forwards (persistent and one-shot) against the sequential forward, bitwise, fp16
// (forward_chunked_tests.cuh says why and how).

#include "forward_chunked_tests.cuh"

using namespace rglru_chunked_test;

TEST_CASE("fp16: every chunked configuration and grid gives the sequential forward's bits",
          "[rglru][forward][chunked][fp16]") {
  using E = __half;
  SECTION("gate-logits, reset flags, dense L = 700, h0") {
    check_chunk_independence<E, ResetFlags, kLogits, 0,
                             PersistentChunkedConfig<E, 0, 64, 64, 16, 128, ResetFlags, kLogits, 2>,
                             ChunkedForwardConfig<E, 0, 16, 256, 64, 256, ResetFlags, kLogits>>({700, 700}, false, true);
  }
  SECTION("fused w = 128, reset at sequence start, packed") {
    check_chunk_independence<E, ResetAtSequenceStart, kFused, 128>(packed_lengths(), true, true);
  }
  SECTION("fused w = 64, reset flags, dense L = 1, 131") {
    for (std::int64_t L : {1, 131}) check_chunk_independence<E, ResetFlags, kFused, 64>({L, L}, false, true);
  }
}
