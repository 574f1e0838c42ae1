#pragma once
//! \file
//! Kept so that code written against it still compiles: the early-exit corrections live in
//! context_parallel/early_exit.cuh.

#include "hawk/rglru/context_parallel/early_exit.cuh"
