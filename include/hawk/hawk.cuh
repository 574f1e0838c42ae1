#pragma once
//! \file
//! The umbrella header: everything hawk offers. Include a single family's header to compile less.

#include "hawk/core/cuda_status.hpp"
#include "hawk/core/device_checks.cuh"
#include "hawk/core/dispatch.hpp"
#include "hawk/core/dtype.hpp"
#include "hawk/core/element.cuh"
#include "hawk/core/math.hpp"
#include "hawk/core/status.hpp"
#include "hawk/core/tensor_map.hpp"
#include "hawk/core/wgmma.cuh"
#include "hawk/core/workspace.hpp"
#include "hawk/gate_residual/gate_residual.cuh"
#include "hawk/rglru/rglru.cuh"
