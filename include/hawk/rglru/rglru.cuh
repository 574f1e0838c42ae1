#pragma once
//! \file
//! The RG-LRU family, whole: arguments, configurations, the operators (Forward, DecodeStep, Backward), the
//! default dispatch (forward, decode, backward) and context parallelism. The layers under it (block/, kernels/,
//! operators/) are described in docs/ARCHITECTURE.md.

#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/context_parallel/context_parallel.cuh"
#include "hawk/rglru/context_parallel/early_exit.cuh"
#include "hawk/rglru/dispatch.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/modes.hpp"
#include "hawk/rglru/operators/backward.cuh"
#include "hawk/rglru/operators/chunked_forward.cuh"
#include "hawk/rglru/operators/decode_step.cuh"
#include "hawk/rglru/operators/forward.cuh"
#include "hawk/rglru/operators/wgmma_chunked_forward.cuh"
#include "hawk/rglru/operators/wgmma_persistent_forward.cuh"
