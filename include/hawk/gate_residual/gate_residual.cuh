#pragma once
//! \file
//! The gate-residual family (SPEC §2): out = residual + gate[idx] · y, and its backward.
//!
//! - arguments.hpp: ForwardArguments, BackwardArguments, IndexLayout, DgateType
//! - config.hpp:    ForwardTile, BackwardTile (compile-time tiles; ChunkRows fixes dgate's summation order)
//! - operators/forward.cuh, operators/backward.cuh: the explicit operators Forward<E, Gate, Index, Tile>,
//!   Backward<...> (over kernels/ and block/: docs/ARCHITECTURE.md)
//! - dispatch.cuh:  forward(), backward() and their workspace sizes for runtime dtypes (the shipped tiles)

#include "hawk/gate_residual/arguments.hpp"
#include "hawk/gate_residual/config.hpp"
#include "hawk/gate_residual/dispatch.cuh"
#include "hawk/gate_residual/operators/backward.cuh"
#include "hawk/gate_residual/operators/forward.cuh"
