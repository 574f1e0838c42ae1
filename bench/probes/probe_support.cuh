#pragma once
// Shared by the probes (bench/probes/*.cu): a CUDA call that must succeed, or the probe exits with status 2.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define PROBE_CUDA(call)                                                                     \
  do {                                                                                       \
    const cudaError_t error_ = (call);                                                       \
    if (error_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(error_));                   \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)
