// What does one hop of the chunked forward's exact chain cost on this GPU, with nothing else running? A hop is what
// the critical path of one long sequence pays per time chunk: acquire the predecessor chunk's carry (hawk's
// acquire_carry: relaxed spins), run the chunk's serial fused multiply-adds, publish the new carry (hawk's
// publish_carry: a relaxed store, as the forward without a decay output publishes). L = 65536 in chunks of 128 is
// 512 hops in series, so the hop decides how large a chunk issue 16's next kernel needs (the target there is 640 µs
// for the whole forward).
//
// Each CTA of one warp takes a ticket (hawk's take_chunk_ticket), which names a (chain, hop) in hop-major order as
// the chunked forward's dense tickets do, and runs that hop for 32 channels. Timed per launch with CUDA events
// (median of 21 after 3 warm-ups), the carry words cleared before each launch as hawk clears them; reported as
// µs per hop for several chain counts, hop counts and FMA counts per hop. Not a test of hawk's kernels.
//
//   build-gpu/bench/probes/chain_hop_probe [OUT.json]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hawk/rglru/block/chained_carry.cuh"
#include "probe_support.cuh"

namespace {

struct Chain {
  unsigned long long* counter;  // the ticket counter
  unsigned long long* words;    // [hops][chains * 32] carry words
  float* out;                   // [chains * 32] the last hop's carries (keeps the work alive)
  int chains;
  int hops;
  int steps;  // dependent fused multiply-adds per hop and channel
};

__global__ void __launch_bounds__(32) chain_kernel(Chain c) {
  __shared__ unsigned long long ticket_slot;
  const unsigned long long ticket = hawk::rglru::take_chunk_ticket(c.counter, &ticket_slot);
  if (ticket >= static_cast<unsigned long long>(c.chains) * c.hops) return;
  const int hop = static_cast<int>(ticket / c.chains);
  const int chain = static_cast<int>(ticket % c.chains);
  const int channel = chain * 32 + static_cast<int>(threadIdx.x);
  const int width = c.chains * 32;
  float h = 0.0f;
  if (hop > 0) h = hawk::rglru::acquire_carry(c.words + static_cast<std::size_t>(hop - 1) * width + channel, false);
  // a and u differ per channel and step so that nothing folds; the chain of FMAs is serial as in scan_chunk.
  const float a = 0.999f - 1e-4f * static_cast<float>(threadIdx.x);
  float u = 1e-3f * static_cast<float>(chain + 1);
  for (int s = 0; s < c.steps; ++s) {
    h = fmaf(a, h, u);
    u += 1e-7f;
  }
  hawk::rglru::publish_carry(c.words + static_cast<std::size_t>(hop) * width + channel, h, false);
  if (hop == c.hops - 1) c.out[channel] = h;
}

struct Row {
  int chains, hops, steps;
  double kernel_us, per_hop_us;
};

Row time_chain(int chains, int hops, int steps) {
  const std::size_t words = static_cast<std::size_t>(hops) * chains * 32;
  unsigned long long *counter = nullptr, *carry = nullptr;
  float* out = nullptr;
  PROBE_CUDA(cudaMalloc(&counter, sizeof(unsigned long long)));
  PROBE_CUDA(cudaMalloc(&carry, words * sizeof(unsigned long long)));
  PROBE_CUDA(cudaMalloc(&out, static_cast<std::size_t>(chains) * 32 * sizeof(float)));
  const Chain c{counter, carry, out, chains, hops, steps};
  cudaEvent_t start, stop;
  PROBE_CUDA(cudaEventCreate(&start));
  PROBE_CUDA(cudaEventCreate(&stop));
  std::vector<float> samples;
  for (int rep = 0; rep < 24; ++rep) {
    PROBE_CUDA(cudaMemsetAsync(counter, 0, sizeof(unsigned long long)));
    PROBE_CUDA(cudaMemsetAsync(carry, 0, words * sizeof(unsigned long long)));
    PROBE_CUDA(cudaEventRecord(start));
    chain_kernel<<<static_cast<unsigned>(chains) * hops, 32>>>(c);
    PROBE_CUDA(cudaEventRecord(stop));
    PROBE_CUDA(cudaEventSynchronize(stop));
    PROBE_CUDA(cudaGetLastError());
    float ms = 0.0f;
    PROBE_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (rep >= 3) samples.push_back(ms);
  }
  std::sort(samples.begin(), samples.end());
  const double median_us = 1000.0 * samples[samples.size() / 2];
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(counter);
  cudaFree(carry);
  cudaFree(out);
  return {chains, hops, steps, median_us, median_us / hops};
}

}  // namespace

int main(int argc, char** argv) {
  cudaDeviceProp properties{};
  PROBE_CUDA(cudaGetDeviceProperties(&properties, 0));
  std::vector<Row> rows;
  // 80 chains of 32 channels: one RecurrentGemma-2B sequence (W = 2560) in width tiles of 32.
  for (int chains : {1, 80})
    for (int hops : {64, 512})
      for (int steps : {0, 128, 256}) rows.push_back(time_chain(chains, hops, steps));
  std::printf("chain hops on %s (one warp per hop; hawk's ticket, acquire_carry and publish_carry)\n", properties.name);
  std::printf("chains  hops  FMAs/hop  kernel_us  us_per_hop\n");
  for (const Row& r : rows)
    std::printf("%6d %5d %9d %10.1f %11.3f\n", r.chains, r.hops, r.steps, r.kernel_us, r.per_hop_us);
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    if (f == nullptr) return 2;
    const char* commit = std::getenv("HAWK_COMMIT");
    std::fprintf(f, "{\n  \"probe\": \"chain_hop\",\n  \"gpu\": \"%s\",\n  \"commit\": \"%s\",\n  \"rows\": [\n",
                 properties.name, commit ? commit : "unknown");
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f, "    {\"chains\": %d, \"hops\": %d, \"fma_per_hop\": %d, \"kernel_us\": %.3f, \"us_per_hop\": %.4f}%s\n",
                   rows[i].chains, rows[i].hops, rows[i].steps, rows[i].kernel_us, rows[i].per_hop_us,
                   i + 1 < rows.size() ? "," : "");
    std::fprintf(f, "  ]\n}\n");
    std::fclose(f);
  }
  return 0;
}
