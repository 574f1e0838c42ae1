#pragma once
// The per-element-type correctness checks; each forward_backward_<dtype>_test.cu instantiates them for one element type
// (fp32, fp16, bf16) with both gate types and both index types.

#include "support.cuh"

namespace gr_test {

//! Inputs of one (N, D) shape in element type E, shared by the four (gate, index) combinations.
struct RowData {
  std::int64_t N = 0, D = 0;
  std::vector<double> residual, y, dout;
};

template <class E>
RowData make_row_data(std::int64_t N, std::int64_t D) {
  RowData data;
  data.N = N;
  data.D = D;
  const std::size_t n = static_cast<std::size_t>(N * D);
  data.residual = random_values<E>(n, -2.0, 2.0, hawk_test::fresh_seed());
  data.y = random_values<E>(n, -2.0, 2.0, hawk_test::fresh_seed());
  data.dout = random_values<E>(n, -2.0, 2.0, hawk_test::fresh_seed());
  return data;
}

template <class E>
struct RowBuffers {
  thrust::device_vector<E> residual, y, dout;
  explicit RowBuffers(const RowData& data)
      : residual(upload<E>(data.residual)), y(upload<E>(data.y)), dout(upload<E>(data.dout)) {}
};

//! Forward, backward with fp32 dgate, and backward with dgate rounded to the gate type, against float64.
template <class E, class Gt, class I>
void check_combination(const RowData& data, RowBuffers<E>& rows, gr::IndexLayout layout, std::int64_t rows_per_group) {
  const std::int64_t N = data.N, D = data.D;
  const IndexPlan plan = make_index_plan(layout, N, rows_per_group, gr::kDefaultChunkRows, hawk_test::fresh_seed());
  const std::int64_t G = plan.num_gate_rows;
  INFO("E=" << hawk::ElementTraits<E>::kName << " gate=" << hawk::ElementTraits<Gt>::kName << " idx=int"
            << 8 * sizeof(I) << " N=" << N << " D=" << D << " G=" << G << " layout=" << gr::to_string(layout)
            << " S=" << rows_per_group);
  const std::vector<double> gate = random_values<Gt>(static_cast<std::size_t>(G * D), -1.5, 1.5, hawk_test::fresh_seed());
  const Reference ref = reference(data.residual, data.y, gate, data.dout, plan, N, D);

  auto d_gate = upload<Gt>(gate);
  auto d_idx = upload_index<I>(plan.idx);
  thrust::device_vector<E> out(static_cast<std::size_t>(N * D)), dy(out.size()), dres(out.size());
  thrust::device_vector<float> dgate(static_cast<std::size_t>(G * D));
  thrust::device_vector<Gt> dgate_rounded(dgate.size());
  hawk_test::poison(out);
  hawk_test::poison(dy);
  hawk_test::poison(dres);
  hawk_test::poison(dgate);
  hawk_test::poison(dgate_rounded);
  thrust::device_vector<unsigned char> workspace;
  const gr::ProblemShape shape = shape_of<E, Gt, I>(N, D, G);

  hawk::Status status = forward<E, Gt, I>(shape, raw(rows.residual), raw(rows.y), raw(d_gate), raw(d_idx), raw(out),
                                          workspace);
  INFO(status.to_string());
  REQUIRE(status.ok());
  status = backward<E, Gt, I>(shape, layout, plan.rows_per_group, raw(rows.dout), raw(rows.y), raw(d_gate),
                              raw(d_idx), raw(dy), raw(dgate), gr::DgateType::kFloat32, workspace, raw(dres));
  INFO(status.to_string());
  REQUIRE(status.ok());
  status = backward<E, Gt, I>(shape, layout, plan.rows_per_group, raw(rows.dout), raw(rows.y), raw(d_gate),
                              raw(d_idx), raw(dy), raw(dgate_rounded), gr::DgateType::kGateType, workspace);
  INFO(status.to_string());
  REQUIRE(status.ok());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());

  require_within_ulps<E>(hawk_test::to_host(out), ref.out, 1.0, "out");
  require_within_ulps<E>(hawk_test::to_host(dy), ref.dy, 1.0, "dy");
  const std::vector<double> dgate_host = hawk_test::to_host(dgate);
  require_dgate_close<float>(dgate_host, ref, D);
  require_dgate_close<Gt>(hawk_test::to_host(dgate_rounded), ref, D);
  // dres may alias dout; the optional copy is dout bit for bit.
  REQUIRE(same_bytes(hawk_test::bytes_of(dres), hawk_test::bytes_of(rows.dout)));
  // The rounded dgate is the fp32 dgate rounded once: the same sum, not another one.
  thrust::host_vector<Gt> rounded_host(dgate_rounded);
  std::size_t not_one_rounding = 0;
  for (std::size_t i = 0; i < dgate_host.size(); ++i) {
    const Gt once = hawk::from_float<Gt>(static_cast<float>(dgate_host[i]));
    if (std::memcmp(&once, &rounded_host[i], sizeof(Gt)) != 0) ++not_one_rounding;
  }
  REQUIRE(not_one_rounding == 0);
}

//! Every (gate, index) combination at every D in {1, 7, 1152, 3072, 5376} and N in {1, 3, 257, 4097}; the
//! index layout rotates so that each combination meets each layout at many shapes. Under compute-sanitizer
//! (HAWK_SANITIZE) the shapes of more than 2^21 elements are left out: every D and N still runs.
template <class E>
void check_every_combination_against_float64() {
  int shape_number = 0;
  for (std::int64_t D : {1, 7, 1152, 3072, 5376}) {
    for (std::int64_t N : {1, 3, 257, 4097}) {
      if (sanitizing() && N * D > (std::int64_t{1} << 21)) continue;
      const RowData data = make_row_data<E>(N, D);
      RowBuffers<E> rows(data);
      const gr::IndexLayout layouts[3] = {gr::IndexLayout::kArbitrary, gr::IndexLayout::kUniform,
                                          gr::IndexLayout::kContiguousSegments};
      const std::int64_t S = shape_number % 2 == 0 ? 3 : 100;
      check_combination<E, __nv_bfloat16, std::int32_t>(data, rows, layouts[(shape_number + 0) % 3], S);
      check_combination<E, __nv_bfloat16, std::int64_t>(data, rows, layouts[(shape_number + 1) % 3], S);
      check_combination<E, float, std::int32_t>(data, rows, layouts[(shape_number + 2) % 3], S);
      check_combination<E, float, std::int64_t>(data, rows, layouts[(shape_number + 3) % 3], S);
      ++shape_number;
    }
  }
}

//! out == residual (in place) gives the same bits as a separate out.
template <class E>
void check_in_place_forward() {
  const std::int64_t N = 1029, D = 3072;
  const RowData data = make_row_data<E>(N, D);
  RowBuffers<E> rows(data);
  const IndexPlan plan = make_index_plan(gr::IndexLayout::kArbitrary, N, 0, gr::kDefaultChunkRows,
                                         hawk_test::fresh_seed());
  auto gate = upload<__nv_bfloat16>(random_values<__nv_bfloat16>(static_cast<std::size_t>(plan.num_gate_rows * D),
                                                                 -1.5, 1.5, hawk_test::fresh_seed()));
  auto idx = upload_index<std::int64_t>(plan.idx);
  thrust::device_vector<E> out(rows.residual.size());
  hawk_test::poison(out);
  thrust::device_vector<unsigned char> workspace;
  const auto shape = shape_of<E, __nv_bfloat16, std::int64_t>(N, D, plan.num_gate_rows);
  REQUIRE(forward<E, __nv_bfloat16, std::int64_t>(shape, raw(rows.residual), raw(rows.y), raw(gate), raw(idx),
                                                  raw(out), workspace).ok());
  thrust::device_vector<E> in_place = rows.residual;
  REQUIRE(forward<E, __nv_bfloat16, std::int64_t>(shape, raw(in_place), raw(rows.y), raw(gate), raw(idx),
                                                  raw(in_place), workspace).ok());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  const auto separate = hawk_test::bytes_of(out);
  REQUIRE(same_bytes(hawk_test::bytes_of(in_place), separate));
  // Negative control: the residual we started from is not the result.
  REQUIRE_FALSE(same_bytes(hawk_test::bytes_of(rows.residual), separate));
}

//! The element-wise path (taken for misaligned views) computes the same bits as the 16-byte path.
template <class E>
void check_element_path_matches_vector_path() {
  const std::int64_t N = 257, D = 1152;
  const RowData data = make_row_data<E>(N + 1, D);  // one spare row, so a view may start one element in
  RowBuffers<E> rows(data);
  const IndexPlan plan = make_index_plan(gr::IndexLayout::kArbitrary, N, 0, gr::kDefaultChunkRows,
                                         hawk_test::fresh_seed());
  const std::int64_t G = plan.num_gate_rows;
  auto gate = upload<float>(random_values<float>(static_cast<std::size_t>(G * D), -1.5, 1.5, hawk_test::fresh_seed()));
  auto idx = upload_index<std::int32_t>(plan.idx);
  const auto shape = shape_of<E, float, std::int32_t>(N, D, G);
  thrust::device_vector<unsigned char> workspace;

  // Aligned views: rows 0..N-1. Misaligned views: the same values copied one element further in.
  thrust::device_vector<E> residual_shifted(rows.residual.size() + 1), y_shifted(rows.residual.size() + 1),
      dout_shifted(rows.residual.size() + 1);
  const std::size_t n = static_cast<std::size_t>(N * D);
  HAWK_TEST_CUDA(cudaMemcpy(raw(residual_shifted) + 1, raw(rows.residual), n * sizeof(E), cudaMemcpyDeviceToDevice));
  HAWK_TEST_CUDA(cudaMemcpy(raw(y_shifted) + 1, raw(rows.y), n * sizeof(E), cudaMemcpyDeviceToDevice));
  HAWK_TEST_CUDA(cudaMemcpy(raw(dout_shifted) + 1, raw(rows.dout), n * sizeof(E), cudaMemcpyDeviceToDevice));

  thrust::device_vector<E> out_vector(n), out_element(n + 1), dy_vector(n), dy_element(n + 1);
  thrust::device_vector<float> dgate_vector(static_cast<std::size_t>(G * D)), dgate_element(dgate_vector.size());
  gr::ForwardArguments args;
  args.shape = shape;
  args.residual = raw(residual_shifted) + 1;
  args.y = raw(y_shifted) + 1;
  args.gate = raw(gate);
  args.idx = raw(idx);
  args.out = raw(out_element) + 1;
  REQUIRE_FALSE(gr::Forward<E, float, std::int32_t>::uses_vector_path(args));
  REQUIRE(run_op<gr::Forward<E, float, std::int32_t>>(args, workspace).ok());
  REQUIRE(forward<E, float, std::int32_t>(shape, raw(rows.residual), raw(rows.y), raw(gate), raw(idx),
                                          raw(out_vector), workspace).ok());
  REQUIRE(backward<E, float, std::int32_t>(shape, gr::IndexLayout::kArbitrary, 0, raw(dout_shifted) + 1,
                                           raw(y_shifted) + 1, raw(gate), raw(idx), raw(dy_element) + 1,
                                           raw(dgate_element), gr::DgateType::kFloat32, workspace).ok());
  REQUIRE(backward<E, float, std::int32_t>(shape, gr::IndexLayout::kArbitrary, 0, raw(rows.dout), raw(rows.y),
                                           raw(gate), raw(idx), raw(dy_vector), raw(dgate_vector),
                                           gr::DgateType::kFloat32, workspace).ok());
  HAWK_TEST_CUDA(cudaDeviceSynchronize());
  auto element_bytes = hawk_test::bytes_of(out_element);
  element_bytes.erase(element_bytes.begin(), element_bytes.begin() + sizeof(E));
  REQUIRE(same_bytes(element_bytes, hawk_test::bytes_of(out_vector)));
  auto dy_bytes = hawk_test::bytes_of(dy_element);
  dy_bytes.erase(dy_bytes.begin(), dy_bytes.begin() + sizeof(E));
  REQUIRE(same_bytes(dy_bytes, hawk_test::bytes_of(dy_vector)));
  REQUIRE(same_bytes(hawk_test::bytes_of(dgate_element), hawk_test::bytes_of(dgate_vector)));
}

//! A NaN in y stays in its own element of out and in its own (group, column) of dgate; dy does not see y.
template <class E>
void check_nan_stays_in_its_element() {
  const std::int64_t N = 300, D = 1152;
  const RowData data = make_row_data<E>(N, D);
  RowBuffers<E> rows(data);
  const IndexPlan plan = make_index_plan(gr::IndexLayout::kUniform, N, 50, gr::kDefaultChunkRows,
                                         hawk_test::fresh_seed());
  const std::int64_t G = plan.num_gate_rows;
  auto gate = upload<__nv_bfloat16>(random_values<__nv_bfloat16>(static_cast<std::size_t>(G * D), -1.5, 1.5,
                                                                 hawk_test::fresh_seed()));
  auto idx = upload_index<std::int64_t>(plan.idx);
  const auto shape = shape_of<E, __nv_bfloat16, std::int64_t>(N, D, G);
  thrust::device_vector<unsigned char> workspace;
  thrust::device_vector<E> out_clean(rows.y.size()), out_nan(rows.y.size()), dy_clean(rows.y.size()),
      dy_nan(rows.y.size());
  thrust::device_vector<float> dgate_clean(static_cast<std::size_t>(G * D)), dgate_nan(dgate_clean.size());
  auto run = [&](thrust::device_vector<E>& y, thrust::device_vector<E>& out, thrust::device_vector<E>& dy,
                 thrust::device_vector<float>& dgate) {
    REQUIRE(forward<E, __nv_bfloat16, std::int64_t>(shape, raw(rows.residual), raw(y), raw(gate), raw(idx), raw(out),
                                                    workspace).ok());
    REQUIRE(backward<E, __nv_bfloat16, std::int64_t>(shape, gr::IndexLayout::kUniform, 50, raw(rows.dout), raw(y),
                                                     raw(gate), raw(idx), raw(dy), raw(dgate),
                                                     gr::DgateType::kFloat32, workspace).ok());
  };
  run(rows.y, out_clean, dy_clean, dgate_clean);
  thrust::device_vector<E> y_nan = rows.y;
  const std::int64_t row = 123, column = 77;  // row 123 is in group 2
  y_nan[row * D + column] = hawk::from_float<E>(std::nanf(""));
  run(y_nan, out_nan, dy_nan, dgate_nan);
  HAWK_TEST_CUDA(cudaDeviceSynchronize());

  const auto clean = hawk_test::to_host(out_clean), with_nan = hawk_test::to_host(out_nan);
  std::size_t nan_elements = 0, changed_elsewhere = 0;
  for (std::size_t i = 0; i < clean.size(); ++i) {
    if (std::isnan(with_nan[i])) {
      ++nan_elements;
      CHECK(i == static_cast<std::size_t>(row * D + column));
    } else if (std::memcmp(&clean[i], &with_nan[i], sizeof(double)) != 0) {
      ++changed_elsewhere;
    }
  }
  CHECK(nan_elements == 1);
  CHECK(changed_elsewhere == 0);
  REQUIRE(same_bytes(hawk_test::bytes_of(dy_clean), hawk_test::bytes_of(dy_nan)));
  const auto dg_clean = hawk_test::to_host(dgate_clean), dg_nan = hawk_test::to_host(dgate_nan);
  std::size_t dgate_nan_count = 0;
  for (std::size_t i = 0; i < dg_clean.size(); ++i) {
    if (std::isnan(dg_nan[i])) {
      ++dgate_nan_count;
      CHECK(i == static_cast<std::size_t>(plan.idx[row] * D + column));
    } else {
      CHECK(std::memcmp(&dg_clean[i], &dg_nan[i], sizeof(double)) == 0);
    }
  }
  CHECK(dgate_nan_count == 1);
}

}  // namespace gr_test
