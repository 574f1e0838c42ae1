#pragma once
//! \file
//! The host-side argument fuzzer's engine (tests/cpu/fuzz). For each public entry point: take random valid
//! argument structs, spoil them with named corruptions (null, misaligned or overlapping pointers, zero, negative
//! or huge sizes, inconsistent shapes, wrong dtypes and modes), and call the entry point's host checks
//! (can_implement, workspace_size, ...). Every call must return a Status, deterministically, without crashing and
//! without an AddressSanitizer or UndefinedBehaviorSanitizer report (the `host-sanitize` preset builds this with
//! both). A few invariants on top:
//! - a valid struct (or one changed only by a documented-legal variation, `Expect::kAccept`) passes the host
//!   checks; the only failure allowed is the device query (StatusCode::kCudaError: no GPU here);
//! - a single corruption marked `Expect::kReject` (a null required pointer, a misaligned one, a size of 0, ...)
//!   is refused by the host checks (not success, and not kCudaError: that would mean the host checks passed);
//! - a failure has a message; the same call twice gives the same code and message;
//! - each entry point's probe adds its own (the default dispatch agrees with the explicit operator; run()
//!   refuses what can_implement refuses, with the same code; workspace sizes agree).
//! Nothing is ever dereferenced: pointers are fake device addresses (FakeHeap), and run()-style entry points
//! are only called where they return before launching anything (see `launches_allowed`).
//!
//! Adding a case: append a Corruption (a name, an expectation, a function that spoils the context) to the
//! entry point's list in rglru_fuzz.cu / gate_residual_fuzz.cu, or a PointerField for a new pointer (its null,
//! misalignment and overlap corruptions are generated). A failure names the entry point, the corruptions, the
//! case number and the seed:
//!
//!     rglru::Forward<bf16 fused w64 ResetAtSequenceStart> case 812 (seed 0x...): corruption 'x misaligned by 2':
//!     accepted, expected misaligned pointer: got success
//!
//! Environment: HAWK_FUZZ_SEED (a number, or "random"; default fixed), HAWK_FUZZ_CASES (cases per entry point),
//! HAWK_FUZZ_CASE (only this case number: reproduces one failure), HAWK_FUZZ_ONLY (only cases whose corruption
//! names contain this text), HAWK_FUZZ_STRICT=1 (ignore the known-gap list in known_gaps.hpp),
//! HAWK_FUZZ_VERBOSE=1 (per-corruption counts).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hawk/core/status.hpp"

namespace hawk_fuzz {

// ---- settings ---------------------------------------------------------------------------------------------

struct Settings {
  std::uint64_t seed = 0;
  long cases = -1;          //!< cases per entry point; -1: each entry point's default
  std::string only;         //!< run only cases with a corruption whose name contains this
  long only_case = -1;      //!< run only this case number of each entry point (to reproduce a failure)
  bool strict = false;      //!< known gaps count as failures (and UB gaps are not skipped)
  bool verbose = false;
  bool device_present = false;  //!< a CUDA device answers: run()-style entry points would launch kernels
};

//! The settings (environment, device query), read once; the first call prints them.
const Settings& settings();

//! Whether an entry point that launches kernels once its host checks pass may be called with arguments that
//! may pass them: only without a device (then every CUDA call fails before anything runs).
inline bool launches_allowed() { return !settings().device_present; }

// ---- random numbers: splitmix64 (the same stream on every platform) ---------------------------------------

inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline std::uint64_t hash_name(const std::string& text) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ull); }
  //! Uniform in [lo, hi] (inclusive).
  std::int64_t range(std::int64_t lo, std::int64_t hi) {
    const auto span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) + 1;
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(lo) + (span == 0 ? next() : next() % span));
  }
  bool chance(double p) { return static_cast<double>(next() >> 11) * 0x1.0p-53 < p; }
  template <class T>
  const T& pick(const std::vector<T>& values) {
    return values[static_cast<std::size_t>(next() % values.size())];
  }

 private:
  std::uint64_t state_;
};

// ---- values for size corruptions ---------------------------------------------------------------------------

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kInt64Min = std::numeric_limits<std::int64_t>::min();

//! Sizes far above anything the operators take (all > 2^31 - 1), up to INT64_MAX.
inline const std::vector<std::int64_t>& huge_values() {
  static const std::vector<std::int64_t> v = {std::int64_t{1} << 31, (std::int64_t{1} << 32) + 1,
                                              std::int64_t{1} << 40, (std::int64_t{1} << 53) + 3,
                                              std::int64_t{1} << 62, kInt64Max - 1, kInt64Max};
  return v;
}
inline const std::vector<std::int64_t>& negative_values() {
  static const std::vector<std::int64_t> v = {-1, -2, -64, -(std::int64_t{1} << 31), -(std::int64_t{1} << 62),
                                              kInt64Min + 1, kInt64Min};
  return v;
}

//! Two's-complement arithmetic for spoiling values that an earlier corruption may have made huge (no UB here).
inline std::int64_t wrapping_add(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
inline std::int64_t wrapping_mul(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) * static_cast<std::uint64_t>(b));
}

//! a * b * c bytes, saturating at 2^46 and treating negative factors as 0 (extents of spoiled shapes).
inline std::size_t extent(std::int64_t a, std::int64_t b = 1, std::int64_t c = 1) {
  const long double limit = 0x1.0p46L;
  if (a <= 0 || b <= 0 || c <= 0) return 0;
  const long double product = static_cast<long double>(a) * static_cast<long double>(b) * static_cast<long double>(c);
  return product >= limit ? static_cast<std::size_t>(limit) : static_cast<std::size_t>(product);
}

// ---- fake device memory ------------------------------------------------------------------------------------

//! Distinct 256-byte-aligned addresses, one buffer after another with a gap of 7 times the buffer plus 1 MiB
//! (so that a corruption that makes a size up to 8 times larger makes no overlap of its own); nothing is mapped
//! there and the host checks never dereference them (AddressSanitizer would say so).
class FakeHeap {
 public:
  std::uintptr_t take(std::size_t bytes) {
    const std::uintptr_t at = next_;
    const std::size_t size = (bytes == 0 ? 1 : bytes) + 255;
    next_ += 8 * (size / 256 * 256) + (std::size_t{1} << 20);
    return at;
  }
  template <class T>
  T* take_as(std::size_t bytes) {
    return reinterpret_cast<T*>(take(bytes));
  }

 private:
  std::uintptr_t next_ = std::uintptr_t{1} << 40;
};

// ---- what a corruption promises -----------------------------------------------------------------------------

enum class Expect {
  kAny,     //!< anything but a crash (the host cannot tell, or the meaning changed)
  kReject,  //!< the host checks must refuse it (alone on a valid struct)
  kAccept,  //!< documented-legal: the host checks must pass it (alone on a valid struct)
};

struct Expectation {
  Expect expect = Expect::kAny;
  bool has_code = false;  //!< with kReject: the code it must be refused with
  hawk::StatusCode code = hawk::StatusCode::kSuccess;
  std::string detail;  //!< what was done, for the failure message (e.g. the value written)

  void reject() { expect = Expect::kReject; has_code = false; }
  void reject(hawk::StatusCode c) { expect = Expect::kReject; has_code = true; code = c; }
  void accept() { expect = Expect::kAccept; has_code = false; }
  void any() { expect = Expect::kAny; has_code = false; }
};

//! A named way to spoil a context. `apply` returns false when it does not apply to this context (then another
//! corruption is drawn); it may set the expectation from what it sees (e.g. a pointer required in one mode).
template <class Ctx>
struct Corruption {
  std::string name;
  Expectation expectation;  //!< the default; `apply` may change its copy
  std::function<bool(Ctx&, Rng&, Expectation&)> apply;
};

template <class Ctx>
Corruption<Ctx> corruption(std::string name, Expect expect, std::function<bool(Ctx&, Rng&, Expectation&)> apply) {
  Corruption<Ctx> c;
  c.name = std::move(name);
  c.expectation.expect = expect;
  c.apply = std::move(apply);
  return c;
}

template <class Ctx>
Corruption<Ctx> corruption(std::string name, hawk::StatusCode code, std::function<bool(Ctx&, Rng&, Expectation&)> apply) {
  Corruption<Ctx> c = corruption<Ctx>(std::move(name), Expect::kReject, std::move(apply));
  c.expectation.has_code = true;
  c.expectation.code = code;
  return c;
}

// ---- pointer fields: null, misalignment and overlap corruptions generated from a table -----------------------

enum class Need {
  kRequired,  //!< null must be refused with kNullPointer
  kOptional,  //!< null is legal (the struct stays valid)
  kMeaning,   //!< null changes the meaning (e.g. cu_seqlens: packed -> dense): anything goes
  kUnused,    //!< ignored in this configuration (e.g. gx in fused mode): any value is legal
};

template <class Ctx>
struct PointerField {
  std::string name;
  std::function<std::uintptr_t(const Ctx&)> get;
  std::function<void(Ctx&, std::uintptr_t)> set;
  std::function<Need(const Ctx&)> need;
  std::function<std::size_t(const Ctx&)> alignment;  //!< bytes the host checks must insist on (1: none)
  std::size_t max_alignment = 16;                    //!< the largest `alignment` can return (for the names)
  std::function<std::size_t(const Ctx&)> bytes;      //!< the buffer's extent, for overlaps
  bool output = false;
};

//! get/set lambdas for a pointer member expression of `Ctx` (any pointer type).
#define HAWK_FUZZ_POINTER(Ctx, member)                                                             \
  [](const Ctx& c) { return reinterpret_cast<std::uintptr_t>(c.member); },                        \
      [](Ctx& c, std::uintptr_t value) { c.member = reinterpret_cast<decltype(c.member)>(value); }

//! A pointer whose required alignment depends on the context (at most `max_alignment`).
template <class Ctx>
PointerField<Ctx> pointer_field(std::string name, std::function<std::uintptr_t(const Ctx&)> get,
                                std::function<void(Ctx&, std::uintptr_t)> set, std::function<Need(const Ctx&)> need,
                                std::function<std::size_t(const Ctx&)> alignment, std::size_t max_alignment,
                                std::function<std::size_t(const Ctx&)> bytes, bool output) {
  PointerField<Ctx> f;
  f.name = std::move(name);
  f.get = std::move(get);
  f.set = std::move(set);
  f.need = std::move(need);
  f.alignment = std::move(alignment);
  f.max_alignment = max_alignment;
  f.bytes = std::move(bytes);
  f.output = output;
  return f;
}

//! A pointer that must always be aligned to `alignment` bytes.
template <class Ctx>
PointerField<Ctx> pointer_field(std::string name, std::function<std::uintptr_t(const Ctx&)> get,
                                std::function<void(Ctx&, std::uintptr_t)> set, std::function<Need(const Ctx&)> need,
                                std::size_t alignment, std::function<std::size_t(const Ctx&)> bytes, bool output) {
  return pointer_field<Ctx>(std::move(name), std::move(get), std::move(set), std::move(need),
                            [alignment](const Ctx&) { return alignment; }, alignment, std::move(bytes), output);
}

//! How an output may meet another buffer.
enum class Overlap {
  kForbidden,     //!< any overlap must be refused (SPEC §3: outputs may not overlap inputs or each other)
  kAliasAllowed,  //!< the same pointer is a documented in-place pair; a partial overlap is refused
  kUnchecked,     //!< no documented rule (e.g. an operand the call ignores): no overlap corruption for the pair
};

//! "null F", "F misaligned by k" for the alignments the checks must insist on.
template <class Ctx>
void add_pointer_corruptions(std::vector<Corruption<Ctx>>& out, const std::vector<PointerField<Ctx>>& fields) {
  for (const PointerField<Ctx>& f : fields) {
    out.push_back(corruption<Ctx>("null " + f.name, Expect::kAny, [f](Ctx& c, Rng&, Expectation& e) {
      if (f.get(c) == 0) return false;
      const Need need = f.need(c);
      if (need == Need::kRequired) e.reject(hawk::StatusCode::kNullPointer);
      else if (need == Need::kOptional || need == Need::kUnused) e.accept();
      else e.any();
      f.set(c, 0);
      return true;
    }));
    for (std::size_t k : {1, 2, 4, 8}) {
      if (k >= f.max_alignment) continue;
      out.push_back(corruption<Ctx>(f.name + " misaligned by " + std::to_string(k), Expect::kAny,
                                    [f, k](Ctx& c, Rng&, Expectation& e) {
                                      if (f.get(c) == 0) return false;
                                      const std::size_t alignment = f.alignment(c);
                                      const Need need = f.need(c);
                                      if (k >= alignment) return false;
                                      // An ignored pointer may be checked or not; a used one must be.
                                      if (need == Need::kUnused) e.any();
                                      else e.reject(hawk::StatusCode::kMisalignedPointer);
                                      f.set(c, f.get(c) + k);
                                      return true;
                                    }));
    }
  }
}

//! Overlap corruptions of each output F, from the rule `rule(F, G)` for every other buffer G:
//! - "F overlaps an input" / "F overlaps another output": F moved onto a random G of that kind whose rule is
//!   kForbidden (same address, starting inside G, or ending inside G; the detail says which): refused;
//! - for each documented in-place pair (kAliasAllowed): "F aliases G (in place)" accepted, "F partially overlaps
//!   G" refused.
template <class Ctx>
void add_overlap_corruptions(std::vector<Corruption<Ctx>>& out, const std::vector<PointerField<Ctx>>& fields,
                             std::function<Overlap(const std::string&, const std::string&)> rule) {
  // Moves f onto g: variant 0 the same address, 1 starting inside g, 2 ending inside g. False if impossible.
  auto move = [](Ctx& c, const PointerField<Ctx>& f, const PointerField<Ctx>& g, int variant, Expectation& e) {
    const std::uintptr_t base = g.get(c);
    if (base == 0 || f.get(c) == 0) return false;
    if (f.need(c) == Need::kUnused || g.need(c) == Need::kUnused) return false;
    const std::size_t align = f.alignment(c) < 256 ? 256 : f.alignment(c);
    std::uintptr_t at = base;
    if (variant == 1) {
      const std::size_t off = g.bytes(c) / 2 / align * align;
      if (off == 0) return false;
      at = base + off;
    } else if (variant == 2) {
      const std::size_t off = f.bytes(c) / 2 / align * align;
      if (off == 0 || off >= base) return false;
      at = base - off;
    }
    e.detail = g.name + (variant == 0 ? ", same address" : variant == 1 ? ", starting inside it" : ", ending inside it");
    f.set(c, at);
    return true;
  };
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const PointerField<Ctx>& f = fields[i];
    if (!f.output) continue;
    for (bool onto_output : {false, true}) {
      std::vector<PointerField<Ctx>> targets;
      for (std::size_t j = 0; j < fields.size(); ++j)
        if (j != i && fields[j].output == onto_output && rule(f.name, fields[j].name) == Overlap::kForbidden)
          targets.push_back(fields[j]);
      if (targets.empty()) continue;
      out.push_back(corruption<Ctx>(f.name + (onto_output ? " overlaps another output" : " overlaps an input"),
                                    Expect::kReject, [f, targets, move](Ctx& c, Rng& r, Expectation& e) {
                                      const int variant = static_cast<int>(r.next() % 3);
                                      const std::size_t first = static_cast<std::size_t>(r.next() % targets.size());
                                      for (std::size_t k = 0; k < targets.size(); ++k)
                                        if (move(c, f, targets[(first + k) % targets.size()], variant, e)) return true;
                                      return false;
                                    }));
    }
    for (const PointerField<Ctx>& g : fields) {
      if (&g == &f || rule(f.name, g.name) != Overlap::kAliasAllowed) continue;
      out.push_back(corruption<Ctx>(f.name + " aliases " + g.name + " (in place)", Expect::kAccept,
                                    [f, g, move](Ctx& c, Rng&, Expectation& e) { return move(c, f, g, 0, e); }));
      out.push_back(corruption<Ctx>(f.name + " partially overlaps " + g.name, Expect::kReject,
                                    [f, g, move](Ctx& c, Rng& r, Expectation& e) {
                                      return move(c, f, g, 1 + static_cast<int>(r.next() % 2), e);
                                    }));
    }
  }
}

// ---- the driver ----------------------------------------------------------------------------------------------

//! Broken invariants found inside one probe (its own consistency checks). A problem's headline (the text
//! before the first ": ") groups equal failures in the report.
struct Findings {
  std::vector<std::string> problems;
  void add(std::string problem) { problems.push_back(std::move(problem)); }
  void expect_same_code(const char* what, const hawk::Status& expected, const hawk::Status& got) {
    if (expected.code() != got.code())
      add(std::string(what) + " disagrees: " + got.to_string() + " where the reference gave " + expected.to_string());
  }
};

//! One entry point (or a family of entry points checked together) to fuzz.
template <class Ctx>
struct EntryPoint {
  std::string name;
  int default_cases = 10000;
  std::function<Ctx(Rng&)> make_valid;
  std::vector<Corruption<Ctx>> corruptions;
  //! Calls the entry point(s) and returns the verdict of the host checks; records broken invariants of its own.
  std::function<hawk::Status(const Ctx&, Findings&)> probe;
  //! The host checks query the device (so a valid struct may get kCudaError without a GPU).
  bool queries_device = true;
  //! Names of the known undefined behaviours (known_gaps.hpp) these arguments would run into; a case with a
  //! listed one is skipped (the sanitizer would abort the run). Optional.
  std::function<std::vector<std::string>(const Ctx&)> hazards;
};

struct Failure {
  std::string key;      //!< entry point, corruption names and the problem's headline: equal failures group
  std::string message;  //!< the full text, with the case number and seed to reproduce it
};

//! What running an entry point found.
struct Report {
  std::string entry;
  long cases = 0, valid = 0, single = 0, stacked = 0;
  double seconds = 0;
  std::map<hawk::StatusCode, long> verdicts;
  std::vector<Failure> failures;
  std::vector<std::string> notes;  //!< known gaps reproduced, gaps that no longer reproduce, skipped UB
  std::string summary() const;
};

//! Known gaps (known_gaps.hpp): entry points and corruptions that fail today, or (ub) known undefined
//! behaviours, named by the entry point's `hazards`, whose cases are skipped unless strict.
struct KnownGap {
  const char* entry;  //!< glob over entry-point names ('*' matches anything)
  const char* name;   //!< glob over "corruption name (detail)", or (ub) a hazard name
  bool ub;
  const char* what;   //!< what goes wrong, for the report
};
const std::vector<KnownGap>& known_gaps();
bool glob_match(const char* pattern, const char* text);
const KnownGap* find_known_gap(const std::string& entry, const std::string& name, bool ub);

//! Names the case being run for the crash handlers (a sanitizer report or a signal prints it).
void set_crash_context(const std::string& context);

std::string status_text(const hawk::Status& status);
std::string hex(std::uint64_t value);
bool valid_code(hawk::StatusCode code);

inline std::string headline(const std::string& problem) {
  const std::size_t colon = problem.find(": ");
  return colon == std::string::npos ? problem : problem.substr(0, colon);
}

template <class Ctx>
Report run_entry(const EntryPoint<Ctx>& entry) {
  const Settings& s = settings();
  Report report;
  report.entry = entry.name;
  const long cases = s.cases > 0 ? s.cases : entry.default_cases;
  const std::uint64_t entry_seed = mix64(s.seed ^ hash_name(entry.name));
  std::vector<long> applied(entry.corruptions.size(), 0), refused(entry.corruptions.size(), 0);
  std::map<std::string, long> gap_hits;    // known-gap pattern -> times it reproduced
  std::map<std::string, long> gap_passes;  // known-gap pattern -> times it matched a case that did not fail
  std::map<std::string, long> skipped_ub;  // hazard -> cases skipped
  const auto start = std::chrono::steady_clock::now();

  for (long index = 0; index < cases; ++index) {
    if (s.only_case >= 0 && index != s.only_case) continue;
    const std::string case_name = entry.name + " case " + std::to_string(index) + " (seed " + hex(s.seed) + ")";
    set_crash_context(case_name + ": drawing the arguments");
    Rng rng(mix64(entry_seed + static_cast<std::uint64_t>(index)));
    Ctx ctx = entry.make_valid(rng);
    // 1 in 16 valid as drawn; 3 in 4 of the rest one corruption; the others 2 or 3 stacked.
    int wanted = 0;
    const std::uint64_t draw = rng.next() % 64;
    if (draw >= 4) wanted = draw < 49 ? 1 : static_cast<int>(2 + rng.next() % 2);
    std::vector<std::size_t> chosen;
    std::vector<Expectation> expectations;
    for (int attempt = 0; static_cast<int>(chosen.size()) < wanted && attempt < 64; ++attempt) {
      const std::size_t k = static_cast<std::size_t>(rng.next() % entry.corruptions.size());
      bool repeat = false;
      for (std::size_t c : chosen) repeat = repeat || c == k;
      if (repeat) continue;
      Ctx trial = ctx;
      Expectation e = entry.corruptions[k].expectation;
      if (!entry.corruptions[k].apply(trial, rng, e)) continue;
      ctx = trial;
      chosen.push_back(k);
      expectations.push_back(e);
    }
    if (wanted > 0 && chosen.empty()) continue;
    if (!s.only.empty()) {
      bool match = false;
      for (std::size_t k : chosen) match = match || entry.corruptions[k].name.find(s.only) != std::string::npos;
      if (!match) continue;
    }
    if (entry.hazards && !s.strict) {
      bool skip = false;
      for (const std::string& hazard : entry.hazards(ctx)) {
        if (find_known_gap(entry.name, hazard, true) != nullptr) {
          ++skipped_ub[hazard];
          skip = true;
        }
      }
      if (skip) continue;
    }

    std::string names, plain_names;
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      names += (i ? "', '" : "'") + entry.corruptions[chosen[i]].name;
      plain_names += (i ? "', '" : "'") + entry.corruptions[chosen[i]].name;
      if (!expectations[i].detail.empty()) names += " (" + expectations[i].detail + ")";
      if (i + 1 == chosen.size()) {
        names += "'";
        plain_names += "'";
      }
    }
    const std::string what = chosen.empty() ? std::string("valid arguments") : "corruption " + names;
    const std::string where = case_name + ": " + what;
    set_crash_context(where);

    Findings findings;
    const hawk::Status status = entry.probe(ctx, findings);
    Findings again;
    const hawk::Status repeat = entry.probe(ctx, again);
    set_crash_context("");

    ++report.cases;
    ++report.verdicts[status.code()];
    if (chosen.empty()) ++report.valid;
    else if (chosen.size() == 1) ++report.single;
    else ++report.stacked;
    for (std::size_t k : chosen) {
      ++applied[k];
      if (!status.ok() && status.code() != hawk::StatusCode::kCudaError) ++refused[k];
    }

    std::vector<std::string> problems = findings.problems;
    if (!valid_code(status.code()))
      problems.push_back("unknown status code: " + std::to_string(static_cast<int>(status.code())));
    if (!status.ok() && status.message().empty()) problems.push_back("failure without a message: " + status.to_string());
    if (repeat.code() != status.code() || repeat.message() != status.message())
      problems.push_back("not deterministic: " + status_text(status) + " then " + status_text(repeat));

    // What the corruptions promise: judged alone (stacked ones may cancel or mask each other).
    // (Stacked legal variations may interact, e.g. a layout change that needs more workspace: only alone.)
    bool all_legal = chosen.size() <= 1;
    for (const Expectation& e : expectations) all_legal = all_legal && e.expect == Expect::kAccept;
    const bool passed_host = status.ok() || (entry.queries_device && status.code() == hawk::StatusCode::kCudaError);
    std::string promise;
    if (all_legal && !passed_host) {
      promise = std::string(chosen.empty() ? "valid arguments refused" : "a legal variation refused") + ": " +
                status_text(status);
    } else if (chosen.size() == 1 && expectations[0].expect == Expect::kReject) {
      const Expectation& e = expectations[0];
      const std::string wanted_text = e.has_code ? std::string(hawk::to_string(e.code)) : std::string("a rejection");
      if (passed_host) promise = "accepted, expected " + wanted_text + ": got " + status_text(status);
      else if (e.has_code && status.code() != e.code) promise = "wrong code, expected " + wanted_text + ": got " + status_text(status);
    }
    // Known gaps match the corruption's name and detail: "y overlaps an input (carry_in, same address)".
    const KnownGap* gap = nullptr;
    if (chosen.size() == 1 && !s.strict) {
      const std::string full = entry.corruptions[chosen[0]].name +
                               (expectations[0].detail.empty() ? std::string() : " (" + expectations[0].detail + ")");
      gap = find_known_gap(entry.name, full, false);
    }
    if (!promise.empty()) {
      if (gap != nullptr) ++gap_hits[gap->name];
      else problems.push_back(promise);
    } else if (gap != nullptr && expectations[0].expect != Expect::kAny) {
      ++gap_passes[gap->name];
    }
    for (const std::string& p : problems)
      report.failures.push_back(Failure{entry.name + ": " + (chosen.empty() ? std::string("valid arguments") : plain_names) +
                                            ": " + headline(p),
                                        where + ": " + p});
  }

  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto join = [](const std::map<std::string, long>& counts, const char* unit) {
    std::string text;
    for (const auto& c : counts) text += (text.empty() ? "'" : ", '") + c.first + "' " + std::to_string(c.second) + unit;
    return text;
  };
  if (!gap_hits.empty()) report.notes.push_back("known gaps reproduced (known_gaps.hpp): " + join(gap_hits, "x"));
  if (!skipped_ub.empty())
    report.notes.push_back("cases skipped for known undefined behaviour (known_gaps.hpp; HAWK_FUZZ_STRICT=1 runs them): " +
                           join(skipped_ub, ""));
  for (const auto& pass : gap_passes)
    if (gap_hits.count(pass.first) == 0)
      report.notes.push_back("known gap '" + pass.first + "' no longer reproduces (" + std::to_string(pass.second) +
                             " cases): remove it from known_gaps.hpp for " + entry.name);
  if (s.verbose) {
    for (std::size_t k = 0; k < entry.corruptions.size(); ++k)
      report.notes.push_back("'" + entry.corruptions[k].name + "': applied " + std::to_string(applied[k]) +
                             ", refused by the host checks " + std::to_string(refused[k]));
  }
  return report;
}

//! Prints the report and hands its failures to Catch2 (defined in main.cpp).
void check_report(const Report& report);

}  // namespace hawk_fuzz
