// The chunked forwards (persistent and one-shot) against the sequential forward, bitwise, bf16
// (forward_chunked_tests.cuh says why and how).

#include "forward_chunked_tests.cuh"

using namespace rglru_chunked_test;

TEST_CASE("bf16: every chunked configuration and grid gives the sequential forward's bits",
          "[rglru][forward][chunked][bf16]") {
  using E = __nv_bfloat16;
  SECTION("fused w = 128, reset flags, h0, packed with empty sequences") {
    check_chunk_independence<E, ResetFlags, kFused, 128,
                             PersistentChunkedConfig<E, 128, 64, 64, 16, 256, ResetFlags, kFused, 2>,
                             PersistentChunkedConfig<E, 128, 32, 256, 32, 128, ResetFlags, kFused, 3>,
                             PersistentChunkedConfig<E, 128, 64, 128, 64, 256, ResetFlags, kFused, 2>,
                             ChunkedForwardConfig<E, 128, 16, 128, 32, 128, ResetFlags, kFused>>(packed_lengths(), true,
                                                                                                  true);
  }
  SECTION("fused w = 64, reset at sequence start, dense L = 1, 2, 257, 384") {
    for (std::int64_t L : {1, 2, 257, 384})
      check_chunk_independence<E, ResetAtSequenceStart, kFused, 64,
                               PersistentChunkedConfig<E, 64, 32, 192, 32, 256, ResetAtSequenceStart, kFused, 4>>(
          {L, L, L}, false, true);
  }
  SECTION("fused w = 256, no reset, h0, packed") {
    check_chunk_independence<E, NoReset, kFused, 256,
                             PersistentChunkedConfig<E, 256, 32, 64, 32, 256, NoReset, kFused, 2>>(packed_lengths(), true,
                                                                                                  true);
  }
  SECTION("gate-logits, no reset, packed") {
    check_chunk_independence<E, NoReset, kLogits, 0,
                             PersistentChunkedConfig<E, 0, 64, 128, 32, 256, NoReset, kLogits, 3>,
                             PersistentChunkedConfig<E, 0, 16, 64, 16, 128, NoReset, kLogits, 2>>(packed_lengths(), true,
                                                                                                 false);
  }
  SECTION("gate-logits, reset flags, dense L = 700, h0") {
    check_chunk_independence<E, ResetFlags, kLogits, 0>({700, 700, 700}, false, true);
  }
}
