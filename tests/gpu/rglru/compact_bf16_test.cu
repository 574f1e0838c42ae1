// The bf16 compact configurations give the shipped ones' bits (compact_config_tests.cuh): fused w = 64, 128 (the
// backward's products in 32-deep steps) and 256 (gate-logits mode, w = 128's forward and w = 64's backward fit 99 KB
// as shipped).
#include "compact_config_tests.cuh"

namespace {
using namespace rglru_compact_test;
using BF = __nv_bfloat16;
using hawk::rglru::NoReset;
using hawk::rglru::ResetAtSequenceStart;
using hawk::rglru::ResetFlags;
}  // namespace

TEST_CASE("compact configurations: bf16 fused w = 64 and 256, forward, chunked forward, backward (w = 256)",
          "[compact]") {
  for (std::int64_t L : {1, 2, 17, 64, 65, 300})
    check_family<BF, ResetFlags, GateMode::kFused, 64>({L, L}, false, true, L == 65);
  check_family<BF, ResetFlags, GateMode::kFused, 64>({17, 0, 64, 1, 130, 257}, true, true, true);
  for (std::int64_t L : {1, 17, 65, 300})
    check_family<BF, ResetFlags, GateMode::kFused, 256>({L, L}, false, true, L == 65);
  check_family<BF, ResetFlags, GateMode::kFused, 256>({17, 0, 64, 1, 130, 257}, true, true, true);
  check_family<BF, ResetAtSequenceStart, GateMode::kFused, 256>({sanitizing() ? 300 : 1000}, false, false, false);
  check_family<BF, NoReset, GateMode::kFused, 64>({193, 70}, true, true, false);
}

TEST_CASE("compact configurations: bf16 fused w = 128, the backward with 32-deep product steps", "[compact]") {
  for (std::int64_t L : {1, 65, 300}) check_family<BF, ResetFlags, GateMode::kFused, 128>({L, L}, false, true, false);
  check_family<BF, ResetFlags, GateMode::kFused, 128>({17, 0, 64, 1, 130, 257}, true, true, true);
  check_family<BF, ResetAtSequenceStart, GateMode::kFused, 128>({sanitizing() ? 300 : 1100}, false, false, false);
}

TEST_CASE("compact configurations: bf16 decode step", "[compact]") {
  check_decode<BF, ResetFlags, 64>();
  check_decode<BF, NoReset, 256>();
}

TEST_CASE("compact configurations: bf16 controls, one x moved changes the compact forward's bytes, twice the d a_param "
          "grouping changes d a_param alone", "[compact]") {
  check_control<BF, ResetFlags, GateMode::kFused, 256>();
  check_grouping_control<BF, ResetFlags, 64>();
}

TEST_CASE("compact configurations: bf16 through the default dispatch", "[compact]") {
  check_dispatch<BF, ResetFlags, GateMode::kFused, 64>({17, 0, 64, 1, 130, 257}, true);
  check_dispatch<BF, ResetAtSequenceStart, GateMode::kFused, 256>({300, 300}, false);
  check_dispatch<BF, ResetFlags, GateMode::kFused, 128>({17, 0, 64, 1, 130, 257}, true);
}
