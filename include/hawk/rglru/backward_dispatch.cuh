#pragma once
//! \file
//! Kept so that code written against it still compiles: the backward's default dispatch (`backward`,
//! `backward_can_implement`, `backward_workspace_size`) now lives in dispatch.cuh, beside the forward's, and
//! shares its one configuration visit.

#include "hawk/rglru/dispatch.cuh"
