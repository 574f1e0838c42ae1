// RG-LRU training steps through the default dispatch: forward (saving fp32 chunk checkpoints), a loss on the
// host, backward, and an SGD step on the layer's parameters (Wx, bx, Wa, ba, a_param), on a small synthetic
// regression task: fit the outputs of a "teacher" RG-LRU layer from a perturbed copy of its parameters.
// bf16 activations and weights, fp32 master parameters, fused gate projections, a reset at each sequence start.
// The first step's gradients are checked against the float64 reference; the loss must go down.
// Exit codes: 0 success, 1 mismatch or error, 77 no GPU.
#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/inner_product.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "hawk/reference/rglru.hpp"
#include "hawk/rglru/rglru.cuh"

namespace {

using Element = __nv_bfloat16;

std::vector<double> random_values(std::size_t n, double bound, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-bound, bound);
  std::vector<double> v(n);
  for (auto& value : v) value = dist(rng);
  return v;
}

//! Values as the device stores them in T, back in double.
template <class T>
std::vector<double> rounded(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = hawk::to_float(hawk::from_float<T>(static_cast<float>(v[i])));
  return out;
}

template <class T>
thrust::device_vector<T> upload(const std::vector<double>& v) {
  thrust::host_vector<T> host(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) host[i] = hawk::from_float<T>(static_cast<float>(v[i]));
  return thrust::device_vector<T>(host);
}

template <class T>
std::vector<double> download(const thrust::device_vector<T>& d) {
  thrust::host_vector<T> host(d);
  std::vector<double> v(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) v[i] = hawk::to_float(host[i]);
  return v;
}

//! θ ← θ − lr · g, on the fp32 master copy.
struct SgdStep {
  float lr;
  __host__ __device__ float operator()(float theta, float grad) const { return theta - lr * grad; }
};
//! The bf16 copy of a master weight that the kernels read.
struct ToElement {
  __host__ __device__ Element operator()(float value) const { return __float2bfloat16_rn(value); }
};

double relative_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double d2 = 0, r2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    d2 += (got[i] - want[i]) * (got[i] - want[i]);
    r2 += want[i] * want[i];
  }
  return std::sqrt(d2 / r2);
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  const std::int64_t B = 4, L = 96, W = 128, H = 2, w = W / H, T = B * L;
  const int steps = 20;
  std::mt19937 rng(7);

  // The teacher and its outputs (the regression targets), in float64.
  hawk::reference::RglruParams teacher;
  teacher.width = W;
  teacher.num_blocks = H;
  teacher.Wx = rounded<Element>(random_values(H * w * w, 2.0 / std::sqrt(double(w)), rng));
  teacher.Wa = rounded<Element>(random_values(H * w * w, 2.0 / std::sqrt(double(w)), rng));
  teacher.bx = rounded<float>(random_values(H * w, 0.5, rng));
  teacher.ba = rounded<float>(random_values(H * w, 0.5, rng));
  teacher.a_param = rounded<float>(random_values(W, 1.0, rng));
  hawk::reference::RglruInputs inputs;
  inputs.cu_seqlens = hawk::reference::dense_cu_seqlens(B, L);
  inputs.x = rounded<Element>(random_values(T * W, 1.0, rng));
  inputs.reset = hawk::reference::reset_at_sequence_starts(inputs.cu_seqlens);
  const std::vector<double> target = hawk::reference::rglru_forward(teacher, inputs).y;

  // The student starts from the teacher's parameters, perturbed by about 30%.
  auto perturbed = [&](const std::vector<double>& v, double bound) {
    std::vector<double> out = v;
    const auto noise = random_values(v.size(), bound, rng);
    for (std::size_t i = 0; i < v.size(); ++i) out[i] += noise[i];
    return rounded<float>(out);
  };
  thrust::device_vector<float> Wx = upload<float>(perturbed(teacher.Wx, 0.6 / std::sqrt(double(w))));
  thrust::device_vector<float> Wa = upload<float>(perturbed(teacher.Wa, 0.6 / std::sqrt(double(w))));
  thrust::device_vector<float> bx = upload<float>(perturbed(teacher.bx, 0.15));
  thrust::device_vector<float> ba = upload<float>(perturbed(teacher.ba, 0.15));
  thrust::device_vector<float> a_param = upload<float>(perturbed(teacher.a_param, 0.3));
  thrust::device_vector<Element> Wx_e(Wx.size()), Wa_e(Wa.size());  // what the kernels read

  // Activations, gradients, checkpoints.
  const auto x = upload<Element>(inputs.x);
  thrust::device_vector<Element> y(T * W), dy(T * W), dx(T * W);
  thrust::device_vector<float> dWx(Wx.size()), dWa(Wa.size()), dbx(W), dba(W), da_param(W);
  const std::int64_t chunk = hawk::rglru::kDefaultTimeChunk;
  thrust::device_vector<float> checkpoints(hawk::rglru::checkpoint_rows(T, B, chunk) * W);
  auto raw = [](auto& v) { return thrust::raw_pointer_cast(v.data()); };

  hawk::rglru::ForwardArguments fwd;
  fwd.shape.num_sequences = B;
  fwd.shape.seq_len = L;
  fwd.shape.num_tokens = T;
  fwd.shape.width = W;
  fwd.shape.num_blocks = H;
  fwd.dtype = hawk::DType::kBFloat16;
  fwd.mode = hawk::rglru::GateMode::kFused;
  fwd.reset_mode = hawk::rglru::ResetMode::kSequenceStart;
  fwd.x = raw(x);
  fwd.Wx = raw(Wx_e);
  fwd.Wa = raw(Wa_e);
  fwd.bx = raw(bx);
  fwd.ba = raw(ba);
  fwd.a_param = raw(a_param);
  fwd.y = raw(y);
  fwd.checkpoints = raw(checkpoints);  // what the backward recomputes h from
  fwd.checkpoint_chunk = chunk;

  // The forward's inputs and checkpoints; then the gradients in and out.
  hawk::rglru::BackwardArguments bwd = hawk::rglru::backward_arguments_for(fwd);
  bwd.dy = raw(dy);
  bwd.dx = raw(dx);
  bwd.dWx = raw(dWx);
  bwd.dbx = raw(dbx);
  bwd.dWa = raw(dWa);
  bwd.dba = raw(dba);
  bwd.da_param = raw(da_param);

  // One workspace for both calls: no allocation inside the training loop.
  const std::size_t workspace_bytes =
      std::max(hawk::rglru::forward_workspace_size(fwd), hawk::rglru::backward_workspace_size(bwd));
  thrust::device_vector<unsigned char> workspace(workspace_bytes);
  std::printf("backward workspace: %zu bytes (12 * T * W = %lld for the fp32 gate gradients)\n", workspace_bytes,
              static_cast<long long>(12 * T * W));

  double first_loss = 0, last_loss = 0;
  float lr = 0;
  bool gradients_ok = true;
  for (int step = 0; step < steps; ++step) {
    thrust::transform(Wx.begin(), Wx.end(), Wx_e.begin(), ToElement{});
    thrust::transform(Wa.begin(), Wa.end(), Wa_e.begin(), ToElement{});
    hawk::Status status = hawk::rglru::forward(fwd, raw(workspace), workspace.size(), nullptr);
    if (!status.ok()) {
      std::printf("forward failed: %s\n", status.to_string().c_str());
      return 1;
    }
    // Loss = ½ · mean over tokens and channels of (y − target)²; dy = (y − target) / (T·W).
    const std::vector<double> y_host = download(y);
    std::vector<double> dy_host(y_host.size());
    double loss = 0;
    const double count = static_cast<double>(T * W);
    for (std::size_t i = 0; i < y_host.size(); ++i) {
      const double r = y_host[i] - target[i];
      loss += 0.5 * r * r / count;
      dy_host[i] = r / count;
    }
    dy_host = rounded<Element>(dy_host);
    const thrust::device_vector<Element> staged = upload<Element>(dy_host);
    thrust::copy(staged.begin(), staged.end(), dy.begin());  // dy keeps its address (bwd.dy points at it)
    status = hawk::rglru::backward(bwd, raw(workspace), workspace.size(), nullptr);
    if (!status.ok()) {
      std::printf("backward failed: %s\n", status.to_string().c_str());
      return 1;
    }
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    std::printf("step %2d  loss %.6e\n", step, loss);

    if (step == 0) {
      first_loss = loss;
      // The first step's gradients against the float64 reference, fed exactly what the device saw.
      hawk::reference::RglruParams student;
      student.width = W;
      student.num_blocks = H;
      student.Wx = download(Wx_e);
      student.Wa = download(Wa_e);
      student.bx = download(bx);
      student.ba = download(ba);
      student.a_param = download(a_param);
      const auto want = hawk::reference::rglru_backward(student, inputs, dy_host);
      const double errors[] = {relative_l2(download(dx), want.dx),   relative_l2(download(dWx), want.dWx),
                               relative_l2(download(dbx), want.dbx), relative_l2(download(dWa), want.dWa),
                               relative_l2(download(dba), want.dba), relative_l2(download(da_param), want.da_param)};
      const char* names[] = {"dx", "dWx", "dbx", "dWa", "dba", "da_param"};
      const double tolerances[] = {5e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3};
      for (int g = 0; g < 6; ++g) {
        std::printf("  first-step %-8s rel L2 vs float64 = %.2e\n", names[g], errors[g]);
        gradients_ok = gradients_ok && errors[g] <= tolerances[g];
      }
      // Step size: move the parameters by 2% of their norm along the first gradient, then keep it fixed.
      double theta2 = 0, grad2 = 0;
      for (auto* p : {&Wx, &Wa, &bx, &ba, &a_param}) theta2 += thrust::inner_product(p->begin(), p->end(), p->begin(), 0.0);
      for (auto* g : {&dWx, &dWa, &dbx, &dba, &da_param})
        grad2 += thrust::inner_product(g->begin(), g->end(), g->begin(), 0.0);
      lr = static_cast<float>(0.02 * std::sqrt(theta2 / grad2));
    }
    last_loss = loss;

    // SGD on the fp32 master parameters.
    thrust::transform(Wx.begin(), Wx.end(), dWx.begin(), Wx.begin(), SgdStep{lr});
    thrust::transform(Wa.begin(), Wa.end(), dWa.begin(), Wa.begin(), SgdStep{lr});
    thrust::transform(bx.begin(), bx.end(), dbx.begin(), bx.begin(), SgdStep{lr});
    thrust::transform(ba.begin(), ba.end(), dba.begin(), ba.begin(), SgdStep{lr});
    thrust::transform(a_param.begin(), a_param.end(), da_param.begin(), a_param.begin(), SgdStep{lr});
  }
  const bool decreased = last_loss < first_loss;
  std::printf("loss %.6e -> %.6e (%s); first-step gradients %s\n", first_loss, last_loss,
              decreased ? "down" : "NOT down", gradients_ok ? "match float64" : "DO NOT match float64");
  return decreased && gradients_ok ? 0 : 1;
}
