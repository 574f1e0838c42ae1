// Gate-residual correctness for element type fp32 (residual, y, out, dout, dy), with bf16 and fp32 gates and
// int32 and int64 indices: the instantiation file of Forward/Backward<float, *, *> with the shipped tiles.
#include "forward_backward_dtype_tests.cuh"

TEST_CASE("fp32: forward, dy and dgate match float64 for every gate and index type, D and N",
          "[gate_residual][gpu][fp32]") {
  gr_test::check_every_combination_against_float64<float>();
}

TEST_CASE("fp32: in-place forward (out == residual) gives the same bits", "[gate_residual][gpu][fp32]") {
  gr_test::check_in_place_forward<float>();
}

TEST_CASE("fp32: the element-wise path for misaligned views gives the 16-byte path's bits",
          "[gate_residual][gpu][fp32]") {
  gr_test::check_element_path_matches_vector_path<float>();
}

TEST_CASE("fp32: a NaN in y stays in its own element of out and dgate", "[gate_residual][gpu][fp32]") {
  gr_test::check_nan_stays_in_its_element<float>();
}
