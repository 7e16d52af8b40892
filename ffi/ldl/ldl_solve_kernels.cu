// The LDL^T solves (LAPACK ?sytrs / ?sytrs2, lower) from the factor as ?sytrf stores it: the
// unblocked kernels (one launch over the batch), the blocked solve's kernels, and the TRSM
// route's conversion (?syconv), permutation and D^-1.
#include "ldl/ldl_kernels.h"

#include "core/kernel_util.cuh"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace jcm {

namespace {

using namespace kernel;

// Block (matrix, chunk of up to kRhsPerBlock right-hand sides) solves with LAPACK ?sytrs's
// sequence for UPLO = 'L': forward through the pivots with L and D, then back with L^T. A warp
// per right-hand side (up to kWarps): a step's value is read right after another thread wrote
// it, so the chunk of B sits in shared memory when it fits (ld_shared > 0), where that round
// trip is several times shorter than through L2, and a block has no warp without a column.
// kFactorShared: the factor's lower triangle (packed by columns) and the pivots are copied to
// shared memory first, after B's chunk, so that no step waits for L2 for its pivot and column
// (H100 ldl_solve, the whole call, in global / shared memory: float32 1 x 128 0.406 / 0.362 ms,
// float64 256 x 128 0.948 / 0.847; the H100 report). Up to n = 128 the warp
// kernel below takes it.
constexpr int kRhsPerBlock = static_cast<int>(limits::kLdlSolveRhsPerBlock);
// The most shared memory a solve block takes to hold the factor (one right-hand side: float32
// n <= 222, float64 157, complex128 110): one block per SM at worst, which a step's few short
// reads no longer need to hide.
constexpr size_t kSolveFactorSharedBytes = 100 * 1024;

// Rows per lane of sytrs_lower_warp_kernel's right-hand side: it takes n <= 32 kSolveWarpMaxRows.
constexpr int kSolveWarpMaxRows = 4;

// Elements of an n x n lower triangle packed by columns (column k: rows k..n-1).
__host__ __device__ inline int64_t packed_lower_size(int64_t n) { return n * (n + 1) / 2; }

// Where L(i, j), i >= j, sits in the packed triangle.
__device__ inline int packed_lower_index(int i, int j, int n) {
  return j * n - j * (j - 1) / 2 + (i - j);
}

// The block copies the lower triangle of a (n x n, column-major) into lp, packed.
template <typename T>
__device__ inline void copy_packed_lower(T* lp, const T* a, int n) {
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
    const int i = idx % n, j = idx / n;
    if (i >= j) lp[packed_lower_index(i, j, n)] = a[idx];
  }
}

// A pivot clamped to [-(n+1), n + 1]: the same decisions as the int64 value (out of [1, n] is no
// interchange) in an int.
__device__ inline int clamped_pivot(int64_t p, int n) {
  return static_cast<int>(p > n ? n + 1 : p < -n ? -(n + 1) : p);
}

// The row a pivot p (1-based, its sign dropped by the caller) swaps with, or -1 for a p out of
// [1, n]: no interchange, never an out-of-bounds access.
template <typename I>
__device__ inline int pivot_target(I p, int n) {
  return p >= 1 && p <= n ? static_cast<int>(p - 1) : -1;
}

// One block's (matrix, chunk of right-hand sides) operands of the unblocked solve kernels.
template <typename T>
struct SolveItem {
  const T* a;            // the factor, n x n
  const int64_t* ipiv;   // its pivots
  T* b;                  // the chunk's first column of B (n x nrhs)
  int cols;              // right-hand sides in the chunk
};

template <typename T>
__device__ inline SolveItem<T> solve_item(int n, int nrhs, const T* ld_all,
                                          const int64_t* ipiv_all, T* b_all) {
  const int c0 = blockIdx.y * kRhsPerBlock;
  return {ld_all + static_cast<int64_t>(blockIdx.x) * n * n,
          ipiv_all + static_cast<int64_t>(blockIdx.x) * n,
          b_all + static_cast<int64_t>(blockIdx.x) * n * nrhs + static_cast<int64_t>(c0) * n,
          min(kRhsPerBlock, nrhs - c0)};
}

template <typename T, bool kFactorShared>
__global__ void __launch_bounds__(kThreads)
    sytrs_lower_kernel(int n, int nrhs, int ld_shared, const T* ld_all, const int64_t* ipiv_all,
                       T* b_all) {
  const SolveItem<T> item = solve_item(n, nrhs, ld_all, ipiv_all, b_all);
  const T* a = item.a;
  const int64_t* ipiv_global = item.ipiv;
  const int cols = item.cols;
  T* b_global = item.b;
  T* b = ld_shared ? reinterpret_cast<T*>(dynamic_shared()) : b_global;
  const int ldb = ld_shared ? ld_shared : n;
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int warp = tid / 32, lane = tid % 32, nwarps = nthreads / 32;
  // After B's chunk (if there): the packed triangle, then the clamped pivots.
  T* lp = reinterpret_cast<T*>(dynamic_shared()) + (ld_shared ? ld_shared * cols : 0);
  int* piv = reinterpret_cast<int*>(lp + packed_lower_size(n));
  if (ld_shared) copy_matrix(b, ldb, b_global, n, n, cols);
  if (kFactorShared) {
    copy_packed_lower(lp, a, n);
    for (int k = tid; k < n; k += nthreads) piv[k] = clamped_pivot(ipiv_global[k], n);
    __syncthreads();
  }
  // L and D: only i >= j is read.
  auto A = [&](int i, int j) -> T {
    if (kFactorShared) return lp[packed_lower_index(i, j, n)];
    return a[i + static_cast<int64_t>(j) * n];
  };
  auto pivot = [&](int k) -> int64_t { return kFactorShared ? piv[k] : ipiv_global[k]; };
  auto B = [&](int i, int c) -> T& { return b[i + static_cast<int64_t>(c) * ldb]; };
  auto target = [&](int64_t p) { return pivot_target(p, n); };
  auto swap_rows = [&](int r, int s) {
    if (s < 0 || s == r) return;
    for (int c = tid; c < cols; c += nthreads) {
      T t = B(r, c);
      B(r, c) = B(s, c);
      B(s, c) = t;
    }
  };

  // Forward: B := D^-1 L^-1 P^T B, block by block.
  for (int k = 0; k < n;) {
    const int64_t p = pivot(k);
    if (p > 0) {
      swap_rows(k, target(p));
      __syncthreads();
      for (int c = warp; c < cols; c += nwarps) {
        const T bk = B(k, c);
        for (int i = k + 1 + lane; i < n; i += 32) B(i, c) -= A(i, k) * bk;
      }
      __syncthreads();
      for (int c = tid; c < cols; c += nthreads) B(k, c) = B(k, c) / A(k, k);
      k += 1;
    } else {
      if (k + 1 >= n) break;  // a malformed trailing 2x2 pivot: the caller NaNs this item
      swap_rows(k + 1, target(-p));
      __syncthreads();
      for (int c = warp; c < cols; c += nwarps) {
        const T bk = B(k, c), bkp1 = B(k + 1, c);
        for (int i = k + 2 + lane; i < n; i += 32) {
          B(i, c) = B(i, c) - A(i, k) * bk - A(i, k + 1) * bkp1;
        }
      }
      __syncthreads();
      const T akm1k = A(k + 1, k);
      const T akm1 = A(k, k) / akm1k;
      const T ak = A(k + 1, k + 1) / akm1k;
      const T denom = akm1 * ak - T(1);
      for (int c = tid; c < cols; c += nthreads) {
        const T bkm1 = B(k, c) / akm1k;
        const T bk = B(k + 1, c) / akm1k;
        B(k, c) = (ak * bkm1 - bk) / denom;
        B(k + 1, c) = (akm1 * bk - bkm1) / denom;
      }
      k += 2;
    }
    __syncthreads();
  }

  // Backward: B := P L^-T B. Each warp reduces whole columns (the dot products with L's
  // columns below the block), then the row interchange.
  for (int k = n - 1; k >= 0;) {
    const int64_t p = pivot(k);
    const bool two = p < 0 && k >= 1;
    for (int c = warp; c < cols; c += nwarps) {
      T s0 = T(0), s1 = T(0);
      for (int i = k + 1 + lane; i < n; i += 32) {
        s0 += A(i, k) * B(i, c);
        if (two) s1 += A(i, k - 1) * B(i, c);
      }
      s0 = warp_sum(s0);
      if (two) s1 = warp_sum(s1);  // `two` is the same on every lane
      if (lane == 0) {
        B(k, c) -= s0;
        if (two) B(k - 1, c) -= s1;
      }
    }
    __syncthreads();
    swap_rows(k, target(p > 0 ? p : -p));
    __syncthreads();
    k -= two ? 2 : 1;
  }
  if (ld_shared) copy_matrix(b_global, n, b, ldb, n, cols);
}

// The same solve with no barrier after the copy, for n <= 32 R and the factor in shared memory
// (as sytrs_lower_kernel<T, true>): a warp per right-hand side keeps its column in registers,
// row lane + 32 r in x[r], and reads the pivots from registers too, where the block kernel's
// step is three barriers and several shared-memory round trips (H100 ldl_solve, the whole call,
// block kernel with the factor in global memory / shared memory / this kernel: float32 1 x 64
// 0.171 / 0.160 / 0.145 ms, 1 x 128 0.405 / 0.362 / 0.343, 64 x 128 0.447 / 0.388 / 0.364;
// float64 256 x 128 0.943 / 0.847 / 0.807; the H100 report). B(i) of a
// uniform i is a select and a shuffle; the arithmetic is sytrs_lower_kernel's.
template <typename T, int R>
__global__ void __launch_bounds__(kThreads)
    sytrs_lower_warp_kernel(int n, int nrhs, const T* ld_all, const int64_t* ipiv_all,
                            T* b_all) {
  const SolveItem<T> item = solve_item(n, nrhs, ld_all, ipiv_all, b_all);
  const int64_t* ipiv = item.ipiv;
  const int cols = item.cols;
  T* b = item.b;
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32;
  T* lp = reinterpret_cast<T*>(dynamic_shared());
  copy_packed_lower(lp, item.a, n);
  __syncthreads();
  auto A = [&](int i, int j) -> T { return lp[packed_lower_index(i, j, n)]; };
  int piv[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int k = lane + 32 * r;
    piv[r] = clamped_pivot(k < n ? ipiv[k] : 0, n);
  }
  auto select = [](const auto(&v)[R], int r) {
    auto s = v[0];
#pragma unroll
    for (int j = 1; j < R; ++j) s = r == j ? v[j] : s;
    return s;
  };
  auto pivot = [&](int k) -> int { return __shfl_sync(0xffffffffu, select(piv, k / 32), k % 32); };
  auto target = [&](int p) { return pivot_target(p, n); };
  for (int c = warp; c < cols; c += nthreads / 32) {
    T x[R];
#pragma unroll
    for (int r = 0; r < R; ++r) x[r] = lane + 32 * r < n ? b[lane + 32 * r + c * n] : T(0);
    auto get = [&](int i) -> T { return shfl_idx(select(x, i / 32), i % 32); };
    auto put = [&](int i, T v) {
#pragma unroll
      for (int r = 0; r < R; ++r) x[r] = lane + 32 * r == i ? v : x[r];
    };
    auto swap_rows = [&](int r1, int r2) {
      if (r2 < 0 || r2 == r1) return;
      const T v1 = get(r1), v2 = get(r2);
      put(r1, v2);
      put(r2, v1);
    };
    // Forward: B := D^-1 L^-1 P^T B.
    for (int k = 0; k < n;) {
      const int p = pivot(k);
      if (p > 0) {
        swap_rows(k, target(p));
        const T bk = get(k);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int i = lane + 32 * r;
          if (i > k && i < n) x[r] -= A(i, k) * bk;
        }
        put(k, bk / A(k, k));
        k += 1;
      } else {
        if (k + 1 >= n) break;  // a malformed trailing 2x2 pivot: the caller NaNs this item
        swap_rows(k + 1, target(-p));
        const T bk = get(k), bkp1 = get(k + 1);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          const int i = lane + 32 * r;
          if (i > k + 1 && i < n) x[r] = x[r] - A(i, k) * bk - A(i, k + 1) * bkp1;
        }
        const T akm1k = A(k + 1, k);
        const T akm1 = A(k, k) / akm1k;
        const T ak = A(k + 1, k + 1) / akm1k;
        const T denom = akm1 * ak - T(1);
        const T bkm1 = bk / akm1k, bk1 = bkp1 / akm1k;
        put(k, (ak * bkm1 - bk1) / denom);
        put(k + 1, (akm1 * bk1 - bkm1) / denom);
        k += 2;
      }
    }
    // Backward: B := P L^-T B.
    for (int k = n - 1; k >= 0;) {
      const int p = pivot(k);
      const bool two = p < 0 && k >= 1;
      T s0 = T(0), s1 = T(0);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int i = lane + 32 * r;
        if (i > k && i < n) {
          s0 += A(i, k) * x[r];
          if (two) s1 += A(i, k - 1) * x[r];
        }
      }
      s0 = warp_allsum(s0);
      put(k, get(k) - s0);
      if (two) {  // the same on every lane
        s1 = warp_allsum(s1);
        put(k - 1, get(k - 1) - s1);
      }
      swap_rows(k, target(p > 0 ? p : -p));
      k -= two ? 2 : 1;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (lane + 32 * r < n) b[lane + 32 * r + c * n] = x[r];
    }
  }
}

// The blocked solve (sytrs_lower_blocked_*). The blocks are cut at K0 = 0, nb, 2 nb, ... for the
// whole batch; a matrix whose 2x2 pivot straddles a cut moves that cut one column down, so its
// block is [k0, k1) with k0 in {K0, K0 + 1}, k1 in {K1, K1 + 1} (K1 = min(n, K0 + nb)). The GEMMs
// take the common columns K0..K0 + nb and rows from K1 + 1 on; y holds the block's solved values
// zero-padded to those columns, and row K1, which lies inside one matrix's block and below
// another's, is updated by the kernels themselves.
constexpr int kSolveMaxTouched = kLdlSolveMaxBlock + 2;

// The first column of the step at or after column k (valid pivots): k, or k + 1 where a 2x2
// pivot starts at k - 1 (the run of negative pivots before k has odd length), for k = K0 and
// K1 at once. Every thread returns the same; starts and ends with a barrier.
__device__ inline int2 block_cuts(const int64_t* ipiv, int n, int K0, int K1) {
  __shared__ int last_positive[2];
  __syncthreads();
  if (threadIdx.x < 2) last_positive[threadIdx.x] = -1;
  __syncthreads();
  const int stop = min(K1, n);
  int best0 = -1, best1 = -1;
  for (int j = threadIdx.x; j < stop; j += blockDim.x) {
    if (ipiv[j] > 0) {
      best1 = j;
      if (j < K0) best0 = j;
    }
  }
  if (best0 >= 0) atomicMax(&last_positive[0], best0);
  if (best1 >= 0) atomicMax(&last_positive[1], best1);
  __syncthreads();
  const int k0 = K0 == 0 ? 0 : K0 + ((K0 - 1 - last_positive[0]) & 1);
  const int k1 = K1 >= n ? n : K1 + ((K1 - 1 - last_positive[1]) & 1);
  return make_int2(k0, k1);
}

// Index of `row` among the first `count` entries of rows[], or -1.
__device__ inline int find_row(const int* rows, int count, int row) {
  for (int i = 0; i < count; ++i) {
    if (rows[i] == row) return i;
  }
  return -1;
}

// The block's square of L, LS(i, j) = L(i, j) for i, j in [k0, k1), into shared memory: the
// steps then read no global memory but the rows below that swaps pull in.
template <typename T>
__device__ inline void load_diagonal_block(T* ls, const T* a, int n, int k0, int rows) {
  for (int e = threadIdx.x; e < rows * rows; e += blockDim.x) {
    ls[e] = a[(k0 + e % rows) + static_cast<int64_t>(k0 + e / rows) * n];
  }
}

// One (matrix, right-hand-side chunk) of the blocked solve, as its block runs it: the matrix's
// operands, block K0's cut [k0, k1) and its own nb + 1 x cols slice of y / t.
template <typename T>
struct SolveBlock {
  const T* a;
  const int64_t* ipiv;
  T* b;
  int64_t rhs_offset;  // of the matrix's chunk in y / t
  int n, cols, K1, k0, k1, rows;

  __device__ const T& A(int i, int j) const { return a[i + static_cast<int64_t>(j) * n]; }
  __device__ T& B(int i, int c) const { return b[i + static_cast<int64_t>(c) * n]; }
  // The block's rows of B in shared memory: bs[(i - k0) + c rows].
  __device__ T& S(T* bs, int i, int c) const { return bs[(i - k0) + c * rows]; }
  __device__ void swap_shared(T* bs, int r, int s) const {
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
      const T t = S(bs, r, c);
      S(bs, r, c) = S(bs, s, c);
      S(bs, s, c) = t;
    }
  }
  // The block's rows of B from global to shared memory, or back.
  __device__ void copy_rows(T* bs, bool to_shared) const {
    for (int e = threadIdx.x; e < rows * cols; e += blockDim.x) {
      T& global = B(k0 + e % rows, e / rows);
      T& shared = S(bs, k0 + e % rows, e / rows);
      if (to_shared) {
        shared = global;
      } else {
        global = shared;
      }
    }
  }
};

// Every thread gets the same (block_cuts' barriers included).
template <typename T>
__device__ SolveBlock<T> solve_block(int n, int nrhs, int nb, int K0, const T* ld_all,
                                     const int64_t* ipiv_all, T* b_all) {
  SolveBlock<T> v;
  const int m = blockIdx.x, c0 = blockIdx.y * kRhsPerBlock;
  v.a = ld_all + static_cast<int64_t>(m) * n * n;
  v.ipiv = ipiv_all + static_cast<int64_t>(m) * n;
  v.b = b_all + static_cast<int64_t>(m) * n * nrhs + static_cast<int64_t>(c0) * n;
  v.rhs_offset = static_cast<int64_t>(m) * (nb + 1) * nrhs + static_cast<int64_t>(c0) * (nb + 1);
  v.n = n;
  v.cols = min(kRhsPerBlock, nrhs - c0);
  v.K1 = min(n, K0 + nb);
  const int2 cut = block_cuts(v.ipiv, n, K0, v.K1);
  v.k0 = cut.x;
  v.k1 = cut.y;
  v.rows = cut.y - cut.x;
  return v;
}

// Forward through block K0 (B := L^-1 P B on the block's rows, the rows a swap pulls in brought
// up to date first): one block per (matrix, right-hand-side chunk). Writes the block's rows
// back, updates row K1 where it lies below the block, pre-adds to every other row below that a
// swap touched what the GEMM will subtract twice, and fills y (nb + 1 x nrhs per matrix).
// Dot products over a row of L are one warp's each (lanes over the columns, then warp_sum).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sytrs_forward_block_kernel(int n, int nrhs, int nb, int K0, const T* ld_all,
                               const int64_t* ipiv_all, T* b_all, T* y_all) {
  const SolveBlock<T> sb = solve_block(n, nrhs, nb, K0, ld_all, ipiv_all, b_all);
  const int64_t* ipiv = sb.ipiv;
  const int cols = sb.cols, K1 = sb.K1, k0 = sb.k0, k1 = sb.k1, rows = sb.rows;
  T* y = y_all + sb.rhs_offset;
  auto A = [&](int i, int j) -> const T& { return sb.A(i, j); };
  auto B = [&](int i, int c) -> T& { return sb.B(i, c); };
  // Shared: the block's rows of B (kRhsPerBlock columns), then its square of L.
  T* bs = reinterpret_cast<T*>(dynamic_shared());
  T* ls = bs + rows * kRhsPerBlock;
  auto BS = [&](int i, int c) -> T& { return sb.S(bs, i, c); };
  auto LS = [&](int i, int j) -> const T& { return ls[(i - k0) + (j - k0) * rows]; };
  __shared__ int touched_row[kSolveMaxTouched], touched_start[kSolveMaxTouched];
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32;
  // Row r of B, column c, minus (sign -1) or plus (+1) L(r, from:to) BS(from:to, c), by warp.
  auto row_update = [&](int r, int c, int from, int to, T sign) {
    T s = T(0);
    for (int j = from + lane; j < to; j += 32) s += A(r, j) * BS(j, c);
    s = warp_sum(s);
    if (lane == 0) B(r, c) += sign * s;
  };
  sb.copy_rows(bs, true);
  load_diagonal_block(ls, sb.a, n, k0, rows);
  int touched = 0;  // the same on every thread
  __syncthreads();
  for (int k = k0; k < k1;) {
    const int64_t p = ipiv[k];
    const int size = p > 0 ? 1 : 2;
    const int kp = static_cast<int>(p > 0 ? p : -p) - 1;
    const int swap_row = k + size - 1;
    if (kp != swap_row) {
      if (kp >= k1) {
        // Row kp, below the block, brought up to date with the block's columns from its start
        // to k - 1, then swapped in.
        const int found = find_row(touched_row, touched, kp);
        const int from = found >= 0 ? touched_start[found] : k0;
        for (int c = warp; c < cols; c += kWarps) row_update(kp, c, from, k, T(-1));
        __syncthreads();  // every thread has read the list; row kp is current
        for (int c = tid; c < cols; c += nthreads) {
          const T v = B(kp, c);
          B(kp, c) = BS(swap_row, c);
          BS(swap_row, c) = v;
        }
        if (tid == 0) {
          const int slot = found >= 0 ? found : touched;
          touched_row[slot] = kp;
          touched_start[slot] = k;
        }
        if (found < 0) ++touched;
      } else {
        sb.swap_shared(bs, swap_row, kp);
      }
      __syncthreads();
    }
    const int below = k1 - k - size;
    for (int e = tid; e < below * cols; e += nthreads) {
      const int i = k + size + e % below, c = e / below;
      T v = BS(i, c) - LS(i, k) * BS(k, c);
      if (size == 2) v -= LS(i, k + 1) * BS(k + 1, c);
      BS(i, c) = v;
    }
    __syncthreads();
    k += size;
  }
  sb.copy_rows(bs, false);
  // Row K1 below the block: the block's columns from its start on (the GEMM starts at K1 + 1).
  // Touched rows in the GEMM's range had the columns before their start already.
  const bool row_k1_below = k1 == K1 && K1 < n;
  const int tasks = (touched + (row_k1_below ? 1 : 0)) * cols;
  for (int e = warp; e < tasks; e += kWarps) {
    const int which = e % (tasks / cols), c = e / (tasks / cols);
    if (which == touched) {
      const int found = find_row(touched_row, touched, K1);
      row_update(K1, c, found >= 0 ? touched_start[found] : k0, k1, T(-1));
    } else if (touched_row[which] > K1) {
      row_update(touched_row[which], c, k0, touched_start[which], T(1));
    }
  }
  if (K1 + 1 < n) {
    for (int e = tid; e < (nb + 1) * cols; e += nthreads) {
      const int j = K0 + e % (nb + 1), c = e / (nb + 1);
      y[(j - K0) + static_cast<int64_t>(c) * (nb + 1)] = j >= k0 && j < k1 ? BS(j, c) : T(0);
    }
  }
}

// D^-1, then back through block K0 (B := P^T L^-T B on the block's rows): t (nb + 1 x nrhs per
// matrix, when has_t) holds L(K1 + 1:, K0:K0 + nb)^T B(K1 + 1:) as B was before this kernel;
// what the block's swaps change below it since is added back row by row. Each step's dot
// products are one warp's per (column of the step, right-hand side).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sytrs_backward_block_kernel(int n, int nrhs, int nb, int K0, bool has_t, const T* ld_all,
                                const int64_t* ipiv_all, T* b_all, const T* t_all) {
  const SolveBlock<T> sb = solve_block(n, nrhs, nb, K0, ld_all, ipiv_all, b_all);
  const int64_t* ipiv = sb.ipiv;
  const int cols = sb.cols, K1 = sb.K1, k0 = sb.k0, k1 = sb.k1, rows = sb.rows;
  const T* t = t_all + sb.rhs_offset;
  auto A = [&](int i, int j) -> const T& { return sb.A(i, j); };
  auto B = [&](int i, int c) -> T& { return sb.B(i, c); };
  // Shared: the block's rows, their dot products with the rows below, the values the rows
  // below had before the block's swaps changed them (kRhsPerBlock columns each), then the
  // block's square of L.
  T* bs = reinterpret_cast<T*>(dynamic_shared());
  T* dots = bs + rows * kRhsPerBlock;
  T* before = dots + rows * kRhsPerBlock;
  T* ls = before + kSolveMaxTouched * kRhsPerBlock;
  auto BS = [&](int i, int c) -> T& { return sb.S(bs, i, c); };
  auto DOT = [&](int i, int c) -> T& { return sb.S(dots, i, c); };
  auto LS = [&](int i, int j) -> const T& { return ls[(i - k0) + (j - k0) * rows]; };
  __shared__ int changed_row[kSolveMaxTouched], step_start[kSolveMaxTouched];
  __shared__ int steps;
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32;
  if (tid == 0) {
    int count = 0;
    for (int k = k0; k < k1; k += ipiv[k] > 0 ? 1 : 2) step_start[count++] = k;
    steps = count;
  }
  const bool row_k1_below = k1 == K1 && K1 < n;
  for (int e = tid; e < rows * cols; e += nthreads) {
    const int i = k0 + e % rows, c = e / rows;
    BS(i, c) = B(i, c);
    T d = has_t ? t[(i - K0) + static_cast<int64_t>(c) * (nb + 1)] : T(0);
    if (row_k1_below) d += A(K1, i) * B(K1, c);
    DOT(i, c) = d;
  }
  load_diagonal_block(ls, sb.a, n, k0, rows);
  __syncthreads();
  // B := D^-1 B on the block's rows, as ?sytrs divides by D's 1x1 and 2x2 blocks.
  for (int e = tid; e < steps * cols; e += nthreads) {
    const int k = step_start[e % steps], c = e / steps;
    if (ipiv[k] > 0) {
      BS(k, c) = BS(k, c) / LS(k, k);
    } else {
      const T akm1k = LS(k + 1, k);
      const T akm1 = LS(k, k) / akm1k;
      const T ak = LS(k + 1, k + 1) / akm1k;
      const T denom = akm1 * ak - T(1);
      const T bkm1 = BS(k, c) / akm1k;
      const T bk = BS(k + 1, c) / akm1k;
      BS(k, c) = (ak * bkm1 - bk) / denom;
      BS(k + 1, c) = (akm1 * bk - bkm1) / denom;
    }
  }
  __syncthreads();
  int changed = 0;  // the same on every thread
  for (int s = steps - 1; s >= 0; --s) {
    const int k = step_start[s];
    const int64_t p = ipiv[k];
    const int size = p > 0 ? 1 : 2;
    const int kp = static_cast<int>(p > 0 ? p : -p) - 1;
    const int swap_row = k + size - 1;
    // B(k..) -= L(rows > swap_row, k..)^T B(those rows): the block's rows now, the rows below
    // from the dot products, plus what the later steps' swaps changed there.
    const int below = k1 - k - size;
    for (int e = warp; e < size * cols; e += kWarps) {
      const int j = k + e % size, c = e / size;
      T v = T(0);
      for (int x = lane; x < below + changed; x += 32) {
        if (x < below) {
          v += LS(k + size + x, j) * BS(k + size + x, c);
        } else {
          const int r = x - below, row = changed_row[r];
          v += A(row, j) * (B(row, c) - before[r + c * kSolveMaxTouched]);
        }
      }
      v = warp_sum(v);
      if (lane == 0) BS(j, c) -= v + DOT(j, c);
    }
    __syncthreads();
    if (kp != swap_row) {
      if (kp >= k1) {
        const int found = find_row(changed_row, changed, kp);
        __syncthreads();  // every thread has read the list
        for (int c = tid; c < cols; c += nthreads) {
          if (found < 0) before[changed + c * kSolveMaxTouched] = B(kp, c);
          const T v = B(kp, c);
          B(kp, c) = BS(swap_row, c);
          BS(swap_row, c) = v;
        }
        if (found < 0) {
          if (tid == 0) changed_row[changed] = kp;
          ++changed;
        }
      } else {
        sb.swap_shared(bs, swap_row, kp);
      }
      __syncthreads();
    }
  }
  sb.copy_rows(bs, false);
}

// The TRSM-based solve (LAPACK ?sytrs2's route, UPLO = 'L'): the factor converted once (?syconv:
// L with every later interchange applied to each column, the 2x2 blocks' subdiagonal taken out
// to D), then A X = B is P L D L^T P^T X = B: a row gather, two cuBLAS TRSMs around D's blocks, a
// row scatter. The unblocked and blocked solves take n dependent steps (or 2 n / nb launches of
// nb); here the steps are the conversion's swaps, one thread per column in shared memory.

// Each matrix's steps from its pivots (1-based, negative pairs for 2x2 blocks, clamped as the
// other solve kernels read them): step[k] = (the row step k interchanges, the row it goes to; -1
// for none): (k, p) for a 1x1 step at k, (k + 1, p) for a 2x2 step at k, k + 1 and (-1, -1) at
// its second row k + 1; kind[k] = 1, 2, 0 alike. A run of negative pivots pairs up from its
// first row, so a row's kind is its distance from the run's start, even or odd: an inclusive
// max-scan of the runs' starts over the block, no walk. A malformed trailing 2x2 pivot (a run
// ending odd at n - 1) is a 1x1 step without interchange (the caller NaNs such items).
constexpr int kStepsPerThread = 8;  // rows a thread of ldl_steps_kernel scans: n <= 8192

// Bytes before ldl_convert_kernel's step list: a block's columns, or the permutation's n ints.
__host__ __device__ inline size_t convert_buffer_bytes(int n, int cols, int ld_s, size_t elem) {
  const size_t columns = static_cast<size_t>(ld_s) * cols * elem;
  const size_t perm = static_cast<size_t>(n) * sizeof(int);
  return ((columns > perm ? columns : perm) + 15) / 16 * 16;
}

__global__ void __launch_bounds__(kMaxThreads)
    ldl_steps_kernel(int n, const int64_t* ipiv_all, int2* step_all, int* kind_all) {
  const int64_t item = blockIdx.x;
  const int64_t* ipiv = ipiv_all + item * n;
  __shared__ int warp_max[kMaxThreads / 32];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int first = tid * kStepsPerThread;
  int p[kStepsPerThread], start[kStepsPerThread];
  int run = 0;  // the latest run start at or before this row, within this thread's rows
#pragma unroll
  for (int e = 0; e < kStepsPerThread; ++e) {
    const int k = first + e;
    p[e] = k < n ? clamped_pivot(ipiv[k], n) : 1;
    const bool starts = k == 0 || (k < n && (k - 1 >= first ? p[e - (e > 0)] > 0
                                                             : clamped_pivot(ipiv[k - 1], n) > 0));
    run = starts ? k : run;
    start[e] = run;
  }
  // The block's inclusive max-scan of the threads' last values, added in front of each row's.
  int total = start[kStepsPerThread - 1];
  for (int offset = 1; offset < 32; offset *= 2) {
    const int other = __shfl_up_sync(0xffffffffu, total, offset);
    if (lane >= offset) total = max(total, other);
  }
  if (lane == 31) warp_max[warp] = total;
  __syncthreads();
  int before = 0;  // the largest start in every earlier thread's rows
  for (int w = 0; w < warp; ++w) before = max(before, warp_max[w]);
  const int in_warp = __shfl_up_sync(0xffffffffu, total, 1);
  if (lane > 0) before = max(before, in_warp);
#pragma unroll
  for (int e = 0; e < kStepsPerThread; ++e) {
    const int k = first + e;
    if (k >= n) break;
    const int run_start = max(start[e], before);
    int kind = 1;
    int2 st = make_int2(k, p[e] > 0 ? pivot_target(p[e], n) : -1);
    if (p[e] < 0) {
      const bool second = (k - run_start) % 2 == 1;
      if (second) {
        kind = 0;
        st = make_int2(-1, -1);
      } else if (k + 1 < n) {
        kind = 2;
        st = make_int2(k + 1, pivot_target(-p[e], n));
      }
    }
    step_all[item * n + k] = st;
    kind_all[item * n + k] = kind;
  }
}

// ?syconv's L: lc(r, j) for r > j is the factor's L(r, j) after the interchanges of every step
// after column j (a 2x2 step's own interchange is left of its first column), 0 at a 2x2 block's
// subdiagonal. Block (matrix, `cols` consecutive columns): the columns' rows below c0 in shared
// memory (odd leading dimension ld_s), a thread per column walking the later steps (the step
// list in shared memory: no step's load waits on the one before). The grid's last block of
// each matrix walks every step over 0..n-1 instead: perm, with P^T B = B(perm, :).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    ldl_convert_kernel(int n, int cols, int ld_s, const T* ld_all, const int2* step_all,
                       const int* kind_all, T* lc_all, int* perm_all) {
  const int64_t item = blockIdx.x;
  const int2* step_g = step_all + item * n;
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int warp = tid / 32, lane = tid % 32, nwarps = nthreads / 32;
  const bool perm_block = blockIdx.y == gridDim.y - 1;
  const int c0 = perm_block ? -1 : static_cast<int>(blockIdx.y) * cols;
  T* buf = reinterpret_cast<T*>(dynamic_shared());
  int2* step = reinterpret_cast<int2*>(dynamic_shared() + convert_buffer_bytes(n, cols, ld_s,
                                                                               sizeof(T)));
  for (int k = c0 + 1 + tid; k < n; k += nthreads) step[k] = step_g[k];
  if (perm_block) {
    int* perm = reinterpret_cast<int*>(buf);
    for (int k = tid; k < n; k += nthreads) perm[k] = k;
    __syncthreads();
    if (tid == 0) {
      for (int s = 0; s < n; ++s) {
        const int2 st = step[s];
        if (st.x >= 0 && st.y >= 0 && st.y != st.x) {
          const int t = perm[st.x];
          perm[st.x] = perm[st.y];
          perm[st.y] = t;
        }
      }
    }
    __syncthreads();
    for (int k = tid; k < n; k += nthreads) perm_all[item * n + k] = perm[k];
    return;
  }
  const T* a = ld_all + item * n * n;
  T* lc = lc_all + item * n * n;
  const int width = min(cols, n - 1 - c0);  // columns with rows below the diagonal
  auto B = [&](int r, int cc) -> T& { return buf[(r - c0 - 1) + cc * ld_s]; };
  for (int cc = warp; cc < width; cc += nwarps) {
    const int j = c0 + cc;
    for (int r = j + 1 + lane; r < n; r += 32) B(r, cc) = a[r + static_cast<int64_t>(j) * n];
  }
  __syncthreads();
  if (tid < width) {
    const int j = c0 + tid;
    if (kind_all[item * n + j] == 2) B(j + 1, tid) = T(0);  // D's subdiagonal entry
    // Steps after j; a 2x2 step's second row (j + 1 when j starts one) has none.
    for (int s = j + 1; s < n; ++s) {
      const int2 st = step[s];
      if (st.x >= 0 && st.y > j && st.y != st.x) {
        const T t = B(st.x, tid);
        B(st.x, tid) = B(st.y, tid);
        B(st.y, tid) = t;
      }
    }
  }
  __syncthreads();
  for (int cc = warp; cc < width; cc += nwarps) {
    const int j = c0 + cc;
    for (int r = j + 1 + lane; r < n; r += 32) lc[r + static_cast<int64_t>(j) * n] = B(r, cc);
  }
}

// f(idx, item, i) for every element of `count` n x nrhs column-major matrices (idx in the whole
// array, i its row), by a grid-stride loop.
template <typename F>
__device__ inline void for_each_element(int64_t count, int n, int nrhs, F f) {
  const int64_t per_item = static_cast<int64_t>(n) * nrhs;
  grid_stride(count * per_item,
              [&](int64_t idx) { f(idx, idx / per_item, static_cast<int>(idx % n)); });
}

// dst(i, :) = src(perm[i], :) (gather: P^T B) or dst(perm[i], :) = src(i, :) (scatter: P Y), for
// `count` n x nrhs matrices.
template <typename T>
__global__ void ldl_permute_rows_kernel(int64_t count, int n, int nrhs, const int* perm_all,
                                        const T* src, T* dst, bool gather) {
  for_each_element(count, n, nrhs, [&](int64_t idx, int64_t item, int i) {
    const int p = perm_all[item * n + i];
    const int64_t column = idx - i;  // (item, c)'s first element
    if (gather) {
      dst[idx] = src[column + p];
    } else {
      dst[column + p] = src[idx];
    }
  });
}

// Y := D^-1 Y with D's 1x1 and 2x2 blocks from the factor (?sytrs's arithmetic), a thread per
// (matrix, step's first row, right-hand side).
template <typename T>
__global__ void ldl_diag_solve_kernel(int64_t count, int n, int nrhs, const T* ld_all,
                                      const int* kind_all, T* y) {
  for_each_element(count, n, nrhs, [&](int64_t idx, int64_t item, int i) {
    const int kind = kind_all[item * n + i];
    if (kind == 0) return;
    const T* a = ld_all + item * n * n;
    auto A = [&](int r, int c) { return a[r + static_cast<int64_t>(c) * n]; };
    if (kind == 1) {
      y[idx] = y[idx] / A(i, i);
    } else {
      const T akm1k = A(i + 1, i);
      const T akm1 = A(i, i) / akm1k;
      const T ak = A(i + 1, i + 1) / akm1k;
      const T denom = akm1 * ak - T(1);
      const T bkm1 = y[idx] / akm1k;
      const T bk = y[idx + 1] / akm1k;
      y[idx] = (ak * bkm1 - bk) / denom;
      y[idx + 1] = (akm1 * bk - bkm1) / denom;
    }
  });
}

// Shared memory a conversion block takes at most: two blocks an SM, so that one's walk hides the
// other's latency.
constexpr size_t kConvertSharedBytes = 96 * 1024;

// Columns a conversion block takes: as many as fit (up to one warp) in the shared memory budget.
template <typename D>
int convert_columns(int64_t n, int* ld_s) {
  *ld_s = static_cast<int>((n - 1) | 1);
  const size_t column = static_cast<size_t>(*ld_s) * sizeof(D);
  const size_t fixed = static_cast<size_t>(n) * (sizeof(int2) + sizeof(int)) + kStaticShared;
  if (fixed + column > kConvertSharedBytes) return 0;
  return static_cast<int>(std::min<size_t>(32, (kConvertSharedBytes - fixed) / column));
}

// The blocked solve kernels' grid, (count, right-hand-side chunks); grid.x == 0: nothing to do.
inline cudaError_t solve_block_grid(int64_t count, int64_t n, int64_t nrhs, int64_t nb,
                                    int64_t k0, dim3& grid) {
  grid = dim3(0, 0);
  if (count <= 0 || n <= 0 || nrhs <= 0) return cudaSuccess;
  const int64_t chunks = (nrhs + kRhsPerBlock - 1) / kRhsPerBlock;
  if (nb < 2 || nb > kLdlSolveMaxBlock || k0 < 0 || k0 >= n || n > INT32_MAX ||
      count > INT32_MAX || chunks > limits::kMaxGridY) {
    return cudaErrorInvalidValue;
  }
  grid = dim3(static_cast<unsigned>(count), static_cast<unsigned>(chunks));
  return cudaSuccess;
}

}  // namespace

template <typename T>
cudaError_t sytrs_lower_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                                const T* ld, const int64_t* ipiv, T* b) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0 || nrhs <= 0) return cudaSuccess;
  const int64_t chunks = (nrhs + kRhsPerBlock - 1) / kRhsPerBlock;
  if (n > INT32_MAX || count > INT32_MAX || chunks > limits::kMaxGridY) {
    return cudaErrorInvalidValue;
  }
  const int64_t cols = std::min<int64_t>(kRhsPerBlock, nrhs);
  // Up to 48 KiB a block, so that a batch keeps several blocks on each SM (a step's work is
  // short: blocks side by side hide its latency); a larger chunk stays in global memory.
  MatrixPlace place = place_matrix(n, cols, sizeof(D), 0);
  if (place.smem_bytes + kStaticShared > 48 * 1024) place = MatrixPlace{};
  const int threads = 32 * static_cast<int>(std::min<int64_t>(kWarps, cols));
  const dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(chunks));
  const int n32 = static_cast<int>(n), nrhs32 = static_cast<int>(nrhs);
  const D* ld_d = reinterpret_cast<const D*>(ld);
  D* b_d = reinterpret_cast<D*>(b);
  // The factor and pivots in shared memory where they fit with B's chunk. The copy takes 4
  // warps at least: one warp's n^2 / 32 loads, one after another, would cost what the steps save.
  const size_t factor_bytes = static_cast<size_t>(packed_lower_size(n)) * sizeof(D);
  const size_t smem = place.smem_bytes + factor_bytes + static_cast<size_t>(n) * sizeof(int);
  if (n <= 32 * kSolveWarpMaxRows && factor_bytes + kStaticShared <= kSolveFactorSharedBytes) {
    auto launch = [&](auto kernel) {
      if (cudaError_t err = allow_shared(kernel, factor_bytes); err != cudaSuccess) return err;
      kernel<<<grid, std::max(threads, 128), factor_bytes, stream>>>(n32, nrhs32, ld_d, ipiv, b_d);
      return cudaGetLastError();
    };
    if (n <= 32) return launch(sytrs_lower_warp_kernel<D, 1>);
    if (n <= 64) return launch(sytrs_lower_warp_kernel<D, 2>);
    return launch(sytrs_lower_warp_kernel<D, kSolveWarpMaxRows>);
  }
  if (smem + kStaticShared <= kSolveFactorSharedBytes) {
    if (cudaError_t err = allow_shared(sytrs_lower_kernel<D, true>, smem); err != cudaSuccess) {
      return err;
    }
    sytrs_lower_kernel<D, true><<<grid, std::max(threads, 128), smem, stream>>>(
        n32, nrhs32, place.ld_shared, ld_d, ipiv, b_d);
  } else {
    sytrs_lower_kernel<D, false><<<grid, threads, place.smem_bytes, stream>>>(
        n32, nrhs32, place.ld_shared, ld_d, ipiv, b_d);
  }
  return cudaGetLastError();
}

template <typename T>
cudaError_t sytrs_lower_blocked_forward(cudaStream_t stream, int64_t count, int64_t n,
                                        int64_t nrhs, int64_t nb, int64_t k0, const T* ld,
                                        const int64_t* ipiv, T* b, T* y) {
  using D = typename device_type<T>::type;
  dim3 grid;
  if (cudaError_t err = solve_block_grid(count, n, nrhs, nb, k0, grid); err != cudaSuccess ||
      grid.x == 0) {
    return err;
  }
  const size_t smem = ((nb + 1) * kRhsPerBlock + (nb + 1) * (nb + 1)) * sizeof(D);
  if (cudaError_t err = allow_shared(sytrs_forward_block_kernel<D>, smem); err != cudaSuccess) {
    return err;
  }
  sytrs_forward_block_kernel<D><<<grid, kThreads, smem, stream>>>(
      static_cast<int>(n), static_cast<int>(nrhs), static_cast<int>(nb), static_cast<int>(k0),
      reinterpret_cast<const D*>(ld), ipiv, reinterpret_cast<D*>(b), reinterpret_cast<D*>(y));
  return cudaGetLastError();
}

template <typename T>
cudaError_t sytrs_lower_blocked_backward(cudaStream_t stream, int64_t count, int64_t n,
                                         int64_t nrhs, int64_t nb, int64_t k0, bool has_t,
                                         const T* ld, const int64_t* ipiv, T* b, const T* t) {
  using D = typename device_type<T>::type;
  dim3 grid;
  if (cudaError_t err = solve_block_grid(count, n, nrhs, nb, k0, grid); err != cudaSuccess ||
      grid.x == 0) {
    return err;
  }
  const size_t smem =
      ((2 * (nb + 1) + kSolveMaxTouched) * kRhsPerBlock + (nb + 1) * (nb + 1)) * sizeof(D);
  if (cudaError_t err = allow_shared(sytrs_backward_block_kernel<D>, smem); err != cudaSuccess) {
    return err;
  }
  sytrs_backward_block_kernel<D><<<grid, kThreads, smem, stream>>>(
      static_cast<int>(n), static_cast<int>(nrhs), static_cast<int>(nb), static_cast<int>(k0),
      has_t, reinterpret_cast<const D*>(ld), ipiv, reinterpret_cast<D*>(b),
      reinterpret_cast<const D*>(t));
  return cudaGetLastError();
}

template <typename T>
cudaError_t ldl_solve_convert(cudaStream_t stream, int64_t count, int64_t n, const T* ld,
                              const int64_t* ipiv, T* lc, int* perm, int* kind, int2* step) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  int ld_s = 0;
  const int cols = convert_columns<D>(n, &ld_s);
  if (n > kMaxThreads * kStepsPerThread || count > INT32_MAX || cols == 0) {
    return cudaErrorInvalidValue;
  }
  ldl_steps_kernel<<<static_cast<unsigned>(count), kMaxThreads, 0, stream>>>(
      static_cast<int>(n), ipiv, step, kind);
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  // Column blocks, then the permutation's block (its n ints where a block's columns go).
  const size_t smem =
      convert_buffer_bytes(static_cast<int>(n), cols, ld_s, sizeof(D)) + n * sizeof(int2);
  if (cudaError_t err = allow_shared(ldl_convert_kernel<D>, smem); err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(count),
                  static_cast<unsigned>((n - 1 + cols - 1) / cols + 1));
  ldl_convert_kernel<D><<<grid, kThreads, smem, stream>>>(
      static_cast<int>(n), cols, ld_s, reinterpret_cast<const D*>(ld), step, kind,
      reinterpret_cast<D*>(lc), perm);
  return cudaGetLastError();
}

template <typename T>
bool ldl_solve_convert_fits(int64_t n) {
  int ld_s = 0;
  return n >= 1 && n <= kMaxThreads * kStepsPerThread &&
         convert_columns<typename device_type<T>::type>(n, &ld_s) > 0;
}

template <typename T>
cudaError_t ldl_solve_permute(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                              const int* perm, const T* src, T* dst, bool gather) {
  using D = typename device_type<T>::type;
  const int64_t elements = count * n * nrhs;
  if (elements <= 0) return cudaSuccess;
  if (n > INT32_MAX || nrhs > INT32_MAX) return cudaErrorInvalidValue;
  ldl_permute_rows_kernel<D><<<grid_stride_blocks(elements, 256, 65535), 256, 0, stream>>>(
      count, static_cast<int>(n), static_cast<int>(nrhs), perm,
      reinterpret_cast<const D*>(src), reinterpret_cast<D*>(dst), gather);
  return cudaGetLastError();
}

template <typename T>
cudaError_t ldl_solve_diagonal(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                               const T* ld, const int* kind, T* y) {
  using D = typename device_type<T>::type;
  const int64_t elements = count * n * nrhs;
  if (elements <= 0) return cudaSuccess;
  if (n > INT32_MAX || nrhs > INT32_MAX) return cudaErrorInvalidValue;
  ldl_diag_solve_kernel<D><<<grid_stride_blocks(elements, 256, 65535), 256, 0, stream>>>(
      count, static_cast<int>(n), static_cast<int>(nrhs), reinterpret_cast<const D*>(ld), kind,
      reinterpret_cast<D*>(y));
  return cudaGetLastError();
}

#define JCM_LDL_SOLVE_KERNELS(T)                                                                \
  template cudaError_t sytrs_lower_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, const T*,  \
                                              const int64_t*, T*);                              \
  template cudaError_t sytrs_lower_blocked_forward<T>(cudaStream_t, int64_t, int64_t, int64_t,  \
                                                      int64_t, int64_t, const T*,               \
                                                      const int64_t*, T*, T*);                  \
  template cudaError_t sytrs_lower_blocked_backward<T>(cudaStream_t, int64_t, int64_t, int64_t, \
                                                       int64_t, int64_t, bool, const T*,        \
                                                       const int64_t*, T*, const T*);           \
  template cudaError_t ldl_solve_convert<T>(cudaStream_t, int64_t, int64_t, const T*,           \
                                            const int64_t*, T*, int*, int*, int2*);             \
  template bool ldl_solve_convert_fits<T>(int64_t);                                             \
  template cudaError_t ldl_solve_permute<T>(cudaStream_t, int64_t, int64_t, int64_t, const int*, \
                                            const T*, T*, bool);                                \
  template cudaError_t ldl_solve_diagonal<T>(cudaStream_t, int64_t, int64_t, int64_t, const T*, \
                                             const int*, T*);
JCM_LDL_SOLVE_KERNELS(float)
JCM_LDL_SOLVE_KERNELS(double)
JCM_LDL_SOLVE_KERNELS(cuComplex)
JCM_LDL_SOLVE_KERNELS(cuDoubleComplex)
#undef JCM_LDL_SOLVE_KERNELS

}  // namespace jcm
