#pragma once
//! \file
//! Runtime value -> compile-time constant, in one readable place (after flash-attention's static_switch.h).
//!
//! Each macro takes the runtime value, the name the compile-time value gets inside the body, and the body as
//! a lambda-like block that may `return`. Example:
//!
//!     return HAWK_DISPATCH_DTYPE(args.dtype, Element, [&] { return run_typed<Element>(args, stream); });
//!
//! An unknown value yields a kUnsupportedConfiguration Status, so the body must return `hawk::Status`.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "hawk/core/dtype.hpp"
#include "hawk/core/status.hpp"

//! Call BODY with `ALIAS` bound to float, __half or __nv_bfloat16 according to the runtime DType.
#define HAWK_DISPATCH_DTYPE(DTYPE_VALUE, ALIAS, ...)                                                   \
  [&]() -> ::hawk::Status {                                                                           \
    switch (DTYPE_VALUE) {                                                                            \
      case ::hawk::DType::kFloat32: { using ALIAS = float; return __VA_ARGS__(); }                     \
      case ::hawk::DType::kFloat16: { using ALIAS = __half; return __VA_ARGS__(); }                    \
      case ::hawk::DType::kBFloat16: { using ALIAS = __nv_bfloat16; return __VA_ARGS__(); }            \
    }                                                                                                 \
    return ::hawk::Status(::hawk::StatusCode::kUnsupportedConfiguration, "unknown element dtype");     \
  }()

//! Call BODY with `ALIAS` bound to float or __nv_bfloat16 (the gate/parameter types hawk accepts).
#define HAWK_DISPATCH_PARAM_DTYPE(DTYPE_VALUE, ALIAS, ...)                                             \
  [&]() -> ::hawk::Status {                                                                           \
    switch (DTYPE_VALUE) {                                                                            \
      case ::hawk::DType::kFloat32: { using ALIAS = float; return __VA_ARGS__(); }                     \
      case ::hawk::DType::kBFloat16: { using ALIAS = __nv_bfloat16; return __VA_ARGS__(); }            \
      default: break;                                                                                 \
    }                                                                                                 \
    return ::hawk::Status(::hawk::StatusCode::kUnsupportedConfiguration,                              \
                          "parameter dtype must be fp32 or bf16");                                    \
  }()

//! Call BODY with `ALIAS` bound to int32_t or int64_t according to the runtime IndexType.
#define HAWK_DISPATCH_INDEX(INDEX_VALUE, ALIAS, ...)                                                   \
  [&]() -> ::hawk::Status {                                                                           \
    switch (INDEX_VALUE) {                                                                            \
      case ::hawk::IndexType::kInt32: { using ALIAS = std::int32_t; return __VA_ARGS__(); }            \
      case ::hawk::IndexType::kInt64: { using ALIAS = std::int64_t; return __VA_ARGS__(); }            \
    }                                                                                                 \
    return ::hawk::Status(::hawk::StatusCode::kUnsupportedConfiguration, "unknown index type");       \
  }()
