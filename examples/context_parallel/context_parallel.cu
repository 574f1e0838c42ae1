// Context parallelism for the RG-LRU (include/hawk/rglru/context_parallel/; README.md here): a long sequence batch
// [B, L, W] split along time into P pieces, piece p on rank p, each rank a thread. Both modes, forward and
// backward, checked against one single-GPU call:
//   exact — state passing, pipelined over micro-batches (rank p works on micro-batch m+1 while rank p+1 works on
//           m): y, final state, dx and dh0 bitwise equal to one call.
//   fast  — transfer pairs, one all-gather, an ordered local combine and a correction, all ranks in parallel:
//           equal within fp32 rounding (the measured relative errors are printed). The corrections stop early
//           (context_parallel/early_exit.cuh) once the carried state no longer changes a bit, and then the
//           result is the exact mode's.
//
// Usage:
//   context_parallel                one rank per GPU through NCCL (needs >= 2 GPUs and NCCL; else exit 77)
//   context_parallel --emulate P    P ranks as P threads on ONE GPU: same rank code, the transport is streams,
//                                   events and cudaMemcpyAsync instead of NCCL
//   context_parallel --bench [JSON] [--length L]
//                                   strong scaling over NCCL at B=1, L=131072 (or L), W=2560, H=10 (issue 7's
//                                   shape; issue 20 adds L=524288): forward+backward on 1, 2, 4, 8 GPUs (as many
//                                   as there are), both modes, median of 10 steps after 2 warm-up steps, each
//                                   checked against 1 GPU
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
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#if defined(HAWK_CP_WITH_NCCL)
#include <nccl.h>
#endif

#include "hawk/rglru/rglru.cuh"

namespace {

namespace cp = hawk::rglru::context_parallel;
using Element = __nv_bfloat16;

// ---- problem -------------------------------------------------------------------------------------------------

//! The problem: B sequences of L tokens, W channels in H blocks, run as M micro-batches of B / M sequences.
struct Dims {
  std::int64_t batch = 4, micro_batches = 4, length = 6000, width = 512, blocks = 2;
  std::int64_t micro() const { return batch / micro_batches; }
  std::int64_t block_width() const { return width / blocks; }
};

struct HostProblem {
  Dims dims;
  std::vector<Element> x, dy, Wx, Wa;  // x, dy: [B, L, W]
  std::vector<float> bx, ba, a_param;
};

//! Uniform in [-bound, bound] from a counter hash (splitmix64): fast enough for 10^9 values, never zeros.
std::vector<double> fill(std::size_t n, double bound, std::uint64_t stream) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t z = (stream << 40) + i + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    v[i] = bound * (static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0);
  }
  return v;
}

HostProblem make_problem(const Dims& d) {
  auto as_element = [](const std::vector<double>& v) {
    std::vector<Element> e(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) e[i] = hawk::from_float<Element>(static_cast<float>(v[i]));
    return e;
  };
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const double scale = 2.0 / std::sqrt(static_cast<double>(d.block_width()));
  const auto tokens = static_cast<std::size_t>(d.batch * d.length * d.width);
  const auto weights = static_cast<std::size_t>(d.blocks * d.block_width() * d.block_width());
  HostProblem p;
  p.dims = d;
  p.x = as_element(fill(tokens, 1.0, 1));
  p.dy = as_element(fill(tokens, 1.0, 2));
  p.Wx = as_element(fill(weights, scale, 3));
  p.Wa = as_element(fill(weights, scale, 4));
  p.bx = as_float(fill(static_cast<std::size_t>(d.width), 0.5, 5));
  p.ba = as_float(fill(static_cast<std::size_t>(d.width), 0.5, 6));
  p.a_param = as_float(fill(static_cast<std::size_t>(d.width), 1.0, 7));
  return p;
}

//! Rows [n·L + from, n·L + to) of every sequence n of [B, L, W].
template <class T>
std::vector<T> cut(const Dims& d, const std::vector<T>& v, std::int64_t from, std::int64_t to) {
  std::vector<T> out;
  out.reserve(static_cast<std::size_t>(d.batch * (to - from) * d.width));
  for (std::int64_t n = 0; n < d.batch; ++n)
    out.insert(out.end(), v.begin() + (n * d.length + from) * d.width, v.begin() + (n * d.length + to) * d.width);
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
};

//! A host barrier of the rank threads: before every timed step, and before any rank frees a buffer a peer's
//! stream may still be copying from (the emulation's transport reads peers' buffers directly).
class HostBarrier {
 public:
  explicit HostBarrier(int ranks) : ranks_(ranks) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const long generation = generation_;
    if (++arrived_ == ranks_) {
      arrived_ = 0;
      ++generation_;
      released_.notify_all();
    } else {
      released_.wait(lock, [&] { return generation_ != generation; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable released_;
  int ranks_, arrived_ = 0;
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
 private:
  Mailbox& mailbox_;
  int rank_, ranks_;
};

// ---- one rank ------------------------------------------------------------------------------------------------

enum class Mode { kExact, kFast };
const char* mode_name(Mode mode) { return mode == Mode::kExact ? "exact" : "fast"; }

//! What a rank hands back: its piece's y and dx, the final state (last rank) and dh0 (rank 0), all [B, ...], and
//! the wall time of each step (forward + backward of every micro-batch, from a common start).
struct RankResult {
  std::vector<Element> y, dx;
  std::vector<float> h_final, dh0;
  std::vector<double> step_ms;
  int corrections = 0, stopped_early = 0;  // fast mode: how many corrections stopped early
  bool ok = false;
};

//! Tokens the fast mode's corrections rerun before they compare states (a multiple of the time chunk).
constexpr std::int64_t kCorrectionTokens = 512;

#define RANK_CHECK(condition)                                                                     \
  do {                                                                                            \
    if (!(condition)) {                                                                           \
      std::fprintf(stderr, "rank %d: %s failed (%s:%d)\n", rank, #condition, __FILE__, __LINE__); \
      return result;                                                                              \
    }                                                                                             \
  } while (0)
#define RANK_STATUS(call)                                                                    \
  do {                                                                                       \
    const hawk::Status status_ = (call);                                                     \
    if (!status_.ok()) {                                                                     \
      std::fprintf(stderr, "rank %d: %s: %s\n", rank, #call, status_.to_string().c_str()); \
      return result;                                                                         \
    }                                                                                        \
  } while (0)

//! Rank `rank` of `ranks`: piece [L·rank/P, L·(rank+1)/P) of every sequence, `steps` forward+backward steps.
RankResult run_rank(Mode mode, int rank, int ranks, int device, const HostProblem& problem, Transport& transport,
                    HostBarrier& barrier, int steps) {
  RankResult result;
  const Dims& d = problem.dims;
  const std::int64_t M = d.micro_batches, Bm = d.micro(), W = d.width;
  cudaSetDevice(device);
  cudaStream_t stream;
  RANK_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  const std::int64_t from = d.length * rank / ranks, to = d.length * (rank + 1) / ranks, Lp = to - from;
  const std::int64_t count = Bm * W;  // one micro-batch's states
  const std::int64_t micro_tokens = Bm * Lp, chunk = hawk::rglru::kDefaultTimeChunk;
  const std::int64_t checkpoint_rows = hawk::rglru::checkpoint_rows(micro_tokens, Bm, chunk);

  // This rank's piece and the replicated parameters.
  thrust::device_vector<Element> x(cut(d, problem.x, from, to)), dy(cut(d, problem.dy, from, to));
  thrust::device_vector<Element> Wx(problem.Wx), Wa(problem.Wa), y(x.size()), dx(x.size());
  thrust::device_vector<float> bx(problem.bx), ba(problem.ba), a_param(problem.a_param);
  thrust::device_vector<float> dWx(Wx.size()), dWa(Wa.size()), dbx(W), dba(W), da_param(W);
  // Per micro-batch: states and checkpoints (never reused within a step, so a sent buffer stays valid), and the
  // transfer pairs.
  thrust::device_vector<float> h0(M * count), h_final(M * count), dh_final(M * count), dh0(M * count);
  thrust::device_vector<float> checkpoints(M * checkpoint_rows * W);
  thrust::device_vector<float> pairs(M * 2 * count), gathered(M * ranks * 2 * count);
  thrust::device_vector<float> back_pairs(M * 2 * count), back_gathered(M * ranks * 2 * count);
  thrust::device_vector<float> boundary_dh(M * count);  // fast backward: the dh its suffix handed to its prefix

  auto forward_args = [&](std::int64_t m) {
    hawk::rglru::ForwardArguments a;
    a.shape.num_sequences = Bm;
    a.shape.seq_len = Lp;
    a.shape.num_tokens = micro_tokens;
    a.shape.width = W;
    a.shape.num_blocks = d.blocks;
    a.dtype = hawk::DType::kBFloat16;
    a.mode = hawk::rglru::GateMode::kFused;
    // The sequence starts with a reset: it belongs to piece 0; later pieces continue the carried state.
    a.reset_mode = cp::piece_reset_mode(hawk::rglru::ResetMode::kSequenceStart, rank);
    a.x = raw(x) + m * micro_tokens * W;
    a.Wx = raw(Wx);
    a.bx = raw(bx);
    a.Wa = raw(Wa);
    a.ba = raw(ba);
    a.a_param = raw(a_param);
    a.h0 = rank > 0 ? raw(h0) + m * count : nullptr;
    a.h_final = raw(h_final) + m * count;
    a.y = raw(y) + m * micro_tokens * W;
    a.checkpoints = raw(checkpoints) + m * checkpoint_rows * W;
    a.checkpoint_chunk = chunk;
    return a;
  };
  auto backward_args = [&](std::int64_t m) {
    hawk::rglru::BackwardArguments a = hawk::rglru::backward_arguments_for(forward_args(m));
    a.dy = raw(dy) + m * micro_tokens * W;
    a.dh_final = rank + 1 < ranks ? raw(dh_final) + m * count : nullptr;
    a.dx = raw(dx) + m * micro_tokens * W;
    a.dWx = raw(dWx);  // parameter gradients: a trainer accumulates them per micro-batch and all-reduces
    a.dbx = raw(dbx);
    a.dWa = raw(dWa);
    a.dba = raw(dba);
    a.da_param = raw(da_param);
    a.dh0 = raw(dh0) + m * count;
    return a;
  };
  const std::size_t workspace_bytes =
      std::max({hawk::rglru::forward_workspace_size(forward_args(0)), cp::transfer_workspace_size(forward_args(0)),
                cp::forward_correct_workspace_size(forward_args(0)),
                hawk::rglru::backward_workspace_size(backward_args(0)),
                cp::backward_split_workspace_size(backward_args(0), kCorrectionTokens)});
  thrust::device_vector<unsigned char> workspace_buffer(workspace_bytes + 16);  // 256-byte aligned (cudaMalloc)
  void* workspace = raw(workspace_buffer);
  // Every exit (also an error) drains this rank's stream and meets the other ranks before the buffers above are
  // freed: a peer's stream may still be copying from them. Declared after them, so it runs first.
  struct FinishTogether {
    HostBarrier& barrier;
    cudaStream_t stream;
    ~FinishTogether() {
      cudaStreamSynchronize(stream);
      barrier.wait();
      cudaStreamDestroy(stream);
    }
  } finish_together{barrier, stream};

  for (int step = 0; step < steps; ++step) {
    const int tag = step * 1000;  // the emulation's messages are matched by tag; each step has its own
    RANK_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
    barrier.wait();  // every rank starts the step together (and the last step's copies are done)
    const auto start = std::chrono::steady_clock::now();
    if (mode == Mode::kExact) {
      // Forward, 0 -> P-1, micro-batch by micro-batch: rank p starts micro-batch m+1 as soon as it sent m.
      for (std::int64_t m = 0; m < M; ++m) {
        if (rank > 0) RANK_CHECK(transport.recv(raw(h0) + m * count, count, rank - 1, tag + int(m), stream));
        RANK_STATUS(hawk::rglru::forward(forward_args(m), workspace, workspace_bytes, stream));
        if (rank + 1 < ranks)
          RANK_CHECK(transport.send(raw(h_final) + m * count, count, rank + 1, tag + int(m), stream));
      }
      // Backward, P-1 -> 0: dh_final of piece p is dh0 of piece p+1.
      for (std::int64_t m = 0; m < M; ++m) {
        if (rank + 1 < ranks)
          RANK_CHECK(transport.recv(raw(dh_final) + m * count, count, rank + 1, tag + int(100 + m), stream));
        RANK_STATUS(hawk::rglru::backward(backward_args(m), workspace, workspace_bytes, stream));
        if (rank > 0) RANK_CHECK(transport.send(raw(dh0) + m * count, count, rank - 1, tag + int(100 + m), stream));
      }
    } else {
      for (std::int64_t m = 0; m < M; ++m) {
        float* mine = raw(pairs) + m * 2 * count;  // [decay, h_end]
        float* all = raw(gathered) + m * ranks * 2 * count;
        RANK_STATUS(cp::forward_transfer(forward_args(m), mine, mine + count, workspace, workspace_bytes, stream));
        RANK_CHECK(transport.all_gather(mine, all, 2 * count, tag + int(200 + m), stream));
        // Carry-in: the pieces before this rank, in rank order, from h0 = 0 (the sequence starts with a reset).
        RANK_STATUS(cp::combine_carries(all, all + count, 2 * count, rank, count, nullptr, nullptr,
                                        raw(h0) + m * count, cp::CarryDirection::kForward, stream));
        cp::Correction outcome;
        RANK_STATUS(cp::forward_correct(forward_args(m), raw(h0) + m * count, mine + count, kCorrectionTokens,
                                        workspace, workspace_bytes, stream, &outcome));
        result.corrections += 1;
        result.stopped_early += outcome == cp::Correction::kStoppedEarly;
      }
      for (std::int64_t m = 0; m < M; ++m) {
        float* mine = raw(back_pairs) + m * 2 * count;  // [decay, dh0 from dh_final = 0]
        float* all = raw(back_gathered) + m * ranks * 2 * count;
        RANK_CHECK(cudaMemcpyAsync(mine, raw(pairs) + m * 2 * count, count * sizeof(float), cudaMemcpyDeviceToDevice,
                                   stream) == cudaSuccess);
        auto args = backward_args(m);
        args.h0 = raw(h0) + m * count;  // the combined carry-in (zeros on rank 0)
        RANK_STATUS(cp::backward_transfer_split(args, kCorrectionTokens, mine + count, raw(boundary_dh) + m * count,
                                                workspace, workspace_bytes, stream));
        RANK_CHECK(transport.all_gather(mine, all, 2 * count, tag + int(300 + m), stream));
        // dh_final: the pieces after this rank, P-1 down to rank+1, from the sequence's dh_final = 0.
        RANK_STATUS(cp::combine_carries(all + (rank + 1) * 2 * count, all + (rank + 1) * 2 * count + count,
                                        2 * count, ranks - 1 - rank, count, nullptr, nullptr,
                                        raw(dh_final) + m * count, cp::CarryDirection::kReverse, stream));
        cp::Correction outcome;
        RANK_STATUS(cp::backward_correct(args, raw(dh_final) + m * count, kCorrectionTokens,
                                         raw(boundary_dh) + m * count, mine + count, workspace, workspace_bytes, stream,
                                         &outcome));
        result.corrections += 1;
        result.stopped_early += outcome == cp::Correction::kStoppedEarly;
      }
    }
    RANK_CHECK(cudaStreamSynchronize(stream) == cudaSuccess);
    result.step_ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  result.y = download(y);
  result.dx = download(dx);
  if (rank + 1 == ranks) result.h_final = download(h_final);
  if (rank == 0) result.dh0 = download(dh0);
  result.ok = true;
  return result;
}

// ---- running P ranks, the single-GPU reference and the comparison ----------------------------------------------

//! Runs `ranks` ranks as threads: one GPU each through NCCL, or all on GPU 0 through the stream transport.
bool run_ranks(Mode mode, int ranks, bool emulate, const HostProblem& problem, int steps,
               std::vector<RankResult>& results) {
  results.assign(static_cast<std::size_t>(ranks), RankResult{});
  std::vector<std::unique_ptr<Transport>> transports;
  Mailbox mailbox;
  HostBarrier barrier(ranks);
#if defined(HAWK_CP_WITH_NCCL)
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks));
  if (!emulate) {
    std::vector<int> devices(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) devices[static_cast<std::size_t>(r)] = r;
    if (ncclCommInitAll(comms.data(), ranks, devices.data()) != ncclSuccess) {
      std::fprintf(stderr, "ncclCommInitAll failed\n");
      return false;
    }
    for (int r = 0; r < ranks; ++r) transports.push_back(std::make_unique<NcclTransport>(comms[r]));
  }
#endif
  if (emulate)
    for (int r = 0; r < ranks; ++r) transports.push_back(std::make_unique<StreamTransport>(mailbox, r, ranks));
  if (static_cast<int>(transports.size()) != ranks) return false;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      results[r] = run_rank(mode, r, ranks, emulate ? 0 : r, problem, *transports[r], barrier, steps);
    });
  for (auto& t : threads) t.join();
#if defined(HAWK_CP_WITH_NCCL)
  if (!emulate)
    for (auto comm : comms) ncclCommDestroy(comm);
#endif
  for (const auto& r : results)
    if (!r.ok) return false;
  return true;
}

//! Rank pieces [B, Lp, W] back into [B, L, W].
std::vector<Element> join(const Dims& d, const std::vector<RankResult>& results,
                          std::vector<Element> RankResult::*member) {
  const int ranks = static_cast<int>(results.size());
  std::vector<Element> out;
  out.reserve(static_cast<std::size_t>(d.batch * d.length * d.width));
  for (std::int64_t n = 0; n < d.batch; ++n)
    for (int r = 0; r < ranks; ++r) {
      const std::int64_t Lp = d.length * (r + 1) / ranks - d.length * r / ranks;
      const auto& v = results[r].*member;
      out.insert(out.end(), v.begin() + n * Lp * d.width, v.begin() + (n + 1) * Lp * d.width);
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

//! What one call on one GPU gives: P = 1 of the same rank code (a plain forward and backward).
struct WholeResult {
  std::vector<Element> y, dx;
  std::vector<float> h_final, dh0;
};

WholeResult whole_of(const Dims& d, const std::vector<RankResult>& one) {
  return WholeResult{join(d, one, &RankResult::y), join(d, one, &RankResult::dx), one.back().h_final,
                     one.front().dh0};
}

//! exact: bitwise; fast: relative L2 within bf16 storage for y and dx, fp32 rounding for the states. The
//! micro-batch states [M, Bm, W] are the batch's [B, W] rows in order: no reshuffling needed.
bool check(Mode mode, const Dims& d, const std::vector<RankResult>& results, const WholeResult& whole,
           std::string& summary) {
  const auto y = join(d, results, &RankResult::y), dx = join(d, results, &RankResult::dx);
  const auto& h_final = results.back().h_final;
  const auto& dh0 = results.front().dh0;
  char line[256];
  if (mode == Mode::kExact) {
    const bool ey = same_bits(y, whole.y), eh = same_bits(h_final, whole.h_final), edx = same_bits(dx, whole.dx),
               edh = same_bits(dh0, whole.dh0);
    std::snprintf(line, sizeof line, "y %s, h_final %s, dx %s, dh0 %s (bitwise vs one GPU)", ey ? "equal" : "DIFFERENT",
                  eh ? "equal" : "DIFFERENT", edx ? "equal" : "DIFFERENT", edh ? "equal" : "DIFFERENT");
    summary = line;
    return ey && eh && edx && edh;
  }
  const double ey = relative_l2(y, whole.y), eh = relative_l2(h_final, whole.h_final),
               edx = relative_l2(dx, whole.dx), edh0 = relative_l2(dh0, whole.dh0);
  std::snprintf(line, sizeof line, "relative L2 vs one GPU: y %.3e, h_final %.3e, dx %.3e, dh0 %.3e", ey, eh, edx,
                edh0);
  summary = line;
  return ey <= 5e-3 && eh <= 1e-5 && edx <= 5e-3 && edh0 <= 1e-5;  // bf16 storage for y, dx; fp32 for states
}

//! "; corrections stopped early: k of n" (fast mode; the corrections of every rank and step).
std::string early_exits(const std::vector<RankResult>& results) {
  int stopped = 0, total = 0;
  for (const auto& r : results) {
    stopped += r.stopped_early;
    total += r.corrections;
  }
  return total == 0 ? std::string() : "; corrections stopped early: " + std::to_string(stopped) + " of " +
                                          std::to_string(total);
}

[[maybe_unused]] double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

//! The step time of a run: per step the slowest rank, then the median over the timed steps.
[[maybe_unused]] double step_median_ms(const std::vector<RankResult>& results, int warmup) {
  std::vector<double> steps;
  for (std::size_t s = static_cast<std::size_t>(warmup); s < results.front().step_ms.size(); ++s) {
    double slowest = 0;
    for (const auto& r : results) slowest = std::max(slowest, r.step_ms[s]);
    steps.push_back(slowest);
  }
  return median(steps);
}

// ---- strong scaling ------------------------------------------------------------------------------------------

int run_bench(int devices, const char* json_path, long long length) {
#if !defined(HAWK_CP_WITH_NCCL)
  (void)devices;
  (void)json_path;
  (void)length;
  std::printf("built without NCCL: the benchmark is unavailable: skipped\n");
  return 77;
#else
  Dims d;
  d.batch = 1;
  d.micro_batches = 1;
  d.length = length;
  d.width = 2560;
  d.blocks = 10;
  constexpr int kWarmup = 2, kTimed = 10;
  const HostProblem problem = make_problem(d);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("strong scaling, forward+backward, B=1, L=%lld, W=%lld, H=%lld, bf16 fused, reset at t=0, %s; "
              "median of %d steps after %d warm-up, each step timed from a common start to the slowest rank\n",
              static_cast<long long>(d.length), static_cast<long long>(d.width), static_cast<long long>(d.blocks),
              prop.name, kTimed, kWarmup);
  std::vector<RankResult> one;
  if (!run_ranks(Mode::kExact, 1, false, problem, kWarmup + kTimed, one)) return 1;
  const double base = step_median_ms(one, kWarmup);
  const WholeResult whole = whole_of(d, one);
  std::string rows = "    {\"gpus\": 1, \"mode\": \"single\", \"median_ms\": " + std::to_string(base) +
                     ", \"speedup\": 1.0, \"efficiency\": 1.0, \"matches_one_gpu\": true}";
  std::printf("  1 GPU            %9.3f ms\n", base);
  bool ok = true;
  for (int P = 2; P <= devices && P <= 8; P *= 2)
    for (Mode mode : {Mode::kExact, Mode::kFast}) {
      std::vector<RankResult> results;
      if (!run_ranks(mode, P, false, problem, kWarmup + kTimed, results)) return 1;
      std::string summary;
      const bool match = check(mode, d, results, whole, summary);
      summary += early_exits(results);
      ok = ok && match;
      const double ms = step_median_ms(results, kWarmup);
      std::printf("  %d GPUs, %-5s  %9.3f ms  speed-up %.2fx  efficiency %3.0f%%  %s\n", P, mode_name(mode), ms,
                  base / ms, 100.0 * base / ms / P, summary.c_str());
      rows += ",\n    {\"gpus\": " + std::to_string(P) + ", \"mode\": \"" + mode_name(mode) +
              "\", \"median_ms\": " + std::to_string(ms) + ", \"speedup\": " + std::to_string(base / ms) +
              ", \"efficiency\": " + std::to_string(base / ms / P) + ", \"matches_one_gpu\": " +
              (match ? "true" : "false") + ", \"check\": \"" + summary + "\"}";
    }
  if (json_path != nullptr) {
    const char* commit = std::getenv("HAWK_COMMIT");
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    if (FILE* f = std::fopen(json_path, "w")) {
      std::fprintf(f,
                   "{\n  \"benchmark\": \"rglru_context_parallel_strong_scaling\",\n  \"gpu\": \"%s\",\n  \"gpus\": %d,\n"
                   "  \"date\": \"%s\",\n  \"commit\": \"%s\",\n  \"shape\": {\"B\": 1, \"L\": %lld, \"W\": %lld, \"H\": %lld},\n"
                   "  \"protocol\": \"bf16 fused, reset at t=0, forward+backward with checkpoints; each step timed on the "
                   "host from a common start (thread barrier) to the slowest rank's stream end; median of %d steps after "
                   "%d warm-up; NCCL, one thread per GPU, NCCL_NVLS_ENABLE=0\",\n  \"rows\": [\n%s\n  ]\n}\n",
                   prop.name, devices, date, commit != nullptr ? commit : "unknown", static_cast<long long>(d.length),
                   static_cast<long long>(d.width), static_cast<long long>(d.blocks), kTimed, kWarmup, rows.c_str());
      std::fclose(f);
    }
  }
  std::printf("%s\n", ok ? "context parallel benchmark: every run matches one GPU" : "context parallel: MISMATCH");
  return ok ? 0 : 1;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  int emulated_ranks = 0;
  bool bench = false;
  const char* json_path = nullptr;
  long long bench_length = 131072;
  bool length_given = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--emulate") == 0 && i + 1 < argc) {
      emulated_ranks = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--bench") == 0) {
      bench = true;
      if (i + 1 < argc && argv[i + 1][0] != '-') json_path = argv[++i];
    } else if (std::strcmp(argv[i], "--length") == 0 && i + 1 < argc) {
      char* end = nullptr;
      bench_length = std::strtoll(argv[++i], &end, 10);
      length_given = true;
      // A multiple of 512: at up to 8 GPUs every piece is a whole number of 64-token chunks, as at the issues' shapes.
      if (end == nullptr || *end != '\0' || bench_length < 512 || bench_length % 512 != 0 ||
          bench_length > (1LL << 22)) {
        std::fprintf(stderr, "--length must be a multiple of 512 in [512, 4194304], got %s\n", argv[i]);
        return 1;
      }
    } else {
      std::fprintf(stderr, "usage: context_parallel [--emulate P | --bench [JSON] [--length L]]\n");
      return 1;
    }
  }
  if (length_given && !bench) {
    std::fprintf(stderr, "--length goes with --bench\n");
    return 1;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  setenv("NCCL_NVLS_ENABLE", "0", 0);  // NVLink multicast off unless the user chose otherwise
  if (bench) return run_bench(devices, json_path, bench_length);
  const bool emulate = emulated_ranks > 0;
  const int ranks = emulate ? emulated_ranks : devices;
  if (!emulate) {
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
  Dims d;  // B = 4 in 4 micro-batches of one sequence, L = 6000, W = 512, H = 2
  if (std::getenv("HAWK_SANITIZE") != nullptr) {
    // Under compute-sanitizer (racecheck runs each kernel far slower): B = 2, L = 1500. Pieces stay longer than
    // the 512 tokens the corrections rerun for up to 2 ranks, so both correction paths still run.
    d.batch = 2;
    d.micro_batches = 2;
    d.length = 1500;
  }
  std::printf("RG-LRU context parallelism: B=%lld (%lld micro-batches), L=%lld, W=%lld, H=%lld, bf16 fused, %d ranks %s\n",
              static_cast<long long>(d.batch), static_cast<long long>(d.micro_batches),
              static_cast<long long>(d.length), static_cast<long long>(d.width), static_cast<long long>(d.blocks),
              ranks, emulate ? "as threads on GPU 0" : "over NCCL");
  const HostProblem problem = make_problem(d);
  std::vector<RankResult> one;  // one GPU: the same rank code with P = 1, a plain forward and backward
  if (!run_ranks(Mode::kExact, 1, true, problem, 1, one)) return 1;
  const WholeResult whole = whole_of(d, one);

  bool ok = true;
  for (Mode mode : {Mode::kExact, Mode::kFast}) {
    std::vector<RankResult> results;
    if (!run_ranks(mode, ranks, emulate, problem, 1, results)) return 1;
    std::string summary;
    const bool match = check(mode, d, results, whole, summary);
    summary += early_exits(results);
    std::printf("%s: %s\n", mode_name(mode), summary.c_str());
    ok = ok && match;
  }
  std::printf("%s\n", ok ? "context parallel: OK" : "context parallel: MISMATCH");
  return ok ? 0 : 1;
}
