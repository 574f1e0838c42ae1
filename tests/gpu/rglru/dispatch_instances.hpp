#pragma once
// The RG-LRU default dispatch for the suite's test files. Each call of hawk::rglru::forward / decode / backward
// instantiates every shipped kernel, so a test file that calls them compiled the whole dispatch again (about
// 1.5 to 3.5 minutes of the CI machine's time each, 2026-12-03). In hawk_gpu_rglru (HAWK_TEST_SHARED_DISPATCH) the
// declarations below tell every file that the dispatch is instantiated once, in dispatch_instances.cu; the other
// suites (the sm_90a one, whose files are built for another target) still instantiate it where they call it. The
// same templates with the same definitions and macros (the target's), so the same code runs.

#include <cstddef>

#include <cuda_runtime_api.h>

#include "hawk/rglru/dispatch.cuh"

//! The dispatch's entry points the suite calls, each as `PREFIX` (extern template / template) plus its signature: one
//! list for the declarations below and the instantiations in dispatch_instances.cu.
#define HAWK_TEST_RGLRU_DISPATCH_ENTRY_POINTS(PREFIX)                                              \
  namespace hawk {                                                                                 \
  namespace rglru {                                                                                \
  PREFIX Status forward<void>(const ForwardArguments&, void*, std::size_t, cudaStream_t);          \
  PREFIX Status decode<void>(const ForwardArguments&, void*, std::size_t, cudaStream_t);           \
  PREFIX Status backward<void>(const BackwardArguments&, void*, std::size_t, cudaStream_t);        \
  PREFIX std::size_t forward_workspace_size<void>(const ForwardArguments&);                        \
  PREFIX std::size_t backward_workspace_size<void>(const BackwardArguments&);                      \
  PREFIX Status forward_can_implement<void>(const ForwardArguments&);                              \
  PREFIX Status backward_can_implement<void>(const BackwardArguments&);                            \
  }                                                                                                \
  }

#if defined(HAWK_TEST_SHARED_DISPATCH)
HAWK_TEST_RGLRU_DISPATCH_ENTRY_POINTS(extern template)
#endif
