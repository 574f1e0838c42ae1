#pragma once
//! \file
//! Portability macros: the same header compiles as plain C++ (the float64 reference, CPU tests) and as CUDA.

#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
#define HAWK_HOST_DEVICE __host__ __device__ __forceinline__
#define HAWK_DEVICE __device__ __forceinline__
#else
#define HAWK_HOST_DEVICE inline
#define HAWK_DEVICE inline
#endif
