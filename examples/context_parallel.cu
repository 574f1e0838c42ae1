// Context parallelism for the RG-LRU (include/hawk/rglru/context_parallel.cuh): a long sequence batch
// [B, L, W] split along time into P pieces, piece p on rank p, each rank a thread. Both modes, forward and
// backward, checked against one single-GPU call:
//   exact — state passing, pipelined over micro-batches (rank p works on micro-batch m+1 while rank p+1 works on
//           m): y, final state, dx and dh0 bitwise equal to one call.
//   fast  — transfer pairs, one all-gather, an ordered local combine and a correction, all ranks in parallel:
//           equal within fp32 rounding (the measured relative errors are printed).
//
// Usage:
//   context_parallel                one rank per GPU through NCCL (needs >= 2 GPUs and NCCL; else exit 77)
//   context_parallel --emulate P    P ranks as P threads on ONE GPU: same rank code, the transport is streams,
//                                   events and cudaMemcpyAsync instead of NCCL
// NCCL_NVLS_ENABLE is set to 0 unless already set (NVLink multicast off). Exit codes: 0 success, 1 mismatch or
// error, 77 skipped (no GPU, fewer than 2 GPUs or no NCCL for the NCCL mode).
#include <cuda_runtime_api.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#if defined(HAWK_CP_WITH_NCCL)
#include <nccl.h>
#endif

#include "hawk/rglru/backward_dispatch.cuh"
#include "hawk/rglru/context_parallel.cuh"
#include "hawk/rglru/dispatch.cuh"

namespace {

namespace cp = hawk::rglru::context_parallel;
using Element = __nv_bfloat16;

// ---- problem -------------------------------------------------------------------------------------------------

constexpr std::int64_t kBatch = 4, kMicroBatches = 2, kMicro = kBatch / kMicroBatches;
constexpr std::int64_t kLength = 6000, kWidth = 512, kBlocks = 2, kBlockWidth = kWidth / kBlocks;

struct HostProblem {
  std::vector<Element> x, dy, Wx, Wa;  // x, dy: [B, L, W]
  std::vector<float> bx, ba, a_param;
};

HostProblem make_problem() {
  std::mt19937 rng(11);
  auto fill = [&](std::size_t n, double bound) {
    std::uniform_real_distribution<double> dist(-bound, bound);
    std::vector<double> v(n);
    for (auto& value : v) value = dist(rng);
    return v;
  };
  auto as_element = [](const std::vector<double>& v) {
    std::vector<Element> e(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) e[i] = hawk::from_float<Element>(static_cast<float>(v[i]));
    return e;
  };
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const double scale = 2.0 / std::sqrt(static_cast<double>(kBlockWidth));
  HostProblem p;
  p.x = as_element(fill(kBatch * kLength * kWidth, 1.0));
  p.dy = as_element(fill(kBatch * kLength * kWidth, 1.0));
  p.Wx = as_element(fill(kBlocks * kBlockWidth * kBlockWidth, scale));
  p.Wa = as_element(fill(kBlocks * kBlockWidth * kBlockWidth, scale));
  p.bx = as_float(fill(kWidth, 0.5));
  p.ba = as_float(fill(kWidth, 0.5));
  p.a_param = as_float(fill(kWidth, 1.0));
  return p;
}

//! Rows [n·L + from, n·L + to) of every sequence n of [B, L, W].
template <class T>
std::vector<T> cut(const std::vector<T>& v, std::int64_t from, std::int64_t to) {
  std::vector<T> out;
  for (std::int64_t n = 0; n < kBatch; ++n)
    out.insert(out.end(), v.begin() + (n * kLength + from) * kWidth, v.begin() + (n * kLength + to) * kWidth);
  return out;
}

template <class T>
std::vector<T> download(const thrust::device_vector<T>& d) {
  thrust::host_vector<T> h(d);
  return std::vector<T>(h.begin(), h.end());
}

template <class T>
T* raw(thrust::device_vector<T>& v) {
  return thrust::raw_pointer_cast(v.data());
}

// ---- transports ----------------------------------------------------------------------------------------------

//! What a rank needs from its peers: stream-ordered sends, receives and an all-gather of fp32 buffers.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual bool send(const float* buffer, std::size_t count, int peer, int tag, cudaStream_t stream) = 0;
  virtual bool recv(float* buffer, std::size_t count, int peer, int tag, cudaStream_t stream) = 0;
  //! gathered [P, count] <- every rank's `mine` [count], in rank order.
  virtual bool all_gather(const float* mine, float* gathered, std::size_t count, int tag, cudaStream_t stream) = 0;
  //! Host barrier of all ranks before any rank frees a buffer a peer may still read (the emulation needs it).
  virtual void barrier() {}
};

#if defined(HAWK_CP_WITH_NCCL)
//! One NCCL communicator per rank (one GPU per rank). Tags are not needed: NCCL matches calls in order.
class NcclTransport final : public Transport {
 public:
  explicit NcclTransport(ncclComm_t comm) : comm_(comm) {}
  bool send(const float* buffer, std::size_t count, int peer, int, cudaStream_t stream) override {
    return ncclSend(buffer, count, ncclFloat, peer, comm_, stream) == ncclSuccess;
  }
  bool recv(float* buffer, std::size_t count, int peer, int, cudaStream_t stream) override {
    return ncclRecv(buffer, count, ncclFloat, peer, comm_, stream) == ncclSuccess;
  }
  bool all_gather(const float* mine, float* gathered, std::size_t count, int, cudaStream_t stream) override {
    return ncclAllGather(mine, gathered, count, ncclFloat, comm_, stream) == ncclSuccess;
  }

 private:
  ncclComm_t comm_;
};
#endif

//! Ranks as threads on one GPU: a send posts (pointer, event recorded on the sender's stream); the receiver's
//! stream waits for the event and copies. The sender must leave the buffer unchanged until the step ends (the
//! rank code below never reuses a sent buffer).
class Mailbox {
 public:
  ~Mailbox() {
    for (auto& entry : posted_) cudaEventDestroy(entry.second.event);
  }
  void post(int from, int to, int tag, const float* buffer, cudaStream_t stream) {
    cudaEvent_t event;
    cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    cudaEventRecord(event, stream);
    std::lock_guard<std::mutex> lock(mutex_);
    posted_[std::make_tuple(from, to, tag)] = Posted{buffer, event};
    ready_.notify_all();
  }
  //! Host barrier of `ranks` threads.
  void barrier(int ranks) {
    std::unique_lock<std::mutex> lock(mutex_);
    const long generation = generation_;
    if (++arrived_ == ranks) {
      arrived_ = 0;
      ++generation_;
      ready_.notify_all();
    } else {
      ready_.wait(lock, [&] { return generation_ != generation; });
    }
  }
  //! Waits (host) until (from, to, tag) is posted; returns its pointer and event.
  std::pair<const float*, cudaEvent_t> take(int from, int to, int tag) {
    std::unique_lock<std::mutex> lock(mutex_);
    const auto key = std::make_tuple(from, to, tag);
    ready_.wait(lock, [&] { return posted_.count(key) != 0; });
    return {posted_[key].buffer, posted_[key].event};
  }

 private:
  struct Posted {
    const float* buffer;
    cudaEvent_t event;
  };
  std::mutex mutex_;
  std::condition_variable ready_;
  std::map<std::tuple<int, int, int>, Posted> posted_;
  int arrived_ = 0;
  long generation_ = 0;
};

class StreamTransport final : public Transport {
 public:
  StreamTransport(Mailbox& mailbox, int rank, int ranks) : mailbox_(mailbox), rank_(rank), ranks_(ranks) {}
  bool send(const float* buffer, std::size_t, int peer, int tag, cudaStream_t stream) override {
    mailbox_.post(rank_, peer, tag, buffer, stream);
    return true;
  }
  bool recv(float* buffer, std::size_t count, int peer, int tag, cudaStream_t stream) override {
    const auto posted = mailbox_.take(peer, rank_, tag);
    return cudaStreamWaitEvent(stream, posted.second, 0) == cudaSuccess &&
           cudaMemcpyAsync(buffer, posted.first, count * sizeof(float), cudaMemcpyDeviceToDevice, stream) == cudaSuccess;
  }
  bool all_gather(const float* mine, float* gathered, std::size_t count, int tag, cudaStream_t stream) override {
    mailbox_.post(rank_, -1, tag, mine, stream);
    for (int p = 0; p < ranks_; ++p) {
      const auto posted = mailbox_.take(p, -1, tag);
      if (cudaStreamWaitEvent(stream, posted.second, 0) != cudaSuccess ||
          cudaMemcpyAsync(gathered + p * count, posted.first, count * sizeof(float), cudaMemcpyDeviceToDevice,
                          stream) != cudaSuccess)
        return false;
    }
    return true;
  }
  void barrier() override { mailbox_.barrier(ranks_); }

 private:
  Mailbox& mailbox_;
  int rank_, ranks_;
};

// ---- one rank ------------------------------------------------------------------------------------------------

enum class Mode { kExact, kFast };

//! What a rank hands back: its piece's y and dx, the final state (last rank) and dh0 (rank 0), all [B, ...].
struct RankResult {
  std::vector<Element> y, dx;
  std::vector<float> h_final, dh0;
  bool ok = false;
  double milliseconds = 0;
};

#define RANK_CHECK(condition)                                                                  \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      std::fprintf(stderr, "rank %d: %s failed (%s:%d)\n", rank, #condition, __FILE__, __LINE__); \
      return result;                                                                           \
    }                                                                                          \
  } while (0)
#define RANK_STATUS(call)                                                                                     \
  do {                                                                                                        \
    const hawk::Status status_ = (call);                                                                      \
    if (!status_.ok()) {                                                                                      \
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, #call, status_.to_string().c_str());                  \
      return result;                                                                                          \
    }                                                                                                         \
  } while (0)

RankResult run_rank(Mode mode, int rank, int ranks, int device, const HostProblem& problem, Transport& transport) {
  RankResult result;
  cudaSetDevice(device);
  cudaStream_t stream;
  RANK_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  const std::int64_t from = kLength * rank / ranks, to = kLength * (rank + 1) / ranks, Lp = to - from;
  const std::int64_t count = kMicro * kWidth;  // one micro-batch's states
  const std::int64_t micro_tokens = kMicro * Lp, chunk = hawk::rglru::kDefaultTimeChunk;
  const std::int64_t checkpoint_rows = hawk::rglru::checkpoint_rows(micro_tokens, kMicro, chunk);

  // This rank's piece and the replicated parameters.
  thrust::device_vector<Element> x(cut(problem.x, from, to)), dy(cut(problem.dy, from, to));
  thrust::device_vector<Element> Wx(problem.Wx), Wa(problem.Wa), y(x.size()), dx(x.size());
  thrust::device_vector<float> bx(problem.bx), ba(problem.ba), a_param(problem.a_param);
  thrust::device_vector<float> dWx(Wx.size()), dWa(Wa.size()), dbx(kWidth), dba(kWidth), da_param(kWidth);
  // Per micro-batch: states and checkpoints (never reused, so a sent buffer stays valid), transfer pairs.
  thrust::device_vector<float> h0(kMicroBatches * count), h_final(kMicroBatches * count);
  thrust::device_vector<float> dh_final(kMicroBatches * count), dh0(kMicroBatches * count);
  thrust::device_vector<float> checkpoints(kMicroBatches * checkpoint_rows * kWidth);
  thrust::device_vector<float> pairs(kMicroBatches * 2 * count), gathered(kMicroBatches * ranks * 2 * count);
  thrust::device_vector<float> back_pairs(kMicroBatches * 2 * count), back_gathered(kMicroBatches * ranks * 2 * count);

  auto forward_args = [&](std::int64_t m) {
    hawk::rglru::ForwardArguments a;
    a.shape.num_sequences = kMicro;
    a.shape.seq_len = Lp;
    a.shape.num_tokens = micro_tokens;
    a.shape.width = kWidth;
    a.shape.num_blocks = kBlocks;
    a.dtype = hawk::DType::kBFloat16;
    a.mode = hawk::rglru::GateMode::kFused;
    a.reset_mode = cp::piece_reset_mode(hawk::rglru::ResetMode::kSequenceStart, rank);
    a.x = raw(x) + m * micro_tokens * kWidth;
    a.Wx = raw(Wx);
    a.bx = raw(bx);
    a.Wa = raw(Wa);
    a.ba = raw(ba);
    a.a_param = raw(a_param);
    a.h0 = rank > 0 ? raw(h0) + m * count : nullptr;
    a.h_final = raw(h_final) + m * count;
    a.y = raw(y) + m * micro_tokens * kWidth;
    a.checkpoints = raw(checkpoints) + m * checkpoint_rows * kWidth;
    a.checkpoint_chunk = chunk;
    return a;
  };
  auto backward_args = [&](std::int64_t m) {
    const auto f = forward_args(m);
    hawk::rglru::BackwardArguments a;
    a.shape = f.shape;
    a.dtype = f.dtype;
    a.mode = f.mode;
    a.reset_mode = f.reset_mode;
    a.x = f.x;
    a.Wx = f.Wx;
    a.bx = f.bx;
    a.Wa = f.Wa;
    a.ba = f.ba;
    a.a_param = f.a_param;
    a.h0 = f.h0;
    a.checkpoints = f.checkpoints;
    a.checkpoint_chunk = chunk;
    a.dy = raw(dy) + m * micro_tokens * kWidth;
    a.dh_final = rank + 1 < ranks ? raw(dh_final) + m * count : nullptr;
    a.dx = raw(dx) + m * micro_tokens * kWidth;
    a.dWx = raw(dWx);  // parameter gradients: a trainer would accumulate per micro-batch and all-reduce
    a.dbx = raw(dbx);
    a.dWa = raw(dWa);
    a.dba = raw(dba);
    a.da_param = raw(da_param);
    a.dh0 = raw(dh0) + m * count;
    return a;
  };
  const std::size_t workspace_bytes = std::max({hawk::rglru::forward_workspace_size(forward_args(0)),
                                                cp::transfer_workspace_size(forward_args(0)),
                                                hawk::rglru::backward_workspace_size(backward_args(0))});
  thrust::device_vector<unsigned char> workspace_buffer(workspace_bytes + 1);
  void* workspace = raw(workspace_buffer);
  //! Declared after every buffer, so destroyed first, on every return path: this rank's stream drains and all
  //! ranks meet before any buffer (which a peer's stream may still be copying from) is freed.
  struct FinishTogether {
    Transport& transport;
    cudaStream_t stream;
    ~FinishTogether() {
      cudaStreamSynchronize(stream);
      transport.barrier();
      cudaStreamDestroy(stream);
    }
  } finish_together{transport, stream};
  const auto start = std::chrono::steady_clock::now();

  if (mode == Mode::kExact) {
    // Forward, 0 -> P-1, micro-batch by micro-batch: rank p starts micro-batch m+1 as soon as it sent m.
    for (std::int64_t m = 0; m < kMicroBatches; ++m) {
      if (rank > 0) RANK_CHECK(transport.recv(raw(h0) + m * count, count, rank - 1, int(m), stream));
      RANK_STATUS(hawk::rglru::forward(forward_args(m), workspace, workspace_bytes, stream));
      if (rank + 1 < ranks) RANK_CHECK(transport.send(raw(h_final) + m * count, count, rank + 1, int(m), stream));
    }
    // Backward, P-1 -> 0: dh_final of piece p is dh0 of piece p+1.
    for (std::int64_t m = 0; m < kMicroBatches; ++m) {
      if (rank + 1 < ranks)
        RANK_CHECK(transport.recv(raw(dh_final) + m * count, count, rank + 1, int(100 + m), stream));
      RANK_STATUS(hawk::rglru::backward(backward_args(m), workspace, workspace_bytes, stream));
      if (rank > 0) RANK_CHECK(transport.send(raw(dh0) + m * count, count, rank - 1, int(100 + m), stream));
    }
  } else {
    for (std::int64_t m = 0; m < kMicroBatches; ++m) {
      float* mine = raw(pairs) + m * 2 * count;  // [decay, h_end]
      float* all = raw(gathered) + m * ranks * 2 * count;
      RANK_STATUS(cp::forward_transfer(forward_args(m), mine, mine + count, workspace, workspace_bytes, stream));
      RANK_CHECK(transport.all_gather(mine, all, 2 * count, int(200 + m), stream));
      // Carry-in: the pieces before this rank, in rank order, from h0 = 0 (the sequence starts with a reset).
      RANK_STATUS(cp::combine_carries(all, all + count, 2 * count, rank, count, nullptr, nullptr, raw(h0) + m * count,
                                      cp::CarryDirection::kForward, stream));
      auto args = forward_args(m);
      RANK_STATUS(cp::forward_with_carry(args, raw(h0) + m * count, workspace, workspace_bytes, stream));
    }
    for (std::int64_t m = 0; m < kMicroBatches; ++m) {
      float* mine = raw(back_pairs) + m * 2 * count;  // [decay, dh0 from dh_final = 0]
      float* all = raw(back_gathered) + m * ranks * 2 * count;
      RANK_CHECK(cudaMemcpyAsync(mine, raw(pairs) + m * 2 * count, count * sizeof(float), cudaMemcpyDeviceToDevice,
                                 stream) == cudaSuccess);
      auto args = backward_args(m);
      args.h0 = raw(h0) + m * count;  // the combined carry-in (zeros on rank 0)
      RANK_STATUS(cp::backward_transfer(args, mine + count, workspace, workspace_bytes, stream));
      RANK_CHECK(transport.all_gather(mine, all, 2 * count, int(300 + m), stream));
      // dh_final: the pieces after this rank, P-1 down to rank+1, from the sequence's dh_final = 0.
      RANK_STATUS(cp::combine_carries(all + (rank + 1) * 2 * count, all + (rank + 1) * 2 * count + count, 2 * count,
                                      ranks - 1 - rank, count, nullptr, nullptr, raw(dh_final) + m * count,
                                      cp::CarryDirection::kReverse, stream));
      args.dh_final = raw(dh_final) + m * count;
      RANK_STATUS(hawk::rglru::backward(args, workspace, workspace_bytes, stream));
    }
  }
  RANK_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
  result.milliseconds = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  result.y = download(y);
  result.dx = download(dx);
  if (rank + 1 == ranks) result.h_final = download(h_final);
  if (rank == 0) result.dh0 = download(dh0);
  result.ok = true;
  return result;
}

// ---- the single-GPU reference and the comparison -------------------------------------------------------------

struct WholeResult {
  std::vector<Element> y, dx;
  std::vector<float> h_final, dh0;
};

bool run_whole(const HostProblem& problem, WholeResult& out) {
  cudaSetDevice(0);
  thrust::device_vector<Element> x(problem.x), dy(problem.dy), Wx(problem.Wx), Wa(problem.Wa), y(x.size()),
      dx(x.size());
  thrust::device_vector<float> bx(problem.bx), ba(problem.ba), a_param(problem.a_param), h_final(kBatch * kWidth),
      dh0(kBatch * kWidth), dWx(Wx.size()), dWa(Wa.size()), dbx(kWidth), dba(kWidth), da_param(kWidth);
  const std::int64_t T = kBatch * kLength, chunk = hawk::rglru::kDefaultTimeChunk;
  thrust::device_vector<float> checkpoints(hawk::rglru::checkpoint_rows(T, kBatch, chunk) * kWidth);
  hawk::rglru::ForwardArguments f;
  f.shape.num_sequences = kBatch;
  f.shape.seq_len = kLength;
  f.shape.num_tokens = T;
  f.shape.width = kWidth;
  f.shape.num_blocks = kBlocks;
  f.dtype = hawk::DType::kBFloat16;
  f.mode = hawk::rglru::GateMode::kFused;
  f.reset_mode = hawk::rglru::ResetMode::kSequenceStart;
  f.x = raw(x);
  f.Wx = raw(Wx);
  f.bx = raw(bx);
  f.Wa = raw(Wa);
  f.ba = raw(ba);
  f.a_param = raw(a_param);
  f.h_final = raw(h_final);
  f.y = raw(y);
  f.checkpoints = raw(checkpoints);
  f.checkpoint_chunk = chunk;
  hawk::rglru::BackwardArguments b;
  b.shape = f.shape;
  b.dtype = f.dtype;
  b.mode = f.mode;
  b.reset_mode = f.reset_mode;
  b.x = f.x;
  b.Wx = f.Wx;
  b.bx = f.bx;
  b.Wa = f.Wa;
  b.ba = f.ba;
  b.a_param = f.a_param;
  b.checkpoints = f.checkpoints;
  b.checkpoint_chunk = chunk;
  b.dy = raw(dy);
  b.dx = raw(dx);
  b.dWx = raw(dWx);
  b.dbx = raw(dbx);
  b.dWa = raw(dWa);
  b.dba = raw(dba);
  b.da_param = raw(da_param);
  b.dh0 = raw(dh0);
  thrust::device_vector<unsigned char> workspace(hawk::rglru::backward_workspace_size(b) + 1);
  hawk::Status status = hawk::rglru::forward(f, raw(workspace), workspace.size(), nullptr);
  if (status.ok()) status = hawk::rglru::backward(b, raw(workspace), workspace.size(), nullptr);
  if (!status.ok()) {
    std::fprintf(stderr, "single-GPU run: %s\n", status.to_string().c_str());
    return false;
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return false;
  out.y = download(y);
  out.dx = download(dx);
  out.h_final = download(h_final);
  out.dh0 = download(dh0);
  return true;
}

//! Rank pieces [B, Lp, W] back into [B, L, W].
std::vector<Element> join(const std::vector<RankResult>& results, std::vector<Element> RankResult::*member) {
  const int ranks = static_cast<int>(results.size());
  std::vector<Element> out;
  for (std::int64_t n = 0; n < kBatch; ++n)
    for (int r = 0; r < ranks; ++r) {
      const std::int64_t Lp = kLength * (r + 1) / ranks - kLength * r / ranks;
      const auto& v = results[r].*member;
      out.insert(out.end(), v.begin() + n * Lp * kWidth, v.begin() + (n + 1) * Lp * kWidth);
    }
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
double relative_l2(const std::vector<T>& got, const std::vector<T>& want) {
  double d2 = 0, r2 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = hawk::to_float(got[i]), w = hawk::to_float(want[i]);
    d2 += (g - w) * (g - w);
    r2 += w * w;
  }
  return r2 > 0 ? std::sqrt(d2 / r2) : std::sqrt(d2);
}

//! The micro-batch states [M, Bm, W] are the batch's [B, W] rows in order: no reshuffling needed.
bool check(Mode mode, const std::vector<RankResult>& results, const WholeResult& whole) {
  for (const auto& r : results)
    if (!r.ok) return false;
  const auto y = join(results, &RankResult::y), dx = join(results, &RankResult::dx);
  const auto& h_final = results.back().h_final;
  const auto& dh0 = results.front().dh0;
  double slowest = 0;
  for (const auto& r : results) slowest = std::max(slowest, r.milliseconds);
  if (mode == Mode::kExact) {
    const bool ok = same_bits(y, whole.y) && same_bits(h_final, whole.h_final) && same_bits(dx, whole.dx) &&
                    same_bits(dh0, whole.dh0);
    std::printf("exact: y %s, h_final %s, dx %s, dh0 %s (bitwise vs one GPU), slowest rank %.2f ms\n",
                same_bits(y, whole.y) ? "equal" : "DIFFERENT", same_bits(h_final, whole.h_final) ? "equal" : "DIFFERENT",
                same_bits(dx, whole.dx) ? "equal" : "DIFFERENT", same_bits(dh0, whole.dh0) ? "equal" : "DIFFERENT",
                slowest);
    return ok;
  }
  const double ey = relative_l2(y, whole.y), eh = relative_l2(h_final, whole.h_final),
               edx = relative_l2(dx, whole.dx), edh0 = relative_l2(dh0, whole.dh0);
  std::printf("fast: relative L2 vs one GPU: y %.3e, h_final %.3e, dx %.3e, dh0 %.3e; slowest rank %.2f ms\n", ey, eh,
              edx, edh0, slowest);
  return ey <= 5e-3 && eh <= 1e-5 && edx <= 5e-3 && edh0 <= 1e-5;  // bf16 storage for y, dx; fp32 for states
}

}  // namespace

int main(int argc, char** argv) {
  int emulated_ranks = 0;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--emulate") == 0 && i + 1 < argc) emulated_ranks = std::atoi(argv[++i]);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast off unless the user chose otherwise
  const int ranks = emulated_ranks > 0 ? emulated_ranks : devices;
  if (emulated_ranks == 0) {
#if defined(HAWK_CP_WITH_NCCL)
    if (devices < 2) {
      std::printf("%d GPU: the NCCL mode needs >= 2 (try --emulate 4): skipped\n", devices);
      return 77;
    }
#else
    std::printf("built without NCCL: the NCCL mode is unavailable (try --emulate 4): skipped\n");
    return 77;
#endif
  }
  if (ranks < 1 || ranks > 64) {
    std::fprintf(stderr, "ranks must be in [1, 64]\n");
    return 1;
  }
  std::printf("RG-LRU context parallelism: B=%lld (2 micro-batches), L=%lld, W=%lld, H=%lld, bf16 fused, %d ranks %s\n",
              static_cast<long long>(kBatch), static_cast<long long>(kLength), static_cast<long long>(kWidth),
              static_cast<long long>(kBlocks), ranks, emulated_ranks > 0 ? "as threads on GPU 0" : "over NCCL");
  const HostProblem problem = make_problem();
  WholeResult whole;
  if (!run_whole(problem, whole)) return 1;

  bool ok = true;
  for (Mode mode : {Mode::kExact, Mode::kFast}) {
    std::vector<RankResult> results(ranks);
    std::vector<std::unique_ptr<Transport>> transports;
    Mailbox mailbox;
#if defined(HAWK_CP_WITH_NCCL)
    std::vector<ncclComm_t> comms(ranks);
    if (emulated_ranks == 0) {
      if (ncclCommInitAll(comms.data(), ranks, nullptr) != ncclSuccess) {
        std::fprintf(stderr, "ncclCommInitAll failed\n");
        return 1;
      }
      for (int r = 0; r < ranks; ++r) transports.push_back(std::make_unique<NcclTransport>(comms[r]));
    }
#endif
    if (emulated_ranks > 0)
      for (int r = 0; r < ranks; ++r) transports.push_back(std::make_unique<StreamTransport>(mailbox, r, ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        results[r] = run_rank(mode, r, ranks, emulated_ranks > 0 ? 0 : r, problem, *transports[r]);
      });
    for (auto& t : threads) t.join();
#if defined(HAWK_CP_WITH_NCCL)
    if (emulated_ranks == 0)
      for (auto comm : comms) ncclCommDestroy(comm);
#endif
    ok = check(mode, results, whole) && ok;
  }
  std::printf("%s\n", ok ? "context parallel: OK" : "context parallel: MISMATCH");
  return ok ? 0 : 1;
}
