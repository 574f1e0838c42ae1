// Catch2 runner for the GPU suites: without a CUDA device the executable reports itself skipped to CTest
// (exit code 77, registered as SKIP_RETURN_CODE), never passed and never failed; so does a suite built for sm_90a
// alone (HAWK_TEST_REQUIRES_SM90, tests/CMakeLists.txt) on a GPU of another architecture.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char** argv) {
  int device_count = 0;
  const cudaError_t error = cudaGetDeviceCount(&device_count);
  if (error != cudaSuccess || device_count == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n",
                error != cudaSuccess ? cudaGetErrorString(error) : "device count is 0");
    return 77;
  }
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, 0);
  std::printf("GPU: %s (sm_%d%d, %d SMs)\n", properties.name, properties.major, properties.minor,
              properties.multiProcessorCount);
#if defined(HAWK_TEST_REQUIRES_SM90)
  if (properties.major != 9) {
    std::printf("SKIPPED: this suite is built for sm_90a only\n");
    return 77;
  }
#endif
  return Catch::Session().run(argc, argv);
}
