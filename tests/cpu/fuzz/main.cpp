//! \file
//! The fuzzer's Catch2 runner and the engine's non-template parts (fuzz.hpp): settings from the environment,
//! crash context for signals and sanitizer reports, the known-gap list, reporting.

#define CATCH_CONFIG_RUNNER
// Our own handlers name the case that crashed; Catch2's would hide AddressSanitizer's SEGV report.
#define CATCH_CONFIG_NO_POSIX_SIGNALS
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <map>
#include <string>
#include <utility>

#include "fuzz.hpp"
#include "known_gaps.hpp"

// Sanitizer defaults (ignored in a build without them): abort after a report, so that the SIGABRT handler
// below can name the case; protect_shadow_gap=0 lets the CUDA driver map its memory (only matters with a GPU).
extern "C" __attribute__((visibility("default"), used)) const char* __asan_default_options() {
  return "abort_on_error=1:protect_shadow_gap=0";
}
extern "C" __attribute__((visibility("default"), used)) const char* __ubsan_default_options() {
  return "abort_on_error=1:halt_on_error=1:print_stacktrace=1";
}

namespace hawk_fuzz {

namespace {

char g_context[2048];

void write_text(const char* text) {
  std::size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(2, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<std::size_t>(n);
  }
}

void on_fatal_signal(int signal_number) {
  write_text("\nhawk fuzz: crashed (signal ");
  char number[16];
  int at = 15;
  number[at] = '\0';
  int value = signal_number;
  do {
    number[--at] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && at > 0);
  write_text(number + at);
  write_text(") in ");
  write_text(g_context[0] != '\0' ? g_context : "(no case running)");
  write_text("\n");
  ::_exit(128 + signal_number);
}

void install_crash_handlers() {
  ::signal(SIGABRT, on_fatal_signal);  // sanitizer reports end in abort() (abort_on_error above)
#if !defined(__SANITIZE_ADDRESS__)
  // Without AddressSanitizer (its own SEGV report is better), name the case on a plain crash too.
  ::signal(SIGSEGV, on_fatal_signal);
  ::signal(SIGBUS, on_fatal_signal);
  ::signal(SIGFPE, on_fatal_signal);
  ::signal(SIGILL, on_fatal_signal);
#endif
}

std::uint64_t parse_seed(const char* text, bool& ok) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 0);
  ok = end != text && *end == '\0';
  return value;
}

Settings read_settings() {
  Settings s;
  s.seed = 0x6861776b2d66757aull;  // "hawk-fuz": the default is fixed, so that CI is repeatable
  if (const char* text = std::getenv("HAWK_FUZZ_SEED")) {
    if (std::strcmp(text, "random") == 0) {
      std::random_device device;
      s.seed = (static_cast<std::uint64_t>(device()) << 32) ^ device() ^
               static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    } else {
      bool ok = false;
      const std::uint64_t value = parse_seed(text, ok);
      if (ok) s.seed = value;
      else std::fprintf(stderr, "hawk fuzz: ignoring HAWK_FUZZ_SEED=%s (not a number)\n", text);
    }
  }
  if (const char* text = std::getenv("HAWK_FUZZ_CASES")) s.cases = std::strtol(text, nullptr, 0);
  if (const char* text = std::getenv("HAWK_FUZZ_ONLY")) s.only = text;
  if (const char* text = std::getenv("HAWK_FUZZ_CASE")) s.only_case = std::strtol(text, nullptr, 0);
  if (const char* text = std::getenv("HAWK_FUZZ_STRICT")) s.strict = std::strcmp(text, "0") != 0 && *text != '\0';
  if (const char* text = std::getenv("HAWK_FUZZ_VERBOSE")) s.verbose = std::strcmp(text, "0") != 0 && *text != '\0';
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  s.device_present = error == cudaSuccess && devices > 0;
  (void)cudaGetLastError();
  std::printf("hawk fuzz: seed %s (HAWK_FUZZ_SEED), %s cases per entry point (HAWK_FUZZ_CASES), %s%s, CUDA device: "
              "%s (%s)\n",
              hex(s.seed).c_str(), s.cases > 0 ? std::to_string(s.cases).c_str() : "default",
              s.strict ? "strict (known gaps fail)" : "known gaps tolerated (HAWK_FUZZ_STRICT=1 to fail them)",
              s.only.empty() ? "" : (", only corruptions containing '" + s.only + "'").c_str(),
              s.device_present ? "yes: entry points that would launch kernels run only with refused arguments"
                               : "none: every entry point runs",
              cudaGetErrorName(error));
  std::fflush(stdout);
  return s;
}

}  // namespace

const Settings& settings() {
  static const Settings s = read_settings();
  return s;
}

void set_crash_context(const std::string& context) {
  const std::size_t n = context.size() < sizeof(g_context) - 1 ? context.size() : sizeof(g_context) - 1;
  std::memcpy(g_context, context.data(), n);
  g_context[n] = '\0';
}

std::string hex(std::uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%016llx", static_cast<unsigned long long>(value));
  return text;
}

bool valid_code(hawk::StatusCode code) {
  const int value = static_cast<int>(code);
  return value >= static_cast<int>(hawk::StatusCode::kSuccess) && value <= static_cast<int>(hawk::StatusCode::kCudaError);
}

std::string status_text(const hawk::Status& status) {
  return status.ok() ? std::string("success") : "'" + status.to_string() + "'";
}

bool glob_match(const char* pattern, const char* text) {
  if (*pattern == '\0') return *text == '\0';
  if (*pattern == '*') return glob_match(pattern + 1, text) || (*text != '\0' && glob_match(pattern, text + 1));
  return *text != '\0' && *pattern == *text && glob_match(pattern + 1, text + 1);
}

const std::vector<KnownGap>& known_gaps() { return kKnownGaps; }

const KnownGap* find_known_gap(const std::string& entry, const std::string& name, bool ub) {
  for (const KnownGap& gap : known_gaps())
    if (gap.ub == ub && glob_match(gap.entry, entry.c_str()) && glob_match(gap.name, name.c_str()))
      return &gap;
  return nullptr;
}

std::string Report::summary() const {
  std::string text = entry + ": " + std::to_string(cases) + " cases (" + std::to_string(valid) + " valid, " +
                     std::to_string(single) + " one corruption, " + std::to_string(stacked) + " stacked) in ";
  char seconds_text[32];
  std::snprintf(seconds_text, sizeof(seconds_text), "%.2f s", seconds);
  text += seconds_text;
  text += "; verdicts:";
  for (const auto& v : verdicts) text += std::string(" ") + hawk::to_string(v.first) + " " + std::to_string(v.second) + ",";
  if (!verdicts.empty()) text.pop_back();
  return text;
}

void check_report(const Report& report) {
  std::printf("%s\n", report.summary().c_str());
  for (const std::string& note : report.notes) std::printf("  note: %s\n", note.c_str());
  // Equal failures (same corruptions, same problem) once, with their count and the first case.
  std::map<std::string, std::pair<long, std::string>> groups;
  std::vector<std::string> order;
  for (const Failure& f : report.failures) {
    auto found = groups.find(f.key);
    if (found == groups.end()) {
      groups.emplace(f.key, std::make_pair(1L, f.message));
      order.push_back(f.key);
    } else {
      ++found->second.first;
    }
  }
  for (const std::string& key : order)
    std::printf("  FAIL (%ld cases) %s\n", groups[key].first, groups[key].second.c_str());
  if (!order.empty())
    std::printf("  (one case again: HAWK_FUZZ_SEED=%s HAWK_FUZZ_CASE=<case> %s)\n", hex(settings().seed).c_str(),
                "hawk_cpu_fuzz '<test case>'");
  std::fflush(stdout);
  constexpr std::size_t kShown = 40;
  for (std::size_t i = 0; i < order.size() && i < kShown; ++i)
    FAIL_CHECK(groups[order[i]].second + " [" + std::to_string(groups[order[i]].first) + " cases]");
  if (order.size() > kShown)
    FAIL_CHECK(std::to_string(order.size() - kShown) + " more kinds of failure in " + report.entry + " (see above)");
  CHECK(report.cases > 0);
}

}  // namespace hawk_fuzz

int main(int argc, char* argv[]) {
  hawk_fuzz::install_crash_handlers();
  return Catch::Session().run(argc, argv);
}
