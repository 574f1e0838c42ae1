#pragma once
//! \file
//! Known gaps in the host checks, tracked to be fixed in include/. Two kinds:
//! - ub = false: (entry point, corruption) pairs that fail today (accepted where SPEC §3 says refuse, or refused
//!   with another code). A single-corruption case that reproduces one is a note, not a failure; once it no
//!   longer reproduces the fuzzer says so: delete the line then.
//! - ub = true: undefined behaviour in the checks (signed overflow, pointer overflow), named by the entry
//!   point's `hazards` (rglru_args.hpp). Cases that would run into a listed one are skipped, because the
//!   sanitizer aborts the whole run at the first report; delete the line once include/ is fixed.
//! HAWK_FUZZ_STRICT=1 ignores this list: every gap fails and every UB case runs.
//! Globs: '*' matches any text.

#include <vector>

#include "fuzz.hpp"

namespace hawk_fuzz {

inline const std::vector<KnownGap> kKnownGaps = {
    // ---- undefined behaviour -----------------------------------------------------------------------------------
    {"rglru::context_parallel::forward_correct", "carry_in misaligned by *", false,
     "carry_in's alignment is checked only inside the forward it runs, after forward_can_implement's device query"},
    {"rglru::context_parallel::backward_transfer_split", "dh0_zero misaligned by *", false,
     "dh0_zero's and boundary_dh's alignment is checked only inside the backward calls it makes, after the device "
     "query (and, on a GPU, after the suffix's backward has already run)"},
    {"rglru::context_parallel::backward_transfer_split", "boundary_dh misaligned by *", false,
     "as 'dh0_zero misaligned'"},
    {"rglru::context_parallel::backward_correct", "dh0_zero misaligned by *", false, "as in backward_transfer_split"},
    {"rglru::context_parallel::backward_correct", "boundary_dh misaligned by *", false,
     "as in backward_transfer_split"},
    // The corrections' own operands (carry_in, h_end; dh0_zero, boundary_dh) are not checked for overlaps with the
    // piece's tensors up front: some only by the inner calls (after the device query; backward_transfer_split's
    // prefix refuses after its suffix has already run and written), some never (h_end against checkpoints, or a
    // partial overlap of h_final and h_end, which forward_correct copies with cudaMemcpyAsync).
    {"rglru::context_parallel::forward_correct", "*(carry_in,*", false, "see above"},
    {"rglru::context_parallel::forward_correct", "*(h_end,*", false, "see above"},
    {"rglru::context_parallel::backward_transfer_split", "dh0_zero overlaps *", false, "see above"},
    {"rglru::context_parallel::backward_transfer_split", "boundary_dh overlaps *", false, "see above"},
    {"rglru::context_parallel::backward_transfer_split", "*(dh0_zero,*", false, "see above"},
    {"rglru::context_parallel::backward_transfer_split", "*(boundary_dh,*", false, "see above"},
    {"rglru::context_parallel::backward_correct", "*(dh0_zero,*", false, "see above"},
    {"rglru::context_parallel::backward_correct", "*(boundary_dh,*", false, "see above"},
};

}  // namespace hawk_fuzz
