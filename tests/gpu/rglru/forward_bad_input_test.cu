// Bad input to the RG-LRU forward: each case returns its StatusCode with a message, and writes nothing (y,
// h_final and the checkpoints keep their poison). Cases that need the device (cu_seqlens, state_index) go
// through the device checks (core/device_checks.cuh): their verdict comes back from run() when the caller
// waits for it, or later from read_device_checks; all others are rejected by can_implement before any launch.

#include <functional>

#include "support.cuh"

namespace {

using rglru_test::DeviceProblem;
using rglru_test::ForwardArguments;
using rglru_test::GateMode;
using rglru_test::Problem;
using rglru_test::ResetMode;
using hawk::StatusCode;
using E = __nv_bfloat16;

struct Case {
  const char* name;
  StatusCode code;
  std::function<void(ForwardArguments&, DeviceProblem<E>&)> spoil;
};

//! Run `spoil`ed arguments through `call` and check the code and that no output changed.
void check_rejected(const Problem& p, const Case& c,
                    const std::function<hawk::Status(const ForwardArguments&, DeviceProblem<E>&)>& call) {
  INFO("case: " << c.name);
  DeviceProblem<E> d(p);
  ForwardArguments args = d.arguments(p);
  c.spoil(args, d);
  const auto y_before = hawk_test::bytes_of(d.y);
  const auto h_before = hawk_test::bytes_of(d.h_final);
  const auto ck_before = hawk_test::bytes_of(d.checkpoints);
  const hawk::Status status = call(args, d);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  INFO("status: " << status.to_string());
  CHECK(status.code() == c.code);
  CHECK_FALSE(status.message().empty());
  CHECK(hawk_test::bytes_of(d.y) == y_before);
  CHECK(hawk_test::bytes_of(d.h_final) == h_before);
  CHECK(hawk_test::bytes_of(d.checkpoints) == ck_before);
}

std::vector<Case> common_cases() {
  return {
      {"W not divisible by H", StatusCode::kInvalidArgument, [](ForwardArguments& a, DeviceProblem<E>&) { a.shape.num_blocks = 3; }},
      {"L = 0", StatusCode::kInvalidArgument,
       [](ForwardArguments& a, DeviceProblem<E>&) {
         a.shape.seq_len = 0;
         a.shape.num_tokens = 0;
       }},
      {"num_tokens != N * L", StatusCode::kInvalidArgument, [](ForwardArguments& a, DeviceProblem<E>&) { a.shape.num_tokens += 1; }},
      {"no sequences", StatusCode::kInvalidArgument, [](ForwardArguments& a, DeviceProblem<E>&) { a.shape.num_sequences = 0; }},
      {"null x", StatusCode::kNullPointer, [](ForwardArguments& a, DeviceProblem<E>&) { a.x = nullptr; }},
      {"null y", StatusCode::kNullPointer, [](ForwardArguments& a, DeviceProblem<E>&) { a.y = nullptr; }},
      {"null a_param", StatusCode::kNullPointer, [](ForwardArguments& a, DeviceProblem<E>&) { a.a_param = nullptr; }},
      {"null Wx (fused)", StatusCode::kNullPointer, [](ForwardArguments& a, DeviceProblem<E>&) { a.Wx = nullptr; }},
      {"null ba (fused)", StatusCode::kNullPointer, [](ForwardArguments& a, DeviceProblem<E>&) { a.ba = nullptr; }},
      {"misaligned x", StatusCode::kMisalignedPointer,
       [](ForwardArguments& a, DeviceProblem<E>&) { a.x = static_cast<const E*>(a.x) + 1; }},
      {"misaligned y", StatusCode::kMisalignedPointer,
       [](ForwardArguments& a, DeviceProblem<E>&) { a.y = static_cast<E*>(a.y) + 3; }},
      {"misaligned Wa", StatusCode::kMisalignedPointer,
       [](ForwardArguments& a, DeviceProblem<E>&) { a.Wa = static_cast<const E*>(a.Wa) + 2; }},
      {"reset flags missing for kFlags", StatusCode::kNullPointer,
       [](ForwardArguments& a, DeviceProblem<E>&) { a.reset_mode = ResetMode::kFlags; }},
      {"reset flags given without kFlags", StatusCode::kInvalidArgument,
       [](ForwardArguments& a, DeviceProblem<E>& d) {
         d.reset.assign(static_cast<std::size_t>(a.shape.num_tokens), 0);
         a.reset = hawk_test::raw(d.reset);
       }},
      {"checkpoint chunk differs from the time chunk", StatusCode::kInvalidArgument,
       [](ForwardArguments& a, DeviceProblem<E>&) { a.checkpoint_chunk = 32; }},
      {"state_index without num_state_rows", StatusCode::kInvalidArgument,
       [](ForwardArguments& a, DeviceProblem<E>& d) { a.state_index = hawk_test::raw(d.cu_seqlens); }},
      {"y is x", StatusCode::kInvalidArgument, [](ForwardArguments& a, DeviceProblem<E>&) { a.y = const_cast<void*>(a.x); }},
      {"h_final overlaps h0 by all rows but one", StatusCode::kInvalidArgument,
       [](ForwardArguments& a, DeviceProblem<E>& d) { a.h0 = hawk_test::raw(d.h_final) + 8; }},
      {"checkpoints overlap y", StatusCode::kInvalidArgument,
       [](ForwardArguments& a, DeviceProblem<E>&) { a.checkpoints = static_cast<float*>(a.y) + 4; }},
      {"N * L overflows int64", StatusCode::kInvalidArgument,
       [](ForwardArguments& a, DeviceProblem<E>&) {
         a.shape.num_sequences = std::int64_t{1} << 40;
         a.shape.seq_len = std::int64_t{1} << 40;
         a.shape.num_tokens = 0;  // what the wrapped product would give
       }},
  };
}

}  // namespace

TEST_CASE("bad input returns its status code and writes nothing (host checks, default dispatch and Forward<Config>)",
          "[rglru][forward][bad_input]") {
  const Problem p = rglru_test::make_problem<E>(256, 2, {70, 70}, false, GateMode::kFused, ResetMode::kSequenceStart, true);
  auto dispatch = [](const ForwardArguments& a, DeviceProblem<E>& d) {
    return hawk::rglru::forward(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
  };
  using Config = hawk::rglru::DefaultFusedConfig<E, 128, hawk::rglru::ResetAtSequenceStart>::type;
  auto explicit_config = [](const ForwardArguments& a, DeviceProblem<E>& d) {
    return hawk::rglru::Forward<Config>::run(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
  };
  for (const Case& c : common_cases()) {
    check_rejected(p, c, dispatch);
    check_rejected(p, c, explicit_config);
  }

  // What only a configuration can reject.
  check_rejected(p, {"block width not the configuration's", StatusCode::kUnsupportedConfiguration,
                     [](ForwardArguments& a, DeviceProblem<E>&) { a.shape.num_blocks = 4; }},
                 explicit_config);
  check_rejected(p, {"dtype not the configuration's", StatusCode::kUnsupportedConfiguration,
                     [](ForwardArguments& a, DeviceProblem<E>&) { a.dtype = hawk::DType::kFloat16; }},
                 explicit_config);
  check_rejected(p, {"reset mode not the configuration's", StatusCode::kUnsupportedConfiguration,
                     [](ForwardArguments& a, DeviceProblem<E>&) { a.reset_mode = ResetMode::kNone; }},
                 explicit_config);
  check_rejected(p, {"gate mode not the configuration's", StatusCode::kUnsupportedConfiguration,
                     [](ForwardArguments& a, DeviceProblem<E>& d) {
                       a.mode = GateMode::kGateLogits;
                       a.gx = a.x;
                       a.ga = a.x;
                       (void)d;
                     }},
                 explicit_config);
  // No shipped configuration for w = 32 (W = 256, H = 8).
  check_rejected(p, {"block width without a shipped configuration", StatusCode::kUnsupportedConfiguration,
                     [](ForwardArguments& a, DeviceProblem<E>&) { a.shape.num_blocks = 8; }},
                 dispatch);
}

TEST_CASE("a width that is not a multiple of the width tile is rejected (no shipped configuration allows one)",
          "[rglru][forward][bad_input]") {
  // Gate-logits, WidthTile 32: W = 40 rows are 16-byte multiples, but 40 % 32 != 0.
  const Problem p = rglru_test::make_problem<E>(40, 1, {20}, false, GateMode::kGateLogits, ResetMode::kNone, false);
  DeviceProblem<E> d(p);
  const auto y_before = hawk_test::bytes_of(d.y);
  const hawk::Status status = hawk::rglru::forward(d.arguments(p), hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  INFO(status.to_string());
  CHECK(status.code() == StatusCode::kUnsupportedConfiguration);
  CHECK(hawk_test::bytes_of(d.y) == y_before);
  // W = 36: rows of 72 bytes cannot be read with 16-byte vectors.
  const Problem q = rglru_test::make_problem<E>(36, 1, {20}, false, GateMode::kGateLogits, ResetMode::kNone, false);
  DeviceProblem<E> e(q);
  const hawk::Status status_q = hawk::rglru::forward(e.arguments(q), hawk_test::raw(e.workspace), e.workspace.size(), nullptr);
  INFO(status_q.to_string());
  CHECK(status_q.code() == StatusCode::kUnsupportedConfiguration);
}

TEST_CASE("bad device index tensors (cu_seqlens, state_index) are caught before anything is written",
          "[rglru][forward][bad_input]") {
  const Problem p = rglru_test::make_problem<E>(256, 2, {30, 50, 20}, true, GateMode::kFused, ResetMode::kFlags, true);
  auto dispatch = [](const ForwardArguments& a, DeviceProblem<E>& d) {
    return hawk::rglru::forward(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
  };
  auto set_cu = [](DeviceProblem<E>& d, std::vector<std::int32_t> cu) {
    d.cu_seqlens = thrust::device_vector<std::int32_t>(cu.begin(), cu.end());
  };
  const std::vector<Case> cases = {
      {"cu_seqlens decreasing", StatusCode::kInvalidArgument,
       [&](ForwardArguments& a, DeviceProblem<E>& d) {
         set_cu(d, {0, 50, 30, 100});
         a.shape.cu_seqlens = hawk_test::raw(d.cu_seqlens);
       }},
      {"cu_seqlens not ending at T", StatusCode::kInvalidArgument,
       [&](ForwardArguments& a, DeviceProblem<E>& d) {
         set_cu(d, {0, 30, 80, 99});
         a.shape.cu_seqlens = hawk_test::raw(d.cu_seqlens);
       }},
      {"cu_seqlens not starting at 0", StatusCode::kInvalidArgument,
       [&](ForwardArguments& a, DeviceProblem<E>& d) {
         set_cu(d, {1, 30, 80, 100});
         a.shape.cu_seqlens = hawk_test::raw(d.cu_seqlens);
       }},
      {"state_index out of range", StatusCode::kIndexOutOfRange,
       [&](ForwardArguments& a, DeviceProblem<E>& d) {
         // A dense batch of 3 one-token sequences whose state rows are {0, 3, 1} of a pool of 3 rows.
         set_cu(d, {0, 3, 1, 2});
         a.state_index = hawk_test::raw(d.cu_seqlens);
         a.shape.num_state_rows = 3;
         a.shape.cu_seqlens = nullptr;
         a.shape.seq_len = 1;
         a.shape.num_tokens = 3;
       }},
      {"state_index negative (other than -1, padding)", StatusCode::kIndexOutOfRange,
       [&](ForwardArguments& a, DeviceProblem<E>& d) {
         set_cu(d, {0, -2, 2, 0});
         a.state_index = hawk_test::raw(d.cu_seqlens);
         a.shape.num_state_rows = 3;
         a.shape.cu_seqlens = nullptr;
         a.shape.seq_len = 1;
         a.shape.num_tokens = 3;
       }},
      {"state_index names row 1 twice", StatusCode::kInvalidArgument,
       [&](ForwardArguments& a, DeviceProblem<E>& d) {
         set_cu(d, {1, 0, 1, 0});
         a.state_index = hawk_test::raw(d.cu_seqlens);
         a.shape.num_state_rows = 3;
         a.shape.cu_seqlens = nullptr;
         a.shape.seq_len = 1;
         a.shape.num_tokens = 3;
       }},
      {"workspace too small for the validation", StatusCode::kWorkspaceTooSmall,
       [&](ForwardArguments&, DeviceProblem<E>& d) { d.workspace.resize(4); }},
  };
  for (const Case& c : cases) {
    // Waiting for the verdict: run() returns it.
    Case waiting = c;
    waiting.spoil = [&c](ForwardArguments& a, DeviceProblem<E>& d) {
      c.spoil(a, d);
      a.shape.wait_for_device_checks = true;
    };
    check_rejected(p, waiting, dispatch);
    if (c.code == StatusCode::kWorkspaceTooSmall || c.code == StatusCode::kMisalignedPointer) continue;  // host side
    // The default, deferred: run() returns at once, writes nothing, and the workspace holds the verdict.
    auto deferred = [](const ForwardArguments& a, DeviceProblem<E>& d) {
      const hawk::Status launched = hawk::rglru::forward(a, hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
      if (!launched.ok()) return hawk::Status(StatusCode::kSuccess, "unexpected host failure: " + launched.to_string());
      return hawk::read_device_checks(hawk_test::raw(d.workspace), nullptr);
    };
    check_rejected(p, c, deferred);
  }

  // A workspace that is not 256-byte aligned.
  check_rejected(p, {"misaligned workspace", StatusCode::kMisalignedPointer, [](ForwardArguments&, DeviceProblem<E>&) {}},
                 [](const ForwardArguments& a, DeviceProblem<E>& d) {
                   return hawk::rglru::forward(a, hawk_test::raw(d.workspace) + 16, d.workspace.size() - 16, nullptr);
                 });

  // Positive control: the same problem with valid tensors runs.
  DeviceProblem<E> d(p);
  const hawk::Status ok = hawk::rglru::forward(d.arguments(p), hawk_test::raw(d.workspace), d.workspace.size(), nullptr);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  INFO(ok.to_string());
  CHECK(ok.ok());
  // And validation can be turned off (the caller guarantees the tensors): the workspace then holds only the
  // chunked forward's carries, and a workspace of that size suffices.
  ForwardArguments unchecked = d.arguments(p);
  unchecked.shape.validate_device_inputs = false;
  const std::size_t unchecked_bytes = hawk::rglru::forward_workspace_size(unchecked);
  CHECK(unchecked_bytes < hawk::rglru::forward_workspace_size(d.arguments(p)));
  CHECK(hawk::rglru::forward(unchecked, hawk_test::raw(d.workspace), unchecked_bytes, nullptr).ok());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
}
