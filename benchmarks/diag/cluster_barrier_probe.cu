// What one step's exchange costs on a cluster of blocks (sm_90), the way lasyf_lower_cluster_kernel
// exchanges its argmax candidates: each warp pushes a (value, index) pair to every block of the
// cluster, the blocks wait for all of them, each warp reduces the set. Session 23's ncu put a
// third of that panel's stall samples on its cluster barriers: cooperative_groups' cluster.sync()
// is barrier.cluster.arrive.release + wait.acquire, whose release compiles to MEMBAR.ALL.GPU
// (+ ERRBAR, CGAERRBAR), a GPU-scope fence twice a step. The variants, each timed over many steps:
//   sync      cluster.sync() after ordinary DSMEM stores (what the kernel does)
//   relaxed   barrier.cluster.arrive.relaxed + wait: no fence (not a correct exchange: the cost
//             of the barrier alone)
//   stasync   st.async pushes that complete transactions on the receiving block's mbarrier,
//             each block waiting on its own mbarrier (no cluster barrier, no fence: SASS STAS +
//             SYNCS.PHASECHK; a correct exchange of shared::cluster data), by the panel's own
//             helpers (kernel_util.cuh: push_async, arrive_expect_bytes, wait_phase; session 25
//             call 1 timed it with the wait at cluster scope, since block scope as the panel's)
// each also with a global store per thread before the exchange (--store), as the panel's steps
// write the trailing matrix: what the fence then waits for. Checks every reduction (a wrong
// exchange counts as an error).
//
//   nvcc -std=c++17 -arch=sm_90 -O3 -o /tmp/cluster_barrier_probe benchmarks/diag/cluster_barrier_probe.cu
//   /tmp/cluster_barrier_probe [ranks=8] [threads=256] [steps=20000]
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "../../ffi/kernel_util.cuh"  // the panel's own warp reduction and st.async exchange

namespace cg = cooperative_groups;

enum Variant { kSync, kRelaxed, kStAsync };

__device__ inline unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

template <Variant V, bool kStore>
__global__ void exchange_kernel(int steps, float* sink, int* errors) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // the st.async helpers: sm_90 alone
  const cg::cluster_group cluster = cg::this_cluster();
  const int ranks = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int cands = ranks * warps;
  extern __shared__ __align__(16) unsigned char shared[];
  // Two sets (by the step's parity) of `cands` (value bits, index) pairs, then two mbarriers.
  uint2* sets = reinterpret_cast<uint2*>(shared);
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(sets + 2 * cands);
  if (V == kStAsync && threadIdx.x == 0) {
    for (int b = 0; b < 2; ++b) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bars + b)));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster.sync();  // every block's mbarriers initialised before any push
  int bad = 0;
  for (int s = 0; s < steps; ++s) {
    const int b = s & 1;
    uint2* set = sets + b * cands;
    // This warp's candidate, its index the warp's global one: the values a rotation of
    // 0 .. cands - 1, so that the step's winner is known (value cands - 1, index below).
    const int me = rank * warps + warp;
    const float value = static_cast<float>((me + s) % cands);
    if (kStore) sink[(static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x)] = value;
    if (V == kStAsync) {
      // This block's set of the step: cands pairs of 8 bytes to arrive.
      if (threadIdx.x == 0) jcm::kernel::arrive_expect_bytes(bars + b, cands * 8);
      if (lane < ranks) {
        jcm::kernel::push_async(set + me, bars + b, lane,
                                make_uint2(__float_as_uint(value), static_cast<unsigned>(me)));
      }
      jcm::kernel::wait_phase(bars + b, (s >> 1) & 1);
    } else {
      if (lane < ranks) {
        uint2* remote = cluster.map_shared_rank(set + me, lane);
        *remote = make_uint2(__float_as_uint(value), static_cast<unsigned>(me));
      }
      if (V == kSync) {
        cluster.sync();
      } else {
        asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;" ::
                         : "memory");
      }
    }
    // Each warp reduces the set as the panel does (the largest value, ties to the smallest
    // index), and checks the winner.
    float best = -1.0f;
    int best_i = INT_MAX;
    for (int e = lane; e < cands; e += 32) {
      const float v = __uint_as_float(set[e].x);
      const int i = static_cast<int>(set[e].y);
      if (v > best || (v == best && i < best_i)) best = v, best_i = i;
    }
    jcm::kernel::warp_argmax_all(best, best_i);
    const int want_i = ((cands - 1 - s) % cands + cands) % cands;
    if (lane == 0) bad += best != static_cast<float>(cands - 1) || best_i != want_i;
    // Every warp has read this step's set before any block's next pushes to the other set can
    // let a block run on to the step after, which writes this one again.
    __syncthreads();
  }
  if (lane == 0 && bad) atomicAdd(errors, bad);
  cluster.sync();  // no block leaves while another may still push to it
#endif
}

// ns a step of the variant's timed launch; *wrong: its reductions that found another winner.
template <Variant V, bool kStore>
float time_variant(int ranks, int threads, int steps, float* sink, int* errors, int* wrong) {
  const int cands = ranks * threads / 32;
  const size_t smem = 2 * cands * sizeof(uint2) + 2 * sizeof(unsigned long long);
  cudaLaunchConfig_t config = {};
  cudaLaunchAttribute attribute;
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(ranks);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.gridDim = dim3(static_cast<unsigned>(ranks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = smem;
  config.attrs = &attribute;
  config.numAttrs = 1;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaMemset(errors, 0, sizeof(int));
  // A short launch first (one-time costs), then the timed one.
  cudaLaunchKernelEx(&config, exchange_kernel<V, kStore>, 100, sink, errors);
  cudaEventRecord(start);
  cudaLaunchKernelEx(&config, exchange_kernel<V, kStore>, steps, sink, errors);
  cudaEventRecord(stop);
  cudaError_t err = cudaEventSynchronize(stop);
  if (err != cudaSuccess) {
    std::fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(err));
    std::exit(1);
  }
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaMemcpy(wrong, errors, sizeof(int), cudaMemcpyDeviceToHost);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms * 1e6f / steps;  // ns a step
}

int main(int argc, char** argv) {
  const int ranks = argc > 1 ? std::atoi(argv[1]) : 8;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 256;
  const int steps = argc > 3 ? std::atoi(argv[3]) : 20000;
  float* sink = nullptr;
  int* errors = nullptr;
  cudaMalloc(&sink, sizeof(float) * ranks * threads);
  cudaMalloc(&errors, sizeof(int));
  struct Row {
    const char* name;
    float ns;
    int wrong;
  } rows[6] = {{"sync"}, {"sync --store"}, {"relaxed"}, {"relaxed --store"}, {"stasync"},
               {"stasync --store"}};
  rows[0].ns = time_variant<kSync, false>(ranks, threads, steps, sink, errors, &rows[0].wrong);
  rows[1].ns = time_variant<kSync, true>(ranks, threads, steps, sink, errors, &rows[1].wrong);
  rows[2].ns = time_variant<kRelaxed, false>(ranks, threads, steps, sink, errors, &rows[2].wrong);
  rows[3].ns = time_variant<kRelaxed, true>(ranks, threads, steps, sink, errors, &rows[3].wrong);
  rows[4].ns = time_variant<kStAsync, false>(ranks, threads, steps, sink, errors, &rows[4].wrong);
  rows[5].ns = time_variant<kStAsync, true>(ranks, threads, steps, sink, errors, &rows[5].wrong);
  std::printf("cluster of %d blocks x %d threads, %d steps (+100 untimed)\n", ranks, threads,
              steps);
  std::printf("  %-16s %10s %8s\n", "variant", "ns a step", "wrong");
  for (const Row& row : rows) std::printf("  %-16s %10.1f %8d\n", row.name, row.ns, row.wrong);
  std::printf("(relaxed orders nothing: wrong reductions there are possible, elsewhere a bug)\n");
  return 0;
}
