#include "lu/lu_kernels.h"

#include "core/kernel_util.cuh"

#include <cuda/std/limits>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

namespace jcm {

namespace {

using namespace kernel;

__device__ inline float modulus(float x) { return fabsf(x); }
__device__ inline double modulus(double x) { return fabs(x); }
template <typename R>
__device__ inline R modulus(cuda::std::complex<R> x) {
  return cuda::std::abs(x);
}

// One block per matrix, LAPACK ?getf2 column by column on the m x jb panel (m = n - j0): the
// pivot (i?amax: first largest |re| + |im|, NaN never wins), the swap within the panel, the
// column scaled by the pivot's reciprocal (divided, below LAPACK's safe minimum) and the rank-1
// update of the panel's later columns, fused in one pass over the rows. Every thread takes the
// same decisions from the same reads. ld_shared > 0: the panel is worked on in shared memory.
template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    getf2_panel_kernel(int n, int j0, int jb, int ld_shared, T* a_all, int* ipiv_all,
                       int* info_all) {
  using R = typename real_of<T>::type;
  const int64_t item = blockIdx.x;
  T* panel_global = a_all + item * n * n + static_cast<int64_t>(j0) * (n + 1);
  int* ipiv = ipiv_all + item * n;
  const int m = n - j0;
  T* p = ld_shared ? reinterpret_cast<T*>(dynamic_shared()) : panel_global;
  const int ldp = ld_shared ? ld_shared : n;
  if (ld_shared) copy_matrix(p, ldp, panel_global, n, m, jb);
  auto P = [&](int i, int k) -> T& { return p[i + static_cast<int64_t>(k) * ldp]; };
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const R sfmin = cuda::std::numeric_limits<R>::min();
  int info = info_all[item];

  for (int c = 0; c < jb && c < m; ++c) {
    R largest;
    int ip;
    block_argmax(c, m, [&](int i) { return abs1(P(i, c)); }, &largest, &ip);
    const T pivot = P(ip, c);
    if (tid == 0) ipiv[j0 + c] = j0 + ip + 1;
    const bool nonzero = pivot != T(0);
    __syncthreads();  // every thread has read the pivot before the swap moves it
    if (nonzero && ip != c) {
      for (int k = tid; k < jb; k += nthreads) {
        const T t = P(c, k);
        P(c, k) = P(ip, k);
        P(ip, k) = t;
      }
    } else if (!nonzero && info == 0) {
      info = j0 + c + 1;  // LAPACK goes on: the column stays, the update subtracts zeros
    }
    __syncthreads();  // row c is final before every thread reads it
    const bool reciprocal = nonzero && !(modulus(pivot) < sfmin);
    const T r = reciprocal ? T(1) / pivot : T(1);
    for (int i = c + 1 + tid; i < m; i += nthreads) {
      T l = P(i, c);
      if (nonzero) l = reciprocal ? l * r : l / pivot;
      P(i, c) = l;
      for (int k = c + 1; k < jb; ++k) P(i, k) -= l * P(c, k);
    }
    __syncthreads();  // the panel is up to date before the next column's search reads it
  }
  if (ld_shared) copy_matrix(panel_global, n, p, ldp, m, jb);
  if (tid == 0) info_all[item] = info;
}

// One block per matrix, the whole matrix in shared memory: LU with partial pivoting in one launch
// (getrf_small_batched). Rows are never moved: a pivoted row is marked done and the logical
// order (LAPACK's swaps, needed for its pivots and its ties) is kept as each row's position, so a
// step is the pivot search and one pass of updates, and one barrier. Every warp finds the pivot
// itself (lane l looks after rows l and l + 32), so all threads take the same decisions without
// a barrier; thread (r, c) updates row r in columns k + 1 + c, k + 1 + c + cols_per_pass, ...
// Column k's multipliers are written during step k + 1: step k's updates read that column as it
// was. Ends with lu(i, :) = the row pivoted at step i.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    getrf_small_kernel(int n, int cols_per_pass, const T* a_all, T* lu_all, int* pivots_all,
                       int* permutation_all) {
  using R = typename real_of<T>::type;
  __shared__ int row_of_step[limits::kGetrfSmallMaxN];  // the permutation
  __shared__ int pivot_of_step[limits::kGetrfSmallMaxN];
  const int64_t item = blockIdx.x;
  const int size = n * n;
  const T* a = a_all + item * size;
  T* lu = lu_all + item * size;
  int* pivots = pivots_all + item * n;
  int* permutation = permutation_all + item * n;
  T* s = reinterpret_cast<T*>(dynamic_shared());
  const int tid = threadIdx.x, nthreads = blockDim.x, lane = tid % 32;

  bool finite = true;
  for (int e = tid; e < size; e += nthreads) {
    const T x = a[e];
    s[e] = x;
    finite = finite && isfinite(real_part(x)) && isfinite(imag_part(x));
  }
  if (__syncthreads_or(!finite)) {  // the same answer on every thread
    const T nan = T(cuda::std::numeric_limits<R>::quiet_NaN());
    for (int e = tid; e < size; e += nthreads) lu[e] = nan;
    for (int i = tid; i < n; i += nthreads) pivots[i] = i, permutation[i] = i;
    return;
  }

  const R sfmin = cuda::std::numeric_limits<R>::min();
  const int row = tid % n, col0 = tid / n;
  const bool updates = col0 < cols_per_pass;  // threads past n * cols_per_pass only search
  int position_lo = lane, position_hi = lane + 32;  // logical places of rows lane, lane + 32
  uint64_t done = 0;                                // rows pivoted so far
  bool last_nonzero = false, last_reciprocal = false;
  T last_pivot = T(1), last_inverse = T(1);
  for (int k = 0; k < n; ++k) {
    // i?amax over the rows not pivoted yet, in logical order: NaN never wins (all NaN: the
    // first), ties go to the first place.
    R best = R(-2);
    int best_place = n, best_row = 0;
    auto consider = [&](int r, int place) {
      if (r >= n || ((done >> r) & 1)) return;
      R v = abs1(s[r + k * n]);
      if (!(v == v)) v = R(-1);
      if (v > best || (v == best && place < best_place)) best = v, best_place = place, best_row = r;
    };
    consider(lane, position_lo);
    consider(lane + 32, position_hi);
    for (int offset = 16; offset > 0; offset /= 2) {
      const R v = __shfl_xor_sync(0xffffffffu, best, offset);
      const int place = __shfl_xor_sync(0xffffffffu, best_place, offset);
      const int r = __shfl_xor_sync(0xffffffffu, best_row, offset);
      if (v > best || (v == best && place < best_place)) best = v, best_place = place, best_row = r;
    }
    const T pivot = s[best_row + k * n];
    const bool nonzero = pivot != T(0);  // LAPACK goes on past a zero pivot: nothing to update
    const bool reciprocal = nonzero && !(modulus(pivot) < sfmin);
    const T inverse = reciprocal ? T(1) / pivot : T(1);
    if (k > 0 && last_nonzero && tid < n && !((done >> tid) & 1)) {
      T& l = s[tid + (k - 1) * n];
      l = last_reciprocal ? l * last_inverse : l / last_pivot;
    }
    if (updates && nonzero && row != best_row && !((done >> row) & 1)) {
      const T x = s[row + k * n];
      const T l = reciprocal ? x * inverse : x / pivot;
      for (int j = k + 1 + col0; j < n; j += cols_per_pass) {
        s[row + j * n] -= l * s[best_row + j * n];
      }
    }
    if (tid == 0) row_of_step[k] = best_row, pivot_of_step[k] = best_place;
    // LAPACK swaps logical rows k and best_place: the row at place k moves there.
    if (position_lo == k) position_lo = best_place;
    if (position_hi == k) position_hi = best_place;
    done |= uint64_t{1} << best_row;
    last_nonzero = nonzero, last_reciprocal = reciprocal;
    last_pivot = pivot, last_inverse = inverse;
    __syncthreads();
  }
  for (int e = tid; e < size; e += nthreads) lu[e] = s[row_of_step[e % n] + (e / n) * n];
  for (int i = tid; i < n; i += nthreads) {
    pivots[i] = pivot_of_step[i];
    permutation[i] = row_of_step[i];
  }
}

// One block per system (getrs_small_batched): L U to shared memory, then each warp solves its
// right-hand sides, loaded straight from b (rows permuted for op = A), lane l holding rows l and
// l + 32 in registers: a triangular solve is n steps of one shuffle (the solved entry to every
// lane) and one update per lane, no barrier. LAPACK's order: A = P^T L U, so A x = b is
// L U x = P b, and A^T x = b is U^T L^T (P x) = b.
template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    getrs_small_kernel(int n, int nrhs, int trans, const T* lu_all, const int* pivots_all,
                       const T* b_all, T* x_all) {
  __shared__ int row_at[limits::kGetrfSmallMaxN];  // A[row_at] = L U
  if (threadIdx.x == 0) {
    const int* pivots = pivots_all + static_cast<int64_t>(blockIdx.x) * n;
    for (int i = 0; i < n; ++i) row_at[i] = i;
    for (int k = 0; k < n; ++k) {
      const int p = min(max(pivots[k], 0), n - 1);  // a bad pivot never indexes out of bounds
      const int t = row_at[k];
      row_at[k] = row_at[p];
      row_at[p] = t;
    }
  }
  const BlockSystem<T> sys = load_block_system(n, nrhs, lu_all, b_all, x_all);  // a barrier
  auto L = [&](int i, int k) { return sys.factor[i + k * n]; };
  auto op_transposed = [&](int i, int k) {  // op(L U)'s factors read transposed: op(A)(i, k)
    const T v = sys.factor[k + i * n];
    return trans == 2 ? conj_of(v) : v;
  };
  // P b in, x out for A x = b; b in, P^T x out for op(A) x = b.
  auto row = [&](int i) { return row_at[i]; };
  auto same = [](int i) { return i; };
  for (int j = threadIdx.x / 32; j < nrhs; j += blockDim.x / 32) {
    const int64_t column = static_cast<int64_t>(j) * n;
    T y[2];
    if (trans == 0) {
      warp_load_column(n, sys.b + column, row, y);
      warp_solve_lower(n, y, L, true);   // L y = P b, L unit lower
      warp_solve_upper(n, y, L, false);  // U x = y
      warp_store_column(n, sys.x + column, same, y);
    } else {
      warp_load_column(n, sys.b + column, same, y);
      warp_solve_lower(n, y, op_transposed, false);  // op(U) z = b, op(U) lower
      warp_solve_upper(n, y, op_transposed, true);   // op(L) w = z, op(L) unit upper
      warp_store_column(n, sys.x + column, row, y);
    }
  }
}

// n <= kLuTinyMaxN (getrf_small_batched): a thread per matrix, its entries in registers
// (a[i][j] = A(i, j)), through the stage both ways (kernel_util.cuh tiny_load). LAPACK ?getf2's
// steps and ties, as getrf_small_kernel: the pivot is the first largest |re| + |im| (NaN never
// wins), rows k and p swap across the matrix, the column below is scaled by the pivot's
// reciprocal (divided, below LAPACK's safe minimum) and the trailing block updated. A row index
// known only at run time would put the matrix in local memory: each candidate row's swap is
// predicated instead, every index a constant (a pivot outside [0, N) swaps nothing).
template <typename V, int N>
__device__ inline void swap_at(V (&v)[N], int k, int p) {
#pragma unroll
  for (int r = 0; r < N; ++r) {
    if (r != k && r == p) {
      const V t = v[k];
      v[k] = v[r];
      v[r] = t;
    }
  }
}

template <typename T, int N>
__device__ inline void swap_rows_at(T (&a)[N][N], int k, int p) {
#pragma unroll
  for (int r = 0; r < N; ++r) {
    if (r != k && r == p) {
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const T t = a[k][j];
        a[k][j] = a[r][j];
        a[r][j] = t;
      }
    }
  }
}

template <typename T, int N>
__global__ void __launch_bounds__(kTinyThreads)
    getrf_tiny_kernel(int64_t count, const T* a_all, T* lu_all, int* pivots_all,
                      int* permutation_all) {
  using R = typename real_of<T>::type;
  constexpr int kSize = N * N;
  const TinyThread<T> me = tiny_begin(count, a_all, kSize);
  T a[N][N];
  bool finite = true;
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      a[i][j] = me.active ? me.mine[i + j * N] : T(0);
      finite = finite && isfinite(real_part(a[i][j])) && isfinite(imag_part(a[i][j]));
    }
  }
  int pivots[N], permutation[N];
#pragma unroll
  for (int k = 0; k < N; ++k) pivots[k] = k, permutation[k] = k;
  const R sfmin = cuda::std::numeric_limits<R>::min();
  if (finite) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      R best = R(-2);
      int p = k;
#pragma unroll
      for (int r = k; r < N; ++r) {
        R v = abs1(a[r][k]);
        if (!(v == v)) v = R(-1);
        if (v > best) best = v, p = r;
      }
      pivots[k] = p;
      swap_rows_at(a, k, p);
      swap_at(permutation, k, p);
      const T pivot = a[k][k];
      if (pivot != T(0)) {  // LAPACK goes on past a zero pivot: nothing to update
        const bool reciprocal = !(modulus(pivot) < sfmin);
        const T inverse = reciprocal ? T(1) / pivot : T(1);
#pragma unroll
        for (int r = k + 1; r < N; ++r) {
          const T l = reciprocal ? a[r][k] * inverse : a[r][k] / pivot;
          a[r][k] = l;
#pragma unroll
          for (int j = k + 1; j < N; ++j) a[r][j] -= l * a[k][j];
        }
      }
    }
  } else {  // NaN or Inf in the matrix: NaN out, the identity pivots
    const T nan = T(cuda::std::numeric_limits<R>::quiet_NaN());
#pragma unroll
    for (int j = 0; j < N; ++j) {
#pragma unroll
      for (int i = 0; i < N; ++i) a[i][j] = nan;
    }
  }
  tiny_put(me, a);
  if (me.active) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      pivots_all[me.item() * N + k] = pivots[k];
      permutation_all[me.item() * N + k] = permutation[k];
    }
  }
  tiny_store(lu_all, me.stage, me.block, kSize);
}

// n <= kLuTinyMaxN, nrhs <= kLuTinyMaxRhs (getrs_small_batched): a thread per system, L U and
// then B through the stage into registers; getrs_small_kernel's steps. A block reads all its B
// before it writes any X, so x may alias b.
template <typename T, int N>
__global__ void __launch_bounds__(kTinyThreads)
    getrs_tiny_kernel(int64_t count, int nrhs, int trans, const T* lu_all, const int* pivots_all,
                      const T* b_all, T* x_all) {
  const TinyThread<T> me = tiny_begin(count, lu_all, N * N);
  T f[N][N];
  tiny_get(me, f, T(1));
  int pivots[N];
#pragma unroll
  for (int k = 0; k < N; ++k) pivots[k] = me.active ? pivots_all[me.item() * N + k] : k;
  __syncthreads();  // every thread holds its factor before B takes the stage
  const int size = N * nrhs;
  const TinyThread<T> rhs = tiny_begin(count, b_all, size);
  T* column = rhs.mine;
  auto op = [&](T v) { return trans == 2 ? conj_of(v) : v; };
  for (int c = 0; c < nrhs && me.active; ++c, column += N) {
    T y[N];
#pragma unroll
    for (int i = 0; i < N; ++i) y[i] = column[i];
    if (trans == 0) {  // L U x = P b
#pragma unroll
      for (int k = 0; k < N; ++k) swap_at(y, k, pivots[k]);
#pragma unroll
      for (int i = 1; i < N; ++i) {
#pragma unroll
        for (int k = 0; k < i; ++k) y[i] -= f[i][k] * y[k];
      }
#pragma unroll
      for (int i = N - 1; i >= 0; --i) {
#pragma unroll
        for (int k = i + 1; k < N; ++k) y[i] -= f[i][k] * y[k];
        y[i] = y[i] / f[i][i];
      }
    } else {  // op(U) op(L) (P x) = b
#pragma unroll
      for (int i = 0; i < N; ++i) {
#pragma unroll
        for (int k = 0; k < i; ++k) y[i] -= op(f[k][i]) * y[k];
        y[i] = y[i] / op(f[i][i]);
      }
#pragma unroll
      for (int i = N - 2; i >= 0; --i) {
#pragma unroll
        for (int k = i + 1; k < N; ++k) y[i] -= op(f[k][i]) * y[k];
      }
#pragma unroll
      for (int k = N - 1; k >= 0; --k) swap_at(y, k, pivots[k]);
    }
#pragma unroll
    for (int i = 0; i < N; ++i) column[i] = y[i];
  }
  tiny_store(x_all, rhs.stage, rhs.block, size);
}

// One thread per (column outside the panel, matrix): the panel's interchanges in order. The
// column's rows j0 .. j0 + jb sit in a few sectors that stay in L1 across the swaps.
template <typename T>
__global__ void laswp_outside_kernel(int n, int j0, int jb, T* a_all, const int* ipiv_all) {
  const int64_t item = blockIdx.x;
  const int t = blockIdx.y * blockDim.x + threadIdx.x;
  if (t >= n - jb) return;
  const int col = t < j0 ? t : t + jb;
  T* column = a_all + item * n * n + static_cast<int64_t>(col) * n;
  const int* ipiv = ipiv_all + item * n;
  for (int k = j0; k < j0 + jb; ++k) {
    const int r = ipiv[k] - 1;
    if (r != k) {
      const T x = column[k];
      column[k] = column[r];
      column[r] = x;
    }
  }
}

}  // namespace

template <typename T>
cudaError_t getf2_panel_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t j0,
                                int64_t jb, T* a, int* ipiv, int* info, int threads) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0 || jb <= 0) return cudaSuccess;
  if (j0 < 0 || j0 + jb > n || jb > limits::kLuMaxBlock || n > INT32_MAX || count > INT32_MAX ||
      !valid_threads(threads)) {
    return cudaErrorInvalidValue;
  }
  const MatrixPlace place = place_matrix(n - j0, jb, sizeof(D), 0);
  if (cudaError_t err = allow_shared(getf2_panel_kernel<D>, place.smem_bytes); err != cudaSuccess) {
    return err;
  }
  getf2_panel_kernel<D><<<static_cast<unsigned>(count), threads, place.smem_bytes, stream>>>(
      static_cast<int>(n), static_cast<int>(j0), static_cast<int>(jb), place.ld_shared,
      reinterpret_cast<D*>(a), ipiv, info);
  return cudaGetLastError();
}

template <typename T>
cudaError_t laswp_outside_panel_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t j0,
                                        int64_t jb, T* a, const int* ipiv) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= jb) return cudaSuccess;
  const int64_t column_blocks = (n - jb + kThreads - 1) / kThreads;
  if (j0 < 0 || jb <= 0 || j0 + jb > n || n > INT32_MAX || count > INT32_MAX ||
      column_blocks > 65535) {
    return cudaErrorInvalidValue;
  }
  dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(column_blocks));
  laswp_outside_kernel<D><<<grid, kThreads, 0, stream>>>(
      static_cast<int>(n), static_cast<int>(j0), static_cast<int>(jb), reinterpret_cast<D*>(a),
      ipiv);
  return cudaGetLastError();
}

template <typename T>
cudaError_t getrf_small_batched(cudaStream_t stream, int64_t count, int64_t n, const T* a, T* lu,
                                int* pivots, int* permutation) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > limits::kGetrfSmallMaxN || count > INT32_MAX) return cudaErrorInvalidValue;
  if (n <= limits::kLuTinyMaxN) {
    return with_tiny_n(n, [&](auto order) {
      constexpr int N = decltype(order)::value;
      getrf_tiny_kernel<D, N><<<tiny_blocks(count), kTinyThreads,
                                tiny_stage_bytes(N * N, sizeof(D)), stream>>>(
          count, reinterpret_cast<const D*>(a), reinterpret_cast<D*>(lu), pivots, permutation);
      return cudaGetLastError();
    });
  }
  const SmallLaunch launch = small_launch(count, static_cast<int>(n));
  const size_t smem = static_cast<size_t>(n * n) * sizeof(D);
  if (cudaError_t err = allow_shared(getrf_small_kernel<D>, smem); err != cudaSuccess) return err;
  getrf_small_kernel<D><<<static_cast<unsigned>(count), launch.threads, smem, stream>>>(
      static_cast<int>(n), launch.cols_per_pass, reinterpret_cast<const D*>(a),
      reinterpret_cast<D*>(lu), pivots, permutation);
  return cudaGetLastError();
}

template <typename T>
cudaError_t getrs_small_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                                int trans, const T* lu, const int* pivots, const T* b, T* x) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0 || nrhs <= 0) return cudaSuccess;
  if (n > limits::kGetrfSmallMaxN || nrhs > limits::kGetrsSmallMaxRhs || count > INT32_MAX ||
      trans < 0 || trans > 2) {
    return cudaErrorInvalidValue;
  }
  if (n <= limits::kLuTinyMaxN && nrhs <= limits::kLuTinyMaxRhs) {
    return with_tiny_n(n, [&](auto order) {
      constexpr int N = decltype(order)::value;
      getrs_tiny_kernel<D, N><<<tiny_blocks(count), kTinyThreads,
                                tiny_solve_stage_bytes(N, nrhs, sizeof(D)), stream>>>(
          count, static_cast<int>(nrhs), trans, reinterpret_cast<const D*>(lu), pivots,
          reinterpret_cast<const D*>(b), reinterpret_cast<D*>(x));
      return cudaGetLastError();
    });
  }
  // A warp per right-hand side, up to the block's 32: inv's n = 64 right-hand sides take two
  // solves per warp, not eight (H100 grid, inv vs JAX with 8 warps / 32: float32 64 x 64 1.44x
  // / 1.82x, float64 1 x 64 0.95x / 1.23x).
  const int threads = 32 * static_cast<int>(std::min<int64_t>(nrhs, kMaxThreads / 32));
  const size_t smem = static_cast<size_t>(n * n) * sizeof(D);
  if (cudaError_t err = allow_shared(getrs_small_kernel<D>, smem); err != cudaSuccess) return err;
  getrs_small_kernel<D><<<static_cast<unsigned>(count), threads, smem, stream>>>(
      static_cast<int>(n), static_cast<int>(nrhs), trans, reinterpret_cast<const D*>(lu), pivots,
      reinterpret_cast<const D*>(b), reinterpret_cast<D*>(x));
  return cudaGetLastError();
}

#define JCM_LU_KERNELS(T)                                                                      \
  template cudaError_t getf2_panel_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, int64_t, \
                                              T*, int*, int*, int);                            \
  template cudaError_t laswp_outside_panel_batched<T>(cudaStream_t, int64_t, int64_t, int64_t,  \
                                                      int64_t, T*, const int*);                 \
  template cudaError_t getrf_small_batched<T>(cudaStream_t, int64_t, int64_t, const T*, T*, int*, \
                                              int*);                                           \
  template cudaError_t getrs_small_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, int,       \
                                              const T*, const int*, const T*, T*);
JCM_LU_KERNELS(float)
JCM_LU_KERNELS(double)
JCM_LU_KERNELS(cuComplex)
JCM_LU_KERNELS(cuDoubleComplex)
#undef JCM_LU_KERNELS

}  // namespace jcm
