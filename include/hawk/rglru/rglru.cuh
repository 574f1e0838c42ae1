#pragma once
//! \file
//! The RG-LRU family: configurations, operators, the default dispatch, and the per-token math they share.

#include "hawk/rglru/argument_checks.hpp"
#include "hawk/rglru/arguments.hpp"
#include "hawk/rglru/async_copy.cuh"
#include "hawk/rglru/backward.cuh"
#include "hawk/rglru/backward_config.cuh"
#include "hawk/rglru/backward_dispatch.cuh"
#include "hawk/rglru/backward_projection_kernel.cuh"
#include "hawk/rglru/backward_scan_kernel.cuh"
#include "hawk/rglru/config.cuh"
#include "hawk/rglru/decode_step.cuh"
#include "hawk/rglru/decode_step_kernel.cuh"
#include "hawk/rglru/dispatch.cuh"
#include "hawk/rglru/forward.cuh"
#include "hawk/rglru/forward_kernel.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/param_grad_reduce_kernel.cuh"
#include "hawk/rglru/projection.cuh"
#include "hawk/rglru/reset_policy.hpp"
#include "hawk/rglru/validate.cuh"
