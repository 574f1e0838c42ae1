// The fp16 compact configurations give the shipped ones' bits (compact_config_tests.cuh): fused w = 64, 128 (the
// backward's products in 32-deep steps) and 256.
#include "compact_config_tests.cuh"

namespace {
using namespace rglru_compact_test;
using hawk::rglru::NoReset;
using hawk::rglru::ResetFlags;
}  // namespace

TEST_CASE("compact configurations: fp16 fused w = 64, 128 and 256, forward, chunked forward, backward (w = 128, 256)",
          "[compact]") {
  check_family<__half, ResetFlags, GateMode::kFused, 64>({17, 0, 64, 1, 130, 257}, true, true, true);
  check_family<__half, NoReset, GateMode::kFused, 256>({193, 70}, true, true, true);
  check_family<__half, ResetFlags, GateMode::kFused, 256>({65, 65}, false, false, false);
  check_family<__half, ResetFlags, GateMode::kFused, 128>({17, 0, 64, 1, 130, 257}, true, true, true);
}

TEST_CASE("compact configurations: fp16 decode step", "[compact]") { check_decode<__half, ResetFlags, 256>(); }
