// RG-LRU backward, bf16: every shipped configuration of this element type (BackwardConfig of each shipped forward
// configuration: fused w = 64, 128, 256 and gate-logits, x NoReset, ResetAtSequenceStart, ResetFlags) against the
// float64 reference gradients (one instantiation file per dtype; the tests are in backward_support.cuh).
#include "backward_support.cuh"

HAWK_RGLRU_BACKWARD_DTYPE_TESTS(__nv_bfloat16, "bf16")
