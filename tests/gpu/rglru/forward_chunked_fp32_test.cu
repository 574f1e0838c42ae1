// The chunked forwards (persistent and one-shot) against the sequential forward, bitwise, fp32 (the SIMT
// projection; forward_chunked_tests.cuh says why and how).

#include "forward_chunked_tests.cuh"

using namespace rglru_chunked_test;

TEST_CASE("fp32: every chunked configuration and grid gives the sequential forward's bits",
          "[rglru][forward][chunked][fp32]") {
  using E = float;
  SECTION("fused w = 64, reset flags, h0, packed") {
    check_chunk_independence<E, ResetFlags, kFused, 64,
                             PersistentChunkedConfig<E, 64, 16, 64, 16, 128, ResetFlags, kFused, 3>>(packed_lengths(),
                                                                                                   true, true);
  }
  SECTION("fused w = 256, no reset, dense L = 2, 300") {
    for (std::int64_t L : {2, 300}) check_chunk_independence<E, NoReset, kFused, 256>({L, L}, false, true);
  }
  SECTION("gate-logits, reset at sequence start, packed") {
    check_chunk_independence<E, ResetAtSequenceStart, kLogits, 0>(packed_lengths(), true, true);
  }
}
