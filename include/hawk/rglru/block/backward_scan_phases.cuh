#pragma once
//! \file
//! The phases of the backward scan's chunk (kernels/backward_scan_kernel.cuh), as named pieces:
//! - `ScanThread`: a thread's roles and channels;
//! - `StagedChunk`: what a thread reads of the staged chunk (x, gx, ga of a token and channel, its reset flag), and,
//!   in fused mode, where (B) keeps the activations i, r for (D);
//! - `stage_x_tile` (fused mode, where the layout asks): the tile's x in fp32 ahead of (B);
//! - (B) `chunk_gates`: a_bar and u of every token and channel of the tile, into shared tiles;
//! - (C) `replay_chunk` and `reverse_chunk`: the forward recurrence replayed from the checkpoint, and the reverse
//!   recurrence of dh, one thread per channel, token by token;
//! - (D) `chunk_row_gradients`: the row gradients of the chunk, handed row by row to the caller, and this thread's
//!   share of d a_param; `chunk_gradients` stores them;
//! - `tile_da_param`: the tile's d a_param from every thread's shares, in the order the configuration fixes.
//!
//! Bits: each piece does the operations the kernel did inline, in the same order, through the same gate_math.hpp
//! functions; the pieces are __forceinline__.

#include <cstdint>

#include "hawk/core/element.cuh"
#include "hawk/rglru/gate_math.hpp"
#include "hawk/rglru/modes.hpp"

namespace hawk {
namespace rglru {

#if defined(__CUDACC__)

namespace backward_detail {

//! Tokens whose inputs the scan's recurrences load into registers at once (phase C): enough independent loads
//! in flight to cover the shared-memory latency, few enough registers to keep two CTAs per SM.
constexpr int kScanBatch = 16;

//! Whether a scan takes the straight-line forms of its gate math: the sqrt derivative without its branch
//! (math::sqrt_grad_capped_finite<true>) and, under ResetAtSequenceStart, the reset test that knows a thread's later
//! rows are never token 0 (StagedChunk::is_reset_row). The same bits either way; only registers and instructions
//! differ. Taken by 16-bit elements, where ptxas (CUDA 13) spills nothing with them and no scan of sm_89, sm_90a,
//! sm_100a or sm_120a loses a CTA an SM (the w = 128 sequential scan on sm_90a: 80 -> 116 registers, under the 128
//! that its two CTAs allow; the fused chunked scans at most 64, under the 80 of three), except on sm_80 (its w = 128
//! sequential scans would spill 12 bytes). fp32 keeps the branches: some of its scans spill with them (sm_90a's
//! compact w = 256 under ResetFlags, sm_120a's w = 128). The scans that compute dx take them everywhere (their
//! 128-register bound: spills 104 -> 8 bytes at w = 64).
template <class Config>
__host__ __device__ constexpr bool straight_line_gate_math() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  return Config::kDxInScan;
#else
  return Config::kDxInScan || sizeof(typename Config::Element) == 2;
#endif
}

//! One thread's view of the staged chunk: the chunk's inputs (`inputs`, the forward's stage layout), the fused
//! projection's gx | ga (`gates`), its reset flags, and this thread's first channel `q` of the tile. `Config`
//! is a BackwardConfig.
template <class Config>
struct StagedChunk {
  using Element = typename Config::Element;
  static constexpr int kIS = Config::PairedForward::kInputStride;  // the forward's stage and gate tile layouts
  static constexpr int kGS = Config::PairedForward::kGateStride;

  const Element* inputs;
  float* gates;  //!< fused: gx | ga, then (B) overwrites each with its activation i | r
  const std::uint8_t* reset_flags;
  std::int64_t chunk_start;
  int col_in_block;
  int q;

  //! Whether token r of the chunk starts a document.
  __device__ __forceinline__ bool is_reset(int r) const {
    if constexpr (Config::ResetPolicy::kMode == ResetMode::kSequenceStart) {
      return chunk_start + r == 0;
    } else if constexpr (Config::ResetPolicy::kMode == ResetMode::kFlags) {
      return reset_flags[r] != 0;
    } else {
      return false;
    }
  }

  //! is_reset(r) for a thread's row r = row0 + row_step · RowStep (row0 >= 0, RowStep >= 1, chunk_start >= 0, as every
  //! caller has them): under ResetAtSequenceStart only row_step 0 can be the sequence's token 0, so the unrolled later
  //! rows drop the 64-bit comparison and its selects (where straight_line_gate_math says).
  __device__ __forceinline__ bool is_reset_row(int r, int row_step) const {
    if constexpr (Config::ResetPolicy::kMode == ResetMode::kSequenceStart && straight_line_gate_math<Config>()) {
      return row_step == 0 && chunk_start == 0 && r == 0;
    } else {
      return is_reset(r);
    }
  }

  //! gx, ga of token r, channel q + v.
  __device__ __forceinline__ void gate_logits(int r, int v, float& gx, float& ga) const {
    if constexpr (Config::kFused) {
      gx = gates[r * kGS + q + v];
      ga = gates[r * kGS + Config::kWidthTile + q + v];
    } else {
      constexpr int kPlane = Config::kTimeChunk * kIS;
      gx = to_float(inputs[kPlane + r * kIS + q + v]);
      ga = to_float(inputs[2 * kPlane + r * kIS + q + v]);
    }
  }

  //! Fused mode: keep the activations of token r, channels q .. q + 3 in place of their gx, ga (the positions
  //! gate_logits4 reads), for (D) to read back with `kept_activations4`. The thread that wrote them reads them: no
  //! barrier between.
  __device__ __forceinline__ void keep_activations(int r, const GateActivations (&a)[4]) const {
    static_assert(Config::kFused && kGS % 4 == 0, "keep_activations: fused mode, 16-byte aligned gate rows");
    *reinterpret_cast<float4*>(gates + r * kGS + q) = make_float4(a[0].i, a[1].i, a[2].i, a[3].i);
    *reinterpret_cast<float4*>(gates + r * kGS + Config::kWidthTile + q) = make_float4(a[0].r, a[1].r, a[2].r, a[3].r);
  }

  //! gx, ga of token r, channels q .. q + 3, in one vector load each. (B) reads its gates this way; (D) of
  //! gate-logits mode keeps gate_logits' scalar reads, which the compiler interleaves with the gradient math (vector
  //! reads there took the gate-logits chunked scan from 48 to 58 registers, one CTA fewer per SM).
  __device__ __forceinline__ void gate_logits4(int r, float (&gx)[4], float (&ga)[4]) const {
    static_assert(kGS % 4 == 0 && kIS % 4 == 0, "gate_logits4: rows of whole 4-channel vectors");
    if constexpr (Config::kFused) {
      load_vector<float, 4>(gates + r * kGS + q, gx);
      load_vector<float, 4>(gates + r * kGS + Config::kWidthTile + q, ga);
    } else {
      constexpr int kPlane = Config::kTimeChunk * kIS;
      load_vector<Element, 4>(inputs + kPlane + r * kIS + q, gx);
      load_vector<Element, 4>(inputs + 2 * kPlane + r * kIS + q, ga);
    }
  }

  //! Fused mode: the activations keep_activations kept for token r, channels q .. q + 3, in two vector loads.
  __device__ __forceinline__ void kept_activations4(int r, GateActivations (&a)[4]) const {
    static_assert(Config::kFused && kGS % 4 == 0, "kept_activations4: fused mode, 16-byte aligned gate rows");
    const float4 i = *reinterpret_cast<const float4*>(gates + r * kGS + q);
    const float4 rr = *reinterpret_cast<const float4*>(gates + r * kGS + Config::kWidthTile + q);
    a[0] = {i.x, rr.x}, a[1] = {i.y, rr.y}, a[2] = {i.z, rr.z}, a[3] = {i.w, rr.w};
  }

  //! x of token r, channels q .. q + 3, in one vector load (rows and channel offsets keep it aligned: the stage's
  //! row strides are multiples of 4 elements, q and col_in_block of 4).
  __device__ __forceinline__ void x4(int r, float (&out)[4]) const {
    static_assert(kIS % 4 == 0, "x4: rows of whole 4-channel vectors");
    load_vector<Element, 4>(inputs + r * kIS + (Config::kFused ? col_in_block : 0) + q, out);
  }

  //! x of token r, channel q + v.
  __device__ __forceinline__ float x(int r, int v) const {
    if constexpr (Config::kFused) {
      return to_float(inputs[r * kIS + col_in_block + q + v]);
    } else {
      return to_float(inputs[r * kIS + q + v]);
    }
  }
};

//! What a thread of a scan CTA does, for a tile starting at channel `col0`: in (C), `h` threads replay the forward
//! (channel = thread) and `dh` threads run the reverse recurrence (channel dh_channel: a whole warp after the h
//! threads when there are enough threads and `Concurrent`, so that both recurrences run at once, else the same
//! threads, the replay first: a layout that writes dh over a_bar needs that order, ScanLayout's kDxInScan); in (B) and
//! (D), channels [q, q + 4) of rows row0, row0 + kRowStep, ... (ascending: the order of its d a_param sum; the
//! loops are unrolled so that the independent rows' math interleaves), with those channels' log_a coefficients.
template <class Config, bool Concurrent = Config::kConcurrentRecurrences>
struct ScanThread {
  static constexpr bool kConcurrent = Concurrent;
  static constexpr int kRowStep = Config::kScanRowStep;
  static constexpr int kRowsPerThread = (Config::kTimeChunk + kRowStep - 1) / kRowStep;
  bool h_thread;
  int dh_channel;
  bool dh_thread;
  int q;
  int row0;
  float log_a_coeff[4];

  __device__ __forceinline__ ScanThread(int thread, const float* a_param, std::int64_t col0) {
    h_thread = thread < Config::kWidthTile;
    dh_channel = Concurrent ? thread - Config::kDhThreadOffset : thread;
    dh_thread = dh_channel >= 0 && dh_channel < Config::kWidthTile;
    q = (thread % Config::kThreadsPerRow) * Config::kChannelVector;
    row0 = thread / Config::kThreadsPerRow;
    load_log_a_coefficients(thread, a_param, col0);
  }

  //! log_a_coeff[v] = -c · softplus(a_param[col0 + q + v]). The IEEE expf and log1pf of a softplus are some 80
  //! instructions, and every thread of a ticket would evaluate four; instead each lane evaluates the coefficient
  //! of tile channel `lane` (and `lane + 32` in 64-channel tiles) once and every thread takes its four by shuffles:
  //! the same function of the same input, so the same bits. Needs the whole warp here (the kernels construct
  //! ScanThread before any thread-dependent return); tile widths other than 8, 16, 32 and 64 evaluate their own.
  __device__ __forceinline__ void load_log_a_coefficients(int thread, const float* a_param, std::int64_t col0) {
    constexpr int kWT = Config::kWidthTile;
    if constexpr (kWT <= 32 || kWT == 64) {
      const int lane = thread % 32;
      const float low = log_a_coefficient(a_param[col0 + lane % kWT]);  // narrower tiles: the lanes repeat
      float high = 0.0f;
      if constexpr (kWT == 64) high = log_a_coefficient(a_param[col0 + 32 + lane]);
#pragma unroll
      for (int v = 0; v < Config::kChannelVector; ++v) {
        const int channel = q + v;
        const float from_low = __shfl_sync(0xffffffffu, low, channel % 32);
        if constexpr (kWT == 64) {
          // Both shuffles by every lane, then a select: an array indexed by `channel < 32` would go to the stack.
          const float from_high = __shfl_sync(0xffffffffu, high, channel % 32);
          log_a_coeff[v] = channel < 32 ? from_low : from_high;
        } else {
          log_a_coeff[v] = from_low;
        }
      }
    } else {
#pragma unroll
      for (int v = 0; v < Config::kChannelVector; ++v) log_a_coeff[v] = log_a_coefficient(a_param[col0 + q + v]);
    }
  }
};

//! Fused mode: x of this thread's rows (row0, row0 + RowStep, ... below `valid`) and channels q .. q + 3 from the
//! staged block rows into x_tile (fp32), ahead of (B), so that (B) no longer reads the staged rows and their memory
//! can take (B)'s u tile (ScanLayout's kGatesInWeights).
template <class Config, int RowsPerThread, int RowStep>
__device__ __forceinline__ void stage_x_tile(const StagedChunk<Config>& staged, int row0, int valid, float* x_tile) {
  constexpr int kWT = Config::kWidthTile;
  const int q = staged.q;
#pragma unroll
  for (int row_step = 0; row_step < RowsPerThread; ++row_step) {
    const int r = row0 + row_step * RowStep;
    if (r >= valid) break;
    float x[4];
    staged.x4(r, x);
    *reinterpret_cast<float4*>(x_tile + r * kWT + q) = make_float4(x[0], x[1], x[2], x[3]);
  }
}

//! (B) a_bar, u of this thread's rows (row0, row0 + RowStep, ... below `valid`) and channels q .. q + 3, into
//! a_bar_tile and u_tile ([TimeChunk][WidthTile] fp32); fused mode also keeps x of the tile in fp32 (x_tile; not
//! with KeepX false, where (D) reads x from the staged rows), or,
//! with XStaged, reads it from there (stage_x_tile wrote this thread's own rows and channels: the same values), and
//! keeps the activations i, r in place of the gate logits (StagedChunk::keep_activations) so that (D) does not
//! evaluate the sigmoids again.
template <class Config, int RowsPerThread, int RowStep, bool XStaged = false, bool KeepX = Config::kFused>
__device__ __forceinline__ void chunk_gates(const StagedChunk<Config>& staged, const float (&log_a_coeff)[4],
                                            int row0, int valid, float* a_bar_tile, float* u_tile, float* x_tile) {
  constexpr int kWT = Config::kWidthTile;
  constexpr int kV = Config::kChannelVector;
  static_assert(kV == 4, "chunk_gates: one float4 of channels per thread");
  static_assert(!XStaged || Config::kFused, "chunk_gates: x is staged in fp32 in fused mode only");
  const int q = staged.q;
#pragma unroll
  for (int row_step = 0; row_step < RowsPerThread; ++row_step) {
    const int r = row0 + row_step * RowStep;
    if (r >= valid) break;
    const bool reset = staged.is_reset_row(r, row_step);
    float x[kV], a_bar[kV], u[kV], gx[kV], ga[kV];
    if constexpr (XStaged) {
      load_vector<float, 4>(x_tile + r * kWT + q, x);
    } else {
      staged.x4(r, x);
    }
    staged.gate_logits4(r, gx, ga);
    GateActivations activations[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      activations[v] = gate_activations(gx[v], ga[v]);
      const TokenGates g = token_gates(x[v], activations[v], log_a_coeff[v], reset);
      a_bar[v] = g.a_bar;
      u[v] = g.u;
    }
    if constexpr (Config::kFused) staged.keep_activations(r, activations);
    *reinterpret_cast<float4*>(a_bar_tile + r * kWT + q) = make_float4(a_bar[0], a_bar[1], a_bar[2], a_bar[3]);
    *reinterpret_cast<float4*>(u_tile + r * kWT + q) = make_float4(u[0], u[1], u[2], u[3]);
    if constexpr (Config::kFused && KeepX && !XStaged)
      *reinterpret_cast<float4*>(x_tile + r * kWT + q) = make_float4(x[0], x[1], x[2], x[3]);
  }
}

//! (C) the forward replay of channel c through the chunk's `valid` tokens from `carry` (the checkpoint): u_tile's
//! column c is replaced by h_{t-1} of every token. Register-batched: the inputs of kScanBatch tokens are loaded
//! into registers first, then the chain of kScanBatch dependent steps runs on registers only, then its results
//! are stored. (A loop that loads and stores shared memory token by token makes every load wait for the previous
//! store, which the compiler cannot prove does not alias: ~40 cycles a token instead of the ~4 of the arithmetic
//! chain.) The same operations in the same order as one token at a time: the same bits.
//!
//! `first_chunk` (read with FirstChunkKnown under ResetAtSequenceStart): whether the chunk starts the sequence. Its
//! token 0 is then the sequence's one reset token ((B) stored kResetABar) and every other token's a_bar is an
//! exponential, never -0: the batched steps select u at that token alone and take the fused multiply-add elsewhere,
//! recurrence_step's value at every token (the same bits) without a reset test a token. (The tail keeps the test.)
template <class Config, bool FirstChunkKnown = false>
__device__ __forceinline__ void replay_chunk(float* u_tile, const float* a_bar_tile, float carry, int valid, int c,
                                             bool first_chunk = false) {
  constexpr int kWT = Config::kWidthTile;
  constexpr int kB = kScanBatch;
  static_assert(Config::kTimeChunk % kB == 0, "backward scan: TimeChunk must be a multiple of the scan batch");
  // The replay starts from a checkpoint, which need not be the +0 that lets the forward skip the selection
  // under ResetAtSequenceStart (recurrence_step_for): only NoReset, which has no reset token, replays without it.
  constexpr ResetMode kReplayMode =
      Config::ResetPolicy::kMode == ResetMode::kNone ? ResetMode::kNone : ResetMode::kFlags;
  float h = carry;
  int t = 0;
  for (; t + kB <= valid; t += kB) {
    float u[kB], a_bar[kB];
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      u[i] = u_tile[(t + i) * kWT + c];
      a_bar[i] = a_bar_tile[(t + i) * kWT + c];
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      const float h_prev = h;
      if constexpr (FirstChunkKnown && Config::ResetPolicy::kMode == ResetMode::kSequenceStart) {
        h = i == 0 && t == 0 && first_chunk ? u[i] : fmaf(a_bar[i], h, u[i]);
      } else {
        h = recurrence_step_for<kReplayMode>(a_bar[i], h, u[i]);
      }
      u[i] = h_prev;  // h_{t-1} of token t + i
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) u_tile[(t + i) * kWT + c] = u[i];
  }
  for (; t < valid; ++t) {  // the tail of a sequence's last chunk
    const float u = u_tile[t * kWT + c];
    u_tile[t * kWT + c] = h;  // h_{t-1} of token t
    h = recurrence_step_for<kReplayMode>(a_bar_tile[t * kWT + c], h, u);
  }
}

//! (C) the reverse recurrence of channel c through the chunk's `valid` tokens, last token first: dh of every
//! token into dh_tile's column c. The carry (dh of the next token and its a_bar) enters and leaves in
//! `dh_next`, `a_bar_next`, registers that the kernel keeps across chunks. Register-batched as replay_chunk.
//! dh_tile may be a_bar_tile (ScanLayout's kDxInScan): every a_bar of column c is read before dh is stored over it,
//! and no other thread reads column c's a_bar after (the replay of c ran first, on this thread).
//!
//! `Pipelined`: a whole chunk (valid = TimeChunk) runs its batches unrolled, each batch's inputs loaded before the
//! previous batch's steps (rows that none of its stores touches), so that the loads' latency no longer stalls the
//! chain between batches; the same steps in the same order (the same bits).
template <class Config, bool Pipelined = false>
__device__ __forceinline__ void reverse_chunk(const typename Config::Element* dy_tile, const float* a_bar_tile,
                                              float* dh_tile, int valid, int c, float& dh_next, float& a_bar_next) {
  constexpr int kWT = Config::kWidthTile;
  constexpr int kB = kScanBatch;
  constexpr ResetMode kMode = Config::ResetPolicy::kMode;
  if constexpr (Pipelined) {
    constexpr int kC = Config::kTimeChunk;
    constexpr int kBatches = kC / kB;
    if (valid == kC) {
      float dy[kBatches][kB], a_bar[kBatches][kB];  // batch b: tokens kC - 1 - b · kB - i
#pragma unroll
      for (int b = 0; b < kBatches; ++b) {
        if (b == 0) {
#pragma unroll
          for (int i = 0; i < kB; ++i) {
            dy[0][i] = to_float(dy_tile[(kC - 1 - i) * kWT + c]);
            a_bar[0][i] = a_bar_tile[(kC - 1 - i) * kWT + c];
          }
        }
        if (b + 1 < kBatches) {
#pragma unroll
          for (int i = 0; i < kB; ++i) {
            const int t = kC - 1 - (b + 1) * kB - i;
            dy[b + 1][i] = to_float(dy_tile[t * kWT + c]);
            a_bar[b + 1][i] = a_bar_tile[t * kWT + c];
          }
        }
#pragma unroll
        for (int i = 0; i < kB; ++i) {
          dy[b][i] = reverse_step_for<kMode>(a_bar_next, dh_next, dy[b][i]);  // dh of token kC - 1 - b · kB - i
          dh_next = dy[b][i];
          a_bar_next = a_bar[b][i];
        }
#pragma unroll
        for (int i = 0; i < kB; ++i) dh_tile[(kC - 1 - b * kB - i) * kWT + c] = dy[b][i];
      }
      return;
    }
  }
  int t = valid - 1;
  for (; t + 1 - kB >= 0; t -= kB) {  // tokens t, t - 1, ..., t - kB + 1
    float dy[kB], a_bar[kB];
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      dy[i] = to_float(dy_tile[(t - i) * kWT + c]);
      a_bar[i] = a_bar_tile[(t - i) * kWT + c];
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) {
      dy[i] = reverse_step_for<kMode>(a_bar_next, dh_next, dy[i]);  // dh of token t - i
      dh_next = dy[i];
      a_bar_next = a_bar[i];
    }
#pragma unroll
    for (int i = 0; i < kB; ++i) dh_tile[(t - i) * kWT + c] = dy[i];
  }
  for (; t >= 0; --t) {  // the tail of a sequence's last chunk
    const float dh = reverse_step_for<kMode>(a_bar_next, dh_next, to_float(dy_tile[t * kWT + c]));
    const float a_bar = a_bar_tile[t * kWT + c];  // before dh's store, which may take its place
    dh_tile[t * kWT + c] = dh;
    dh_next = dh;
    a_bar_next = a_bar;
  }
}

//! Where (D) writes a chunk's row gradients: gate-logits mode the gradients themselves (Element), fused mode fp32
//! rows for the product kernels; each [T, W], addressed at the chunk's first token and the tile's first channel.
template <class Config>
struct ChunkGradientRows {
  typename Config::Element* dx;
  typename Config::Element* dgx;
  typename Config::Element* dga;
  float* dx_direct_f32;
  float* dgx_f32;
  float* dga_f32;
};

//! This thread's shares of its chunk's d a_param: one sum per d a_param group (Config::kDaParamRowStep) its rows
//! fall in, for each of its 4 channels, from 0.
template <class Config>
struct DaParamShares {
  float sum[Config::kDaParamGroups][4];
  __device__ __forceinline__ DaParamShares() {
#pragma unroll
    for (int g = 0; g < Config::kDaParamGroups; ++g)
#pragma unroll
      for (int v = 0; v < 4; ++v) sum[g][v] = 0.0f;
  }
};

//! (D) the row gradients of this thread's rows (row0, row0 + RowStep, ... below `valid`) and channels q .. q + 3
//! from h_{t-1} (h_prev_tile, replay_chunk's) and dh (dh_tile, reverse_chunk's), each row handed to
//! `sink(row_step, r, dx, dgx, dga)` (dx the direct path in fused mode; four channels each); `da` accumulates this
//! thread's shares of d a_param in ascending rows, row row0 + j · RowStep into group j % kDaParamGroups. Fused mode
//! reads x from the fp32 x tile (XTile) or from the staged rows (the same values, widened by the same conversion).
//! With ABarTile, a of every token that is not a reset comes from (B)'s a_bar tile (token_gates' a, the same bits:
//! the same function of the same r and coefficient) instead of its exponential again: for a caller whose a_bar tile
//! (`a_bar_tile`) still holds (B)'s values (not where dh took its memory).
template <class Config, int RowsPerThread, int RowStep, bool XTile, class Sink, bool ABarTile = false>
__device__ __forceinline__ void chunk_row_gradients(const StagedChunk<Config>& staged, const float (&log_a_coeff)[4],
                                                    int row0, int valid, const float* h_prev_tile,
                                                    const float* dh_tile, const float* x_tile,
                                                    DaParamShares<Config>& da, Sink&& sink,
                                                    const float* a_bar_tile = nullptr) {
  constexpr int kWT = Config::kWidthTile;
  constexpr int kV = Config::kChannelVector;
  const int q = staged.q;
#pragma unroll
  for (int row_step = 0; row_step < RowsPerThread; ++row_step) {
    const int r = row0 + row_step * RowStep;
    if (r >= valid) break;
    const bool reset = staged.is_reset_row(r, row_step);
    const float4 h_prev = *reinterpret_cast<const float4*>(h_prev_tile + r * kWT + q);
    const float4 dh = *reinterpret_cast<const float4*>(dh_tile + r * kWT + q);
    const float h_prev_v[kV] = {h_prev.x, h_prev.y, h_prev.z, h_prev.w};
    const float dh_v[kV] = {dh.x, dh.y, dh.z, dh.w};
    float dx[kV], dgx[kV], dga[kV];
    float a_bar_v[kV];
    if constexpr (ABarTile) load_vector<float, 4>(a_bar_tile + r * kWT + q, a_bar_v);
    float x_fused[kV];
    GateActivations kept[kV];
    if constexpr (Config::kFused) {
      if constexpr (XTile) {
        load_vector<float, 4>(x_tile + r * kWT + q, x_fused);
      } else {
        staged.x4(r, x_fused);
      }
      staged.kept_activations4(r, kept);
    }
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      float x;
      GateActivations activations;
      if constexpr (Config::kFused) {
        x = x_fused[v];
        activations = kept[v];  // (B)'s, by this thread
      } else {
        x = staged.x(r, v);
        float gx, ga;
        staged.gate_logits(r, v, gx, ga);
        activations = gate_activations(gx, ga);
      }
      // The sqrt derivative without its branch where straight_line_gate_math says (the same bits).
      float a;
      if constexpr (ABarTile) {
        a = reset ? token_decay(activations, log_a_coeff[v]) : a_bar_v[v];
      } else {
        a = token_decay(activations, log_a_coeff[v]);
      }
      const TokenGateGrads g = token_gate_grads_given_a<straight_line_gate_math<Config>()>(
          x, activations, log_a_coeff[v], reset, h_prev_v[v], dh_v[v], a);
      dx[v] = g.dx;
      dgx[v] = g.dgx;
      dga[v] = g.dga;
      da.sum[row_step % Config::kDaParamGroups][v] += g.da_param_sum;
    }
    sink(row_step, r, dx, dgx, dga);
  }
}

//! (D) as chunk_row_gradients, every row stored at `first_row` (the chunk's first token's element offset into the
//! rows, [T, W] or, in the fused backward's time slices, the slice's rows from its first token, plus the tile's
//! first channel): gate-logits mode the gradients themselves, fused mode fp32 rows for the product kernels.
template <class Config, int RowsPerThread, int RowStep, bool ABarTile = false>
__device__ __forceinline__ void chunk_gradients(const StagedChunk<Config>& staged, const float (&log_a_coeff)[4],
                                                int row0, int valid, const float* h_prev_tile, const float* dh_tile,
                                                const float* x_tile, const ChunkGradientRows<Config>& out,
                                                std::int64_t first_row, std::int64_t width, DaParamShares<Config>& da,
                                                const float* a_bar_tile = nullptr) {
  constexpr int kV = Config::kChannelVector;
  const int q = staged.q;
  auto sink =
      [&](int, int r, const float (&dx)[kV], const float (&dgx)[kV], const float (&dga)[kV]) {
        const std::int64_t offset = first_row + r * width + q;
        if constexpr (Config::kFused) {
          store_vector<float, kV>(out.dx_direct_f32 + offset, dx);
          store_vector<float, kV>(out.dgx_f32 + offset, dgx);
          store_vector<float, kV>(out.dga_f32 + offset, dga);
        } else {
          store_vector<typename Config::Element, kV>(out.dx + offset, dx);
          store_vector<typename Config::Element, kV>(out.dgx + offset, dgx);
          store_vector<typename Config::Element, kV>(out.dga + offset, dga);
        }
      };
  chunk_row_gradients<Config, RowsPerThread, RowStep, true, decltype(sink)&, ABarTile>(
      staged, log_a_coeff, row0, valid, h_prev_tile, dh_tile, x_tile, da, sink, a_bar_tile);
}

//! The d a_param of the tile's channels from every thread's shares, in the order Config::kDaParamRowStep fixes:
//! group g = row0 + j · RowStep (share j of the threads with first row row0, channels q .. q + 3: ScanThread's)
//! of channel c lives at partials[g][c], and out[c] sums the groups g = 0, 1, ... in order. `partials` is
//! [kDaParamRowStep][WidthTile] floats of shared memory; the caller's barrier before this makes the tiles free,
//! this one's makes every thread's shares visible. With one group per thread this is the order the kernels always
//! used: the threads of channel c (c / 4, c / 4 + ThreadsPerRow, ...) in thread order.
template <class Config>
__device__ __forceinline__ void tile_da_param(const DaParamShares<Config>& da, int row0, int q, float* partials,
                                              float* out, int thread) {
  constexpr int kWT = Config::kWidthTile;
#pragma unroll
  for (int j = 0; j < Config::kDaParamGroups; ++j) {
    const int group = row0 + j * Config::kScanRowStep;
    *reinterpret_cast<float4*>(partials + group * kWT + q) =
        make_float4(da.sum[j][0], da.sum[j][1], da.sum[j][2], da.sum[j][3]);
  }
  __syncthreads();
  for (int c = thread; c < kWT; c += Config::kThreads) {
    float sum = 0.0f;
    for (int group = 0; group < Config::kDaParamRowStep; ++group) sum += partials[group * kWT + c];
    out[c] = sum;
  }
}

//! tile_da_param in two halves, for a kernel that stages a chunk's shares and sums them later (the sequential scan's
//! idle warps, kernels/backward_scan_kernel.cuh), with the same sums: the first half, this thread's shares into
//! `partials`, no barrier.
template <class Config>
__device__ __forceinline__ void stage_da_param_shares(const DaParamShares<Config>& da, int row0, int q,
                                                      float* partials) {
  constexpr int kWT = Config::kWidthTile;
#pragma unroll
  for (int j = 0; j < Config::kDaParamGroups; ++j) {
    const int group = row0 + j * Config::kScanRowStep;
    *reinterpret_cast<float4*>(partials + group * kWT + q) =
        make_float4(da.sum[j][0], da.sum[j][1], da.sum[j][2], da.sum[j][3]);
  }
}

//! The second half: out[c] = the groups' shares of channel c summed in order, for the channels c = first, first +
//! Stride, ... below WidthTile (after a barrier that made every thread's shares visible).
template <class Config, int Stride = Config::kThreads>
__device__ __forceinline__ void sum_da_param_shares(const float* partials, float* out, int first) {
  constexpr int kWT = Config::kWidthTile;
  auto sum_channel = [&](int c) {
    float sum = 0.0f;
    for (int group = 0; group < Config::kDaParamRowStep; ++group) sum += partials[group * kWT + c];
    out[c] = sum;
  };
  if constexpr (Stride >= kWT) {
    if (first < kWT) sum_channel(first);  // one channel a thread at most: no loop
  } else {
    for (int c = first; c < kWT; c += Stride) sum_channel(c);
  }
}

}  // namespace backward_detail

#endif  // __CUDACC__

}  // namespace rglru
}  // namespace hawk
