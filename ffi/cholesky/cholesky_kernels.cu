#include "cholesky/cholesky_kernels.h"

#include "core/kernel_util.cuh"

#include <cuda/std/limits>

#include <climits>
#include <cstdint>

namespace jcm {

using limits::kCholeskySmallMaxN;
using limits::kCholeskySmallMaxRhs;

namespace {

using namespace kernel;

// One block per matrix, the triangle read into shared memory as a lower one (the upper
// triangle conjugate-transposed): right-looking Cholesky, one barrier per column. Step k reads
// the pivot d = A(k, k) and column k as step k - 1 left them, and thread (row r, c) updates
// A(r, j) -= A(r, k) conj(A(j, k)) / d for j = k + 1 + c, k + 1 + c + cols_per_pass, ... up to r:
// column k's scaling by 1 / sqrt(d) is written during step k + 1, when nothing reads it. Every
// thread reads the same pivots, so a failure (d <= 0 or NaN: LAPACK's test) stops every thread
// at the same step.
template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    potrf_small_kernel(int n, int cols_per_pass, bool lower, const T* a_all, T* out_all) {
  using R = typename real_of<T>::type;
  const int64_t item = blockIdx.x;
  const int size = n * n;
  const T* a = a_all + item * size;
  T* out = out_all + item * size;
  T* s = reinterpret_cast<T*>(dynamic_shared());
  const int tid = threadIdx.x, nthreads = blockDim.x;
  for (int e = tid; e < size; e += nthreads) {
    if (lower) {
      s[e] = a[e];
    } else {
      s[e / n + (e % n) * n] = conj_of(a[e]);  // A(i, j), i <= j, as the lower (j, i)
    }
  }
  __syncthreads();

  const int row = tid % n, col0 = tid / n;
  const bool updates = col0 < cols_per_pass;
  bool failed = false;
  R last_root = R(1), last_inverse = R(1);
  for (int k = 0; k < n; ++k) {
    const R d = real_part(s[k + k * n]);  // LAPACK reads the real part of the diagonal
    if (!(d > R(0))) {
      failed = true;
      break;
    }
    const R root = sqrt(d);  // CUDA's float and double overloads
    if (k > 0 && tid >= k - 1 && tid < n) {
      T& l = s[tid + (k - 1) * n];
      l = tid == k - 1 ? T(last_root) : l * last_inverse;
    }
    if (updates && row > k) {
      const T x = s[row + k * n] / d;
      for (int j = k + 1 + col0; j <= row; j += cols_per_pass) {
        s[row + j * n] -= x * conj_of(s[j + k * n]);
      }
    }
    last_root = root, last_inverse = R(1) / root;
    __syncthreads();
  }
  if (!failed && tid == n - 1) s[tid + tid * n] = T(last_root);
  __syncthreads();
  const T nan = T(cuda::std::numeric_limits<R>::quiet_NaN());
  for (int e = tid; e < size; e += nthreads) {
    const int i = e % n, j = e / n;
    if (lower) {
      out[e] = i < j ? T(0) : (failed ? nan : s[e]);
    } else {
      out[e] = i > j ? T(0) : (failed ? nan : conj_of(s[j + i * n]));
    }
  }
}

// One block per system: c to shared memory, then each warp solves its right-hand sides with
// the rows in registers (kernel_util.cuh warp_solve_columns): L y = b, L^H x = y for the lower
// factor; U^H y = b, U x = y for the upper one. x may alias b.
template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    potrs_small_kernel(int n, int nrhs, bool lower, const T* c_all, const T* b_all, T* x_all) {
  const BlockSystem<T> sys = load_block_system(n, nrhs, c_all, b_all, x_all);
  auto stored = [&](int i, int k) { return sys.factor[i + k * n]; };
  auto adjoint = [&](int i, int k) { return conj_of(sys.factor[k + i * n]); };
  warp_solve_columns(n, nrhs, sys, [&](T(&y)[2]) {
    if (lower) {
      warp_solve_lower(n, y, stored, false);
      warp_solve_upper(n, y, adjoint, false);
    } else {
      warp_solve_lower(n, y, adjoint, false);
      warp_solve_upper(n, y, stored, false);
    }
  });
}

// The tiny kernels' matrix as its lower triangle, l[i][j] for i >= j (hermitian_lower_entry);
// the identity for a thread without a matrix.
template <typename T, int N>
__device__ inline void tiny_lower_triangle(const TinyThread<T>& me, bool lower, T (&l)[N][N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = j; i < N; ++i) {
      l[i][j] = me.active ? hermitian_lower_entry<N>(me.mine, lower, i, j) : T(i == j);
    }
  }
}

// n <= kCholeskyTinyMaxN (potrf_small_batched): a thread per matrix, its triangle in registers
// as a lower one (l[i][j] = A(i, j), i >= j), through the stage both ways (kernel_util.cuh
// tiny_load); potrf_small_kernel's steps and its failure test.
template <typename T, int N>
__global__ void __launch_bounds__(kTinyThreads)
    potrf_tiny_kernel(int64_t count, bool lower, const T* a_all, T* out_all) {
  using R = typename real_of<T>::type;
  constexpr int kSize = N * N;
  const TinyThread<T> me = tiny_begin(count, a_all, kSize);
  T l[N][N];
  tiny_lower_triangle(me, lower, l);
  bool failed = false;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const R d = real_part(l[k][k]);  // LAPACK reads the real part of the diagonal
    failed = failed || !(d > R(0));
    const R root = sqrt(d), inverse = R(1) / root;
#pragma unroll
    for (int i = k + 1; i < N; ++i) {
      const T x = l[i][k] / d;
#pragma unroll
      for (int j = k + 1; j <= i; ++j) l[i][j] -= x * conj_of(l[j][k]);
    }
#pragma unroll
    for (int i = k + 1; i < N; ++i) l[i][k] = l[i][k] * inverse;
    l[k][k] = T(root);
  }
  if (me.active) {
    const T nan = T(cuda::std::numeric_limits<R>::quiet_NaN());
#pragma unroll
    for (int j = 0; j < N; ++j) {
#pragma unroll
      for (int i = 0; i < N; ++i) {
        const T value = i >= j ? l[i][j] : conj_of(l[j][i]);  // lower: L(i, j); upper: U(i, j)
        const bool stored = lower ? i >= j : i <= j;
        me.mine[i + j * N] = !stored ? T(0) : failed ? nan : value;
      }
    }
  }
  tiny_store(out_all, me.stage, me.block, kSize);
}

// n <= kCholeskyTinyMaxN, nrhs <= kCholeskyTinyMaxRhs (potrs_small_batched): a thread per
// system, the factor and then B through the stage into registers; L y = b, L^H x = y (the upper
// factor read as L = U^H). A block reads all its B before it writes any X, so x may alias b.
template <typename T, int N>
__global__ void __launch_bounds__(kTinyThreads)
    potrs_tiny_kernel(int64_t count, int nrhs, bool lower, const T* c_all, const T* b_all,
                      T* x_all) {
  const TinyThread<T> me = tiny_begin(count, c_all, N * N);
  T l[N][N];
  tiny_lower_triangle(me, lower, l);
  __syncthreads();  // every thread holds its factor before B takes the stage
  const int size = N * nrhs;
  const TinyThread<T> rhs = tiny_begin(count, b_all, size);
  T* column = rhs.mine;
  for (int c = 0; c < nrhs && me.active; ++c, column += N) {
    T y[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
      y[i] = column[i];
#pragma unroll
      for (int k = 0; k < i; ++k) y[i] -= l[i][k] * y[k];
      y[i] = y[i] / l[i][i];
    }
#pragma unroll
    for (int i = N - 1; i >= 0; --i) {
#pragma unroll
      for (int k = i + 1; k < N; ++k) y[i] -= conj_of(l[k][i]) * y[k];
      y[i] = y[i] / conj_of(l[i][i]);
    }
#pragma unroll
    for (int i = 0; i < N; ++i) column[i] = y[i];
  }
  tiny_store(x_all, rhs.stage, rhs.block, size);
}

}  // namespace

template <typename T>
cudaError_t potrf_small_batched(cudaStream_t stream, int64_t count, int64_t n, bool lower,
                                const T* a, T* out) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > kCholeskySmallMaxN || count > INT32_MAX) return cudaErrorInvalidValue;
  if (n <= limits::kCholeskyTinyMaxN) {
    return with_tiny_n(n, [&](auto order) {
      constexpr int N = decltype(order)::value;
      potrf_tiny_kernel<D, N><<<tiny_blocks(count), kTinyThreads,
                                tiny_stage_bytes(N * N, sizeof(D)), stream>>>(
          count, lower, reinterpret_cast<const D*>(a), reinterpret_cast<D*>(out));
      return cudaGetLastError();
    });
  }
  const size_t smem = static_cast<size_t>(n * n) * sizeof(D);
  // Many matrices: the SM filled with threads (kernel_util.cuh small_launch).
  const SmallLaunch launch = small_launch(count, static_cast<int>(n), smem);
  if (cudaError_t err = allow_shared(potrf_small_kernel<D>, smem); err != cudaSuccess) return err;
  potrf_small_kernel<D><<<static_cast<unsigned>(count), launch.threads, smem, stream>>>(
      static_cast<int>(n), launch.cols_per_pass, lower, reinterpret_cast<const D*>(a),
      reinterpret_cast<D*>(out));
  return cudaGetLastError();
}

template <typename T>
cudaError_t potrs_small_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                                bool lower, const T* c, const T* b, T* x) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0 || nrhs <= 0) return cudaSuccess;
  if (n > kCholeskySmallMaxN || nrhs > kCholeskySmallMaxRhs || count > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  if (n <= limits::kCholeskyTinyMaxN && nrhs <= limits::kCholeskyTinyMaxRhs) {
    return with_tiny_n(n, [&](auto order) {
      constexpr int N = decltype(order)::value;
      potrs_tiny_kernel<D, N><<<tiny_blocks(count), kTinyThreads,
                                tiny_solve_stage_bytes(N, nrhs, sizeof(D)), stream>>>(
          count, static_cast<int>(nrhs), lower, reinterpret_cast<const D*>(c),
          reinterpret_cast<const D*>(b), reinterpret_cast<D*>(x));
      return cudaGetLastError();
    });
  }
  const int threads = 32 * static_cast<int>(nrhs < kMaxThreads / 32 ? nrhs : kMaxThreads / 32);
  const size_t smem = static_cast<size_t>(n * n) * sizeof(D);
  if (cudaError_t err = allow_shared(potrs_small_kernel<D>, smem); err != cudaSuccess) return err;
  potrs_small_kernel<D><<<static_cast<unsigned>(count), threads, smem, stream>>>(
      static_cast<int>(n), static_cast<int>(nrhs), lower, reinterpret_cast<const D*>(c),
      reinterpret_cast<const D*>(b), reinterpret_cast<D*>(x));
  return cudaGetLastError();
}

#define JCM_CHOLESKY_KERNELS(T)                                                             \
  template cudaError_t potrf_small_batched<T>(cudaStream_t, int64_t, int64_t, bool, const T*, \
                                              T*);                                          \
  template cudaError_t potrs_small_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, bool,  \
                                              const T*, const T*, T*);
JCM_CHOLESKY_KERNELS(float)
JCM_CHOLESKY_KERNELS(double)
JCM_CHOLESKY_KERNELS(cuComplex)
JCM_CHOLESKY_KERNELS(cuDoubleComplex)
#undef JCM_CHOLESKY_KERNELS

}  // namespace jcm
