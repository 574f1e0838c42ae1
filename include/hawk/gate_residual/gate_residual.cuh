#pragma once
//! \file
//! The gate-residual family (SPEC §2): out = residual + gate[idx] · y, and its backward.
//!
//! - arguments.hpp: ForwardArguments, BackwardArguments, IndexLayout, DgateType
//! - policy.cuh:    ForwardTile, BackwardTile (compile-time tiles; ChunkRows fixes dgate's summation order)
//! - forward.cuh / backward.cuh: the explicit operators Forward<E, Gate, Index, Tile>, Backward<...>
//! - dispatch.cuh:  forward(), backward() and their workspace sizes for runtime dtypes (the shipped tiles)

#include "hawk/gate_residual/arguments.hpp"
#include "hawk/gate_residual/backward.cuh"
#include "hawk/gate_residual/dispatch.cuh"
#include "hawk/gate_residual/forward.cuh"
#include "hawk/gate_residual/policy.cuh"
