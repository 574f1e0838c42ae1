// The fp32 compact configurations give the shipped ones' bits (compact_config_tests.cuh): fused w = 64 (the backward),
// 128 and 256, and gate-logits mode (the forward's pipeline depth).
#include "compact_config_tests.cuh"

namespace {
using namespace rglru_compact_test;
using hawk::rglru::NoReset;
using hawk::rglru::ResetAtSequenceStart;
using hawk::rglru::ResetFlags;
}  // namespace

TEST_CASE("compact configurations: fp32 fused w = 64, 128 and 256, forward, chunked forward, backward", "[compact]") {
  check_family<float, ResetFlags, GateMode::kFused, 64>({17, 0, 64, 1, 130, 257}, true, true, true);
  for (std::int64_t L : {1, 2, 65, 300})
    check_family<float, ResetFlags, GateMode::kFused, 128>({L, L}, false, true, L == 65);
  check_family<float, ResetFlags, GateMode::kFused, 128>({17, 0, 64, 1, 130, 257}, true, true, false);
  check_family<float, ResetFlags, GateMode::kFused, 256>({17, 0, 64, 1, 130, 257}, true, true, true);
  check_family<float, ResetAtSequenceStart, GateMode::kFused, 256>({300}, false, false, false);
  // Several 1024-token dW segments with the compact 32-token dW step (the shipped one takes 64).
  check_family<float, ResetFlags, GateMode::kFused, 64>({600, 531, 1100}, true, false, false);
}

TEST_CASE("compact configurations: fp32 gate-logits mode", "[compact]") {
  check_family<float, ResetFlags, GateMode::kGateLogits, 0>({17, 0, 64, 1, 130, 257}, true, true, true);
  check_family<float, NoReset, GateMode::kGateLogits, 0>({300, 300}, false, false, false);
}

TEST_CASE("compact configurations: fp32 decode step", "[compact]") {
  check_decode<float, ResetFlags, 128>();
  check_decode<float, NoReset, 256>();
}

TEST_CASE("compact configurations: fp32 controls, one x moved changes the bytes, twice the d a_param grouping changes "
          "d a_param alone", "[compact]") {
  check_control<float, ResetFlags, GateMode::kFused, 128>();
  check_control<float, ResetFlags, GateMode::kFused, 64>();
  check_grouping_control<float, ResetFlags, 64>();
}

TEST_CASE("compact configurations: fp32 through the default dispatch (w = 256: the chunked forward and scan alone "
          "under a 99 KB cap)", "[compact]") {
  check_dispatch<float, ResetFlags, GateMode::kFused, 256>({17, 0, 64, 1, 130, 257}, true);
  check_dispatch<float, NoReset, GateMode::kFused, 256>({1, 1}, false);
  check_dispatch<float, ResetAtSequenceStart, GateMode::kFused, 128>({300, 300}, false);
  check_dispatch<float, ResetFlags, GateMode::kGateLogits, 0>({65, 0, 2}, true);
  check_decode_dispatch<float, NoReset, 256>(3);
  check_decode_dispatch<float, ResetFlags, 256>(200);
}
