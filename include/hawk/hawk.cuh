#pragma once
//! \file
//! The umbrella header: everything hawk offers. Include a single family's header to compile less.

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/dispatch.hpp"
#include "hawk/core/dtype.hpp"
#include "hawk/core/element.cuh"
#include "hawk/core/math.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/views.hpp"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/reset_policy.hpp"
#include "hawk/gate_residual/gate_residual.cuh"
#include "hawk/rglru/rglru.cuh"
#include "hawk/rglru/context_parallel.cuh"
#include "hawk/rglru/context_parallel_early_exit.cuh"
