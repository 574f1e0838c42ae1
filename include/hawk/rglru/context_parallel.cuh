#pragma once
//! \file
//! Kept so that code written against it still compiles: context parallelism lives in context_parallel/.

#include "hawk/rglru/context_parallel/context_parallel.cuh"
