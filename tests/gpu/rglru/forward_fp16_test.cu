// RG-LRU forward, fp16: every shipped configuration of this element type against the float64 reference
// (one instantiation file per dtype; the tests themselves are in forward_dtype_tests.cuh).
#include "forward_dtype_tests.cuh"

HAWK_RGLRU_FORWARD_DTYPE_TESTS(__half, "fp16")
