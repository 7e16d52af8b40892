// Device helpers shared by the batched kernels (ldl, lu, qr, cholesky and eigh _kernels.cu): the
// device type of each solver dtype, warp shuffles for every dtype, block reductions, launch
// shapes and the block shape.
#pragma once

#include <cuComplex.h>
#include <cuda/std/complex>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/limits.h"

namespace jcm {
namespace kernel {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// The most threads a kernel whose block size is a launch parameter takes (the LDL^T factor
// kernels): the hardware's limit.
constexpr int kMaxThreads = 1024;

// cuComplex / cuDoubleComplex share their layout with cuda::std::complex, which has the
// arithmetic operators the kernels are written with.
template <typename T>
struct device_type {
  using type = T;
};
template <>
struct device_type<cuComplex> {
  using type = cuda::std::complex<float>;
};
template <>
struct device_type<cuDoubleComplex> {
  using type = cuda::std::complex<double>;
};

template <typename T>
struct real_of {
  using type = T;
};
template <typename R>
struct real_of<cuda::std::complex<R>> {
  using type = R;
};

template <typename T>
inline constexpr bool is_complex_v = false;
template <typename R>
inline constexpr bool is_complex_v<cuda::std::complex<R>> = true;

// The warp shuffles of a float or double, and of a complex number part by part (`shuffled`
// is the one place that knows the types).
template <typename V, typename Shuffle>
__device__ inline V shuffled(V v, Shuffle shuffle) {
  if constexpr (is_complex_v<V>) {
    return {shuffle(v.real()), shuffle(v.imag())};
  } else {
    return shuffle(v);
  }
}
template <typename V>
__device__ inline V shfl_down(V v, int offset) {
  return shuffled(v, [=](auto x) { return __shfl_down_sync(0xffffffffu, x, offset); });
}
template <typename V>
__device__ inline V shfl_idx(V v, int lane) {
  return shuffled(v, [=](auto x) { return __shfl_sync(0xffffffffu, x, lane); });
}
template <typename V>
__device__ inline V shfl_xor(V v, int mask) {
  return shuffled(v, [=](auto x) { return __shfl_xor_sync(0xffffffffu, x, mask); });
}

// The sum over a warp, on lane 0 (every lane must call).
template <typename V>
__device__ inline V warp_sum(V v) {
  for (int offset = 16; offset > 0; offset /= 2) v += shfl_down(v, offset);
  return v;
}

// The warp's sum on every lane, bitwise the same on all (a butterfly: each lane adds the same
// pairs, commuted).
template <typename V>
__device__ inline V warp_allsum(V v) {
  for (int mask = 16; mask > 0; mask /= 2) v += shfl_xor(v, mask);
  return v;
}

// The block's dynamic shared memory, aligned for every dtype.
__device__ inline unsigned char* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char jcm_dynamic_shared[];
  return jcm_dynamic_shared;
}

// Copies a rows x cols column-major matrix between leading dimensions, one warp per column (so
// global memory is read and written coalesced); the whole block (any size) calls, and it ends
// with a barrier.
template <typename T>
__device__ void copy_matrix(T* dst, int ld_dst, const T* src, int ld_src, int rows, int cols) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  for (int j = warp; j < cols; j += warps) {
    for (int i = lane; i < rows; i += 32) {
      dst[i + static_cast<int64_t>(j) * ld_dst] = src[i + static_cast<int64_t>(j) * ld_src];
    }
  }
  __syncthreads();
}

// The most static shared memory (__shared__ arrays: reductions, pivot lists) any kernel here
// declares (ptxas -v: 784 B at most); launches budget for it next to their dynamic
// shared memory.
constexpr size_t kStaticShared = 1024;

// Where a kernel keeps its matrix: in shared memory when it fits next to the kernel's own
// scratch (the kernels are latency-bound: one step per column, each a few dependent passes over
// the matrix, which shared memory answers several times faster than L2), else in place in
// global memory. In shared memory the leading dimension is odd, so that a warp walking a row
// hits distinct banks.
struct MatrixPlace {
  int ld_shared = 0;     // 0: in global memory
  size_t smem_bytes = 0;  // dynamic shared memory of the launch, scratch included
};

// The most shared memory a block of the current device may opt in to, or 0 where the query
// fails (which only means: stay in global memory; no error is left for the next check).
inline size_t shared_optin_bytes() {
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<size_t>(optin);
}

inline MatrixPlace place_matrix(int64_t rows, int64_t cols, size_t elem_bytes,
                                size_t scratch_bytes) {
  MatrixPlace place{0, scratch_bytes};
  const size_t optin = shared_optin_bytes();
  const int64_t ld = rows | 1;
  const size_t tile = static_cast<size_t>(ld) * static_cast<size_t>(cols) * elem_bytes;
  if (cols > 0 && scratch_bytes + tile + kStaticShared <= optin) {
    place.ld_shared = static_cast<int>(ld);
    place.smem_bytes = scratch_bytes + tile;
  }
  return place;
}

// The launch shape of the one-block-per-matrix kernels of n <= 64 in shared memory
// (getrf_small, potrf_small): thread (row, c) of the block works on row tid % n in columns
// c, c + cols_per_pass, ... A few matrices (up to two per SM): up to kThreads per matrix, for
// latency. More: by default the fewest warps that hold a thread per row, for throughput (getrf:
// every warp repeats the pivot search, and other blocks fill the SM anyway); with fill_smem (the
// launch's dynamic shared memory) as many threads as fill the SM next to the blocks its shared
// memory holds (potrf: no warp repeats another's work). H100 float32 getrf_small, JAX / kThreads
// per matrix: 256x32 0.057 / 0.044 ms, but 1024x32 0.057 / 0.087; a thread per row 0.053.
// potrf_small vs JAX: float64 1024 x 64 a thread per row (7
// blocks of 64 threads per SM) 0.57x, filled (320 threads) 0.75x; float32 0.81x / 1.13x; up to
// 1024 threads for a few matrices lost (float32 1 x 64 0.75x vs 0.86x, float64 256 x 32 0.95x
// vs 1.71x).
struct SmallLaunch {
  int threads = 0;
  int cols_per_pass = 0;
};

inline SmallLaunch small_launch(int64_t count, int n, size_t fill_smem = 0) {
  int device = 0, sms = 0, smem_per_sm = 0, threads_per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();  // unknown: the latency shape
    sms = 0;
  }
  const int rows = (n + 31) / 32 * 32;
  int per_matrix = kThreads;
  if (sms > 0 && count > 2 * static_cast<int64_t>(sms)) {
    per_matrix = rows;
    if (fill_smem > 0) {
      if (cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor,
                                 device) != cudaSuccess ||
          cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor,
                                 device) != cudaSuccess) {
        cudaGetLastError();  // unknown: a thread per row
      } else {
        const int blocks = std::max<int>(
            1, std::min<int>(32, static_cast<int>(smem_per_sm / (fill_smem + kStaticShared))));
        per_matrix = std::max(rows, threads_per_sm / blocks / 32 * 32);
      }
    }
  }
  SmallLaunch launch;
  launch.cols_per_pass = std::min(n, std::max(1, per_matrix / std::max(n, 1)));
  launch.threads = std::min(kMaxThreads, (n * launch.cols_per_pass + 31) / 32 * 32);
  return launch;
}

// The tiny kernels (n <= 4: LU, Cholesky, QR, eigh and SVD's _kernels.cu): one thread per
// matrix, the matrix in registers, kTinyThreads matrices a block. A block's matrices are
// contiguous in global memory and go through shared memory both ways, so that a warp's global
// accesses are coalesced: a thread reading its own n * n entries would make a warp touch n * n
// times as many sectors, each for a few bytes.
constexpr int kTinyThreads = 128;

// The stride of a thread's item in the stage: odd, so that the threads of a warp, each at the
// same entry of its own item, hit distinct banks.
__host__ __device__ constexpr int tiny_stride(int size) { return size | 1; }

// The shared memory a block stages items of up to `size` entries in.
inline size_t tiny_stage_bytes(int size, size_t elem_bytes) {
  return static_cast<size_t>(kTinyThreads) * tiny_stride(size) * elem_bytes;
}

// A tiny solve's stage: the factor (n x n) and then the right-hand sides (n x nrhs) take it.
inline size_t tiny_solve_stage_bytes(int64_t n, int64_t nrhs, size_t elem_bytes) {
  return tiny_stage_bytes(static_cast<int>(n * std::max(n, nrhs)), elem_bytes);
}

// The blocks of a tiny launch over `count` items.
inline unsigned tiny_blocks(int64_t count) {
  return static_cast<unsigned>((count + kTinyThreads - 1) / kTinyThreads);
}

// f(std::integral_constant<int, N>{}) for N = n, n in [1, kTinyMaxN]: a tiny kernel's launch
// for the order given at run time.
constexpr int kTinyMaxN = 4;
template <typename F>
cudaError_t with_tiny_n(int64_t n, F f) {
  switch (n) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    default: return cudaErrorInvalidValue;
  }
}
static_assert(limits::kLuTinyMaxN <= kTinyMaxN && limits::kCholeskyTinyMaxN <= kTinyMaxN &&
              limits::kSyevjTinyMaxN <= kTinyMaxN && limits::kGesvdjTinyMaxN <= kTinyMaxN &&
              limits::kGeevTinyMaxN <= kTinyMaxN);

// The items of this block: [first, first + items) of `count`.
struct TinyBlock {
  int64_t first;
  int items;
};
__device__ inline TinyBlock tiny_block(int64_t count) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kTinyThreads;
  const int64_t left = count - first;
  return {first, static_cast<int>(left < kTinyThreads ? left : kTinyThreads)};
}

// The block's items of `size` entries from src (one after the other) into the stage (item t at
// t * tiny_stride(size)), read coalesced; ends with a barrier. Every thread of the block calls.
// Each thread has kTinyLoadsInFlight loads issued before it stores the first to the stage: a
// load, then its store, then the next load would wait out the memory's latency once per entry.
constexpr int kTinyLoadsInFlight = 8;
template <typename T>
__device__ void tiny_load(T* stage, const T* src, TinyBlock block, int size) {
  const T* from = src + block.first * size;
  const int stride = tiny_stride(size);
  const int total = block.items * size;
  for (int base = threadIdx.x; base < total; base += kTinyLoadsInFlight * kTinyThreads) {
    T loaded[kTinyLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kTinyLoadsInFlight; ++u) {
      const int e = base + u * kTinyThreads;
      if (e < total) loaded[u] = from[e];
    }
#pragma unroll
    for (int u = 0; u < kTinyLoadsInFlight; ++u) {
      const int e = base + u * kTinyThreads;
      if (e < total) stage[(e / size) * stride + e % size] = loaded[u];
    }
  }
  __syncthreads();
}

// A thread of a tiny kernel: its block's stage (its items loaded), its own item in the stage, and
// whether it has one (the last block may hold fewer than kTinyThreads).
template <typename T>
struct TinyThread {
  TinyBlock block;
  T* stage;
  T* mine;
  bool active;
  __device__ int64_t item() const { return block.first + threadIdx.x; }
};

// A tiny kernel's start: the block's items of `size` entries from src into the stage (tiny_load;
// every thread of the block calls).
template <typename T>
__device__ TinyThread<T> tiny_begin(int64_t count, const T* src, int size) {
  TinyThread<T> t;
  t.block = tiny_block(count);
  t.stage = reinterpret_cast<T*>(dynamic_shared());
  tiny_load(t.stage, src, t.block, size);
  t.active = static_cast<int>(threadIdx.x) < t.block.items;
  t.mine = t.stage + threadIdx.x * tiny_stride(size);
  return t;
}

// The thread's item from the stage into registers, a[i][j] = A(i, j) (column-major N x N);
// `fill` in every entry where the thread has no item.
template <typename T, int N>
__device__ inline void tiny_get(const TinyThread<T>& me, T (&a)[N][N], T fill) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = 0; i < N; ++i) a[i][j] = me.active ? me.mine[i + j * N] : fill;
  }
}

// The reverse: registers into the thread's item in the stage (nothing without an item).
template <typename T, int N>
__device__ inline void tiny_put(const TinyThread<T>& me, const T (&a)[N][N]) {
  if (!me.active) return;
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = 0; i < N; ++i) me.mine[i + j * N] = a[i][j];
  }
}

// The reverse of tiny_load: the stage's items to dst, written coalesced, after a barrier (every
// thread has put its item in the stage). Every thread of the block calls.
template <typename T>
__device__ void tiny_store(T* dst, const T* stage, TinyBlock block, int size) {
  __syncthreads();
  T* to = dst + block.first * size;
  const int stride = tiny_stride(size);
  for (int e = threadIdx.x; e < block.items * size; e += blockDim.x) {
    to[e] = stage[(e / size) * stride + e % size];
  }
}

// Triangular solves of one right-hand side by one warp (n <= 64), lane l holding rows l and
// l + 32 in y: step k is one shuffle (the solved entry to every lane) and one update per lane,
// no barrier. entry(i, k) is the triangle's element (i >= k for the lower solve, i <= k for the
// upper one); a unit triangle's diagonal is never read. Every lane of the warp calls.
template <typename T, typename Entry>
__device__ void warp_solve_lower(int n, T (&y)[2], Entry entry, bool unit) {
  const int lane = threadIdx.x % 32;
  for (int k = 0; k < n; ++k) {
    T yk = shfl_idx(k < 32 ? y[0] : y[1], k % 32);
    if (!unit) yk = yk / entry(k, k);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = lane + 32 * h;
      if (i > k && i < n) y[h] -= entry(i, k) * yk;
      if (i == k) y[h] = yk;
    }
  }
}

template <typename T, typename Entry>
__device__ void warp_solve_upper(int n, T (&y)[2], Entry entry, bool unit) {
  const int lane = threadIdx.x % 32;
  for (int k = n - 1; k >= 0; --k) {
    T xk = shfl_idx(k < 32 ? y[0] : y[1], k % 32);
    if (!unit) xk = xk / entry(k, k);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = lane + 32 * h;
      if (i < k) y[h] -= entry(i, k) * xk;
      if (i == k) y[h] = xk;
    }
  }
}

// One block's system of a small batched solve (a block per matrix): its n x n factor copied
// to the dynamic shared memory, its right-hand sides b and solutions x (n x nrhs, column-major).
// Every thread of the block calls; the factor is visible to all of them on return.
template <typename T>
struct BlockSystem {
  const T* factor;
  const T* b;
  T* x;
};

template <typename T>
__device__ BlockSystem<T> load_block_system(int n, int nrhs, const T* factor_all, const T* b_all,
                                            T* x_all) {
  const int64_t item = blockIdx.x, rhs_size = static_cast<int64_t>(n) * nrhs;
  const T* global = factor_all + item * n * n;
  T* factor = reinterpret_cast<T*>(dynamic_shared());
  for (int e = threadIdx.x; e < n * n; e += blockDim.x) factor[e] = global[e];
  __syncthreads();
  return {factor, b_all + item * rhs_size, x_all + item * rhs_size};
}

// A warp's column of n <= 64 in the layout warp_solve_* take (lane l: rows l and l + 32, zero
// past n); row(i) is the index in `column` of the column's i-th entry.
template <typename T, typename Row>
__device__ void warp_load_column(int n, const T* column, Row row, T (&y)[2]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) y[h] = lane + 32 * h < n ? column[row(lane + 32 * h)] : T(0);
}

template <typename T, typename Row>
__device__ void warp_store_column(int n, T* column, Row row, const T (&y)[2]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (lane + 32 * h < n) column[row(lane + 32 * h)] = y[h];
  }
}

// Each warp of the block solves right-hand sides j = warp, warp + warps, ... of a block system:
// its column of b into the layout warp_solve_* take, solve(y), the column to x. A warp reads its
// column in full before it writes it, so x may alias b.
template <typename T, typename Solve>
__device__ void warp_solve_columns(int n, int nrhs, const BlockSystem<T>& sys, Solve solve) {
  auto row = [](int i) { return i; };
  for (int j = threadIdx.x / 32; j < nrhs; j += blockDim.x / 32) {
    const int64_t column = static_cast<int64_t>(j) * n;
    T y[2];
    warp_load_column(n, sys.b + column, row, y);
    solve(y);
    warp_store_column(n, sys.x + column, row, y);
  }
}

// A block size a kernel whose block size is a launch parameter takes.
inline bool valid_threads(int threads) {
  return threads >= 32 && threads <= kMaxThreads && threads % 32 == 0;
}

// Launches above 48 KiB of shared memory, the kernel's static arrays and `bytes` of dynamic
// together, must opt in, per kernel (H100: getrs_small at complex128 32 x 64, 48 KiB
// dynamic + 256 B static, failed with cudaErrorInvalidValue when only the dynamic part counted).
// Opting in where it was not needed is harmless; no query of the kernel on every launch.
template <typename Kernel>
cudaError_t allow_shared(Kernel kernel, size_t bytes) {
  if (bytes + kStaticShared <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(bytes));
}

__device__ inline float conj_of(float x) { return x; }
__device__ inline double conj_of(double x) { return x; }
template <typename R>
__device__ inline cuda::std::complex<R> conj_of(cuda::std::complex<R> x) {
  return cuda::std::conj(x);
}

// Entry (i, j), i >= j, of the Hermitian matrix whose `lower` (else upper) triangle the
// column-major N x N item holds: the other triangle is never read.
template <int N, typename T>
__device__ inline T hermitian_lower_entry(const T* item, bool lower, int i, int j) {
  return lower ? item[i + j * N] : conj_of(item[j + i * N]);
}

// |x|^2, re(x), im(x) for real and complex x.
__device__ inline float abs2(float x) { return x * x; }
__device__ inline double abs2(double x) { return x * x; }
template <typename R>
__device__ inline R abs2(cuda::std::complex<R> x) {
  return x.real() * x.real() + x.imag() * x.imag();
}
__device__ inline float real_part(float x) { return x; }
__device__ inline double real_part(double x) { return x; }
template <typename R>
__device__ inline R real_part(cuda::std::complex<R> x) {
  return x.real();
}
__device__ inline float imag_part(float) { return 0.0f; }
__device__ inline double imag_part(double) { return 0.0; }
template <typename R>
__device__ inline R imag_part(cuda::std::complex<R> x) {
  return x.imag();
}

// LAPACK's pivot magnitude: |x| for real, |re| + |im| (CABS1) for complex.
__device__ inline float abs1(float x) { return fabsf(x); }
__device__ inline double abs1(double x) { return fabs(x); }
template <typename R>
__device__ inline R abs1(cuda::std::complex<R> x) {
  return abs(x.real()) + abs(x.imag());
}

// The warp's largest (value, index) pair on lane 0, ties to the smallest index (every lane calls).
template <typename R>
__device__ inline void warp_argmax(R& best, int& best_i) {
  for (int offset = 16; offset > 0; offset /= 2) {
    R v = __shfl_down_sync(0xffffffffu, best, offset);
    int i = __shfl_down_sync(0xffffffffu, best_i, offset);
    if (v > best || (v == best && i < best_i)) best = v, best_i = i;
  }
}

// warp_argmax's result (the largest best >= 0, ties to the smallest best_i; best = -1: none) on
// every lane. From sm_80 by the warp's integer max / min reductions, one instruction each, on the
// magnitudes' bits (their order for non-negative values; none below 0.0): three or four
// instructions where the shuffles take ten dependent rounds.
template <typename R>
__device__ inline void warp_argmax_shuffled(R& best, int& best_i) {
  warp_argmax(best, best_i);
  best = __shfl_sync(0xffffffffu, best, 0);
  best_i = __shfl_sync(0xffffffffu, best_i, 0);
}

__device__ inline void warp_argmax_all(float& best, int& best_i) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned key = best < 0.0f ? 0u : __float_as_uint(best) + 1u;
  const unsigned top = __reduce_max_sync(0xffffffffu, key);
  best_i = static_cast<int>(
      __reduce_min_sync(0xffffffffu, key == top ? static_cast<unsigned>(best_i) : UINT_MAX));
  best = top == 0u ? -1.0f : __uint_as_float(top - 1u);
#else
  warp_argmax_shuffled(best, best_i);
#endif
}

__device__ inline void warp_argmax_all(double& best, int& best_i) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned long long key =
      best < 0.0 ? 0ull : static_cast<unsigned long long>(__double_as_longlong(best)) + 1ull;
  const unsigned hi = static_cast<unsigned>(key >> 32), lo = static_cast<unsigned>(key);
  const unsigned top_hi = __reduce_max_sync(0xffffffffu, hi);
  const unsigned top_lo = __reduce_max_sync(0xffffffffu, hi == top_hi ? lo : 0u);
  const bool top = hi == top_hi && lo == top_lo;
  best_i = static_cast<int>(
      __reduce_min_sync(0xffffffffu, top ? static_cast<unsigned>(best_i) : UINT_MAX));
  const unsigned long long top_key = (static_cast<unsigned long long>(top_hi) << 32) | top_lo;
  best = top_key == 0ull ? -1.0 : __longlong_as_double(static_cast<long long>(top_key - 1ull));
#else
  warp_argmax_shuffled(best, best_i);
#endif
}

// The largest (value, index) over the block of each thread's (best, best_i), on every thread: the
// first index on ties, NaN never wins (a thread passes best = -1 for none), an empty block gives
// value 0 and index `none`. One barrier; red_v / red_i (blockDim.x / 32 slots each) must not be
// read by an earlier call's warps still (the caller's barriers see to it).
template <typename R>
__device__ inline void block_argmax_of(R best, int best_i, R* red_v, int* red_i, int none,
                                       R* value, int* index) {
  warp_argmax_all(best, best_i);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red_v[warp] = best, red_i[warp] = best_i;
  __syncthreads();
  const bool slot = lane < static_cast<int>(blockDim.x / 32);
  best = slot ? red_v[lane] : R(-1);
  best_i = slot ? red_i[lane] : INT_MAX;
  warp_argmax_all(best, best_i);
  *value = best < R(0) ? R(0) : best;
  *index = best < R(0) ? none : best_i;
}

// f(i) for every i in [0, count), by a grid-stride loop over the whole grid.
template <typename F>
__device__ inline void grid_stride(int64_t count, F f) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    f(i);
  }
}

// Blocks of `threads` for a grid-stride loop over `count` items: one per `threads` items, at
// least one, at most `most`.
inline unsigned grid_stride_blocks(int64_t count, int threads, int64_t most) {
  return static_cast<unsigned>(std::clamp<int64_t>((count + threads - 1) / threads, 1, most));
}

// One slot per warp for block_reduce, shared by all its callers of one type (a static array in
// block_reduce itself would be one per `op`).
template <typename R>
__device__ inline R* block_reduce_slots() {
  __shared__ R slots[kMaxThreads / 32];
  return slots;
}

// `op` (associative) over one float or double per thread of the block (any multiple of 32
// threads up to kMaxThreads), on every thread. Starts and ends with a barrier, so consecutive
// calls share the slots.
template <typename R, typename Op>
__device__ R block_reduce(R v, Op op) {
  R* warp_part = block_reduce_slots<R>();
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // the previous call's readers are done with the shared slots
  if (threadIdx.x % 32 == 0) warp_part[threadIdx.x / 32] = v;
  __syncthreads();
  v = warp_part[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) v = op(v, warp_part[w]);
  __syncthreads();
  return v;
}

// The largest magnitude(i) over i in [begin, end) and its first index, on every thread of the
// block (LAPACK's i?amax: ties go to the smallest index; NaN never wins; a negative magnitude
// marks an index to pass over). An empty range (or all NaN) gives value 0 and index `begin`.
// Any block size up to kMaxThreads. Starts and ends with a barrier, unless kFenced is false: then
// the caller sees to it that a barrier comes between this call site's consecutive calls, and
// between the reads of magnitude() and any later write to what it reads (its one barrier is in
// the middle).
template <bool kFenced = true, typename R, typename Magnitude>
__device__ void block_argmax(int begin, int end, Magnitude magnitude, R* value, int* index) {
  __shared__ R warp_value[kMaxThreads / 32];
  __shared__ int warp_index[kMaxThreads / 32];
  R best = -1;
  int best_i = begin;
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const R v = magnitude(i);
    if (v > best) best = v, best_i = i;  // strictly greater: this thread's first maximum
  }
  if (kFenced) __syncthreads();  // the previous call's readers are done with the shared slots
  block_argmax_of(best, best_i, warp_value, warp_index, begin, value, index);
  if (kFenced) __syncthreads();
}

// The exchange of shared memory between the blocks of a cluster (sm_90) by st.async onto each
// receiving block's mbarrier, which needs no cluster barrier and so no GPU-scope fence: the LDL^T
// cluster panel's argmax exchanges.

// The most bytes one phase of an mbarrier can expect (PTX: tx-count in [0, 2^20 - 1]).
inline constexpr unsigned kMaxTransactionBytes = (1u << 20) - 1;

// A phase still open after this many SM clock cycles (about 1 s at the H100's 1.98 GHz; a
// legitimate wait is for the other blocks of the cluster to reach the same step, microseconds)
// never completes: the bytes announced differ from the bytes pushed.
inline constexpr long long kMaxPhaseWaitCycles = 2'000'000'000LL;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// v to block `rank`'s copy of this block's shared variable *local by st.async, completing
// sizeof(V) bytes of a transaction on that block's mbarrier (its copy of *bar): the receiver
// learns of it by waiting on its own mbarrier, with no cluster barrier and no fence (a release
// at cluster scope compiles to MEMBAR.ALL.GPU on sm_90; st.async to STAS).
template <typename V>
__device__ inline void push_async(V* local, unsigned long long* bar, int rank, V v) {
  static_assert(sizeof(V) == 4 || sizeof(V) == 8 || sizeof(V) == 16, "4, 8 or 16 bytes");
  unsigned dst, remote_bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(dst)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(local))), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote_bar)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(bar))), "r"(rank));
  if constexpr (sizeof(V) == 4) {
    unsigned bits;
    memcpy(&bits, &v, 4);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::
                     "r"(dst), "r"(bits), "r"(remote_bar)
                 : "memory");
  } else if constexpr (sizeof(V) == 8) {
    unsigned long long bits;
    memcpy(&bits, &v, 8);
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];" ::
                     "r"(dst), "l"(bits), "r"(remote_bar)
                 : "memory");
  } else {
    uint4 bits;
    memcpy(&bits, &v, 16);
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, "
        "[%5];" ::"r"(dst),
        "r"(bits.x), "r"(bits.y), "r"(bits.z), "r"(bits.w), "r"(remote_bar)
        : "memory");
  }
}

// This block's mbarrier *bar: this thread's arrival (the barrier's one expected), announcing
// `bytes` of transactions to come (st.async from any block of the cluster).
__device__ inline void arrive_expect_bytes(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                   static_cast<unsigned>(__cvta_generic_to_shared(bar))),
               "r"(bytes)
               : "memory");
}

// One try of the wait below (try_wait suspends the thread a while before it answers false).
__device__ inline bool phase_done(unsigned address, unsigned parity) {
  unsigned done;
  asm volatile(
      "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
      "selp.u32 %0, 1, 0, p; }"
      : "=r"(done)
      : "r"(address), "r"(parity)
      : "memory");
  return done != 0;
}

// Until the phase of this block's mbarrier *bar with this parity is complete (its arrival and
// every byte announced in). The default acquire at block scope, as CUTLASS's transaction barrier
// waits for bytes other blocks write (TMA multicast, st.async): what completes the phase is
// bytes in this block's shared memory, counted in as they land; global writes need another
// order (the LDL^T cluster panel's cluster barrier). (.acquire.cluster adds CCTL.IVALL, an L1
// invalidation, behind the wait: 9% of the float64 cluster panel's stall samples on the H100.)
// Past kMaxPhaseWaitCycles it traps: the kernel fails with a CUDA error that the next checked
// call reports, where spinning on would hang the GPU and the process. The clock is read only
// once the first try has failed.
__device__ inline void wait_phase(unsigned long long* bar, unsigned parity) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(bar));
  if (phase_done(address, parity)) return;
  const long long start = clock64();
  while (!phase_done(address, parity)) {
    if (clock64() - start > kMaxPhaseWaitCycles) __trap();
  }
}
#endif

}  // namespace kernel
}  // namespace jcm
