#include "ldl_kernels.h"

#include "kernel_util.cuh"

#include <climits>
#include <cmath>
#include <cstdint>

namespace jcm {

namespace {

using namespace kernel;

// LAPACK's pivot magnitude: |x| for real, |re| + |im| (CABS1) for complex.
__device__ inline float abs1(float x) { return fabsf(x); }
__device__ inline double abs1(double x) { return fabs(x); }
template <typename R>
__device__ inline R abs1(cuda::std::complex<R> x) {
  return abs(x.real()) + abs(x.imag());
}

// The largest abs1(x[i * stride]) over i in [begin, end) and its first index, on every thread
// of the block (LAPACK's i?amax: ties go to the smallest index; NaN never wins). An empty range
// (or all NaN) gives value 0 and index `begin`. Starts and ends with a barrier.
template <typename T, typename R>
__device__ void block_argmax(const T* x, int64_t stride, int begin, int end, R* value,
                             int* index) {
  __shared__ R warp_value[kWarps];
  __shared__ int warp_index[kWarps];
  R best = -1;
  int best_i = begin;
  for (int i = begin + threadIdx.x; i < end; i += blockDim.x) {
    R v = abs1(x[i * stride]);
    if (v > best) best = v, best_i = i;  // strictly greater: this thread's first maximum
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    R v = __shfl_down_sync(0xffffffffu, best, offset);
    int i = __shfl_down_sync(0xffffffffu, best_i, offset);
    if (v > best || (v == best && i < best_i)) best = v, best_i = i;
  }
  __syncthreads();  // the previous call's readers are done with the shared slots
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_value[warp] = best, warp_index[warp] = best_i;
  __syncthreads();
  best = warp_value[0];
  best_i = warp_index[0];
  for (int w = 1; w < kWarps; ++w) {
    R v = warp_value[w];
    int i = warp_index[w];
    if (v > best || (v == best && i < best_i)) best = v, best_i = i;
  }
  *value = best < 0 ? R(0) : best;
  *index = best < 0 ? begin : best_i;
  __syncthreads();
}

// One block factors one matrix (column-major, A(i, j) = a[i + j n]), following LAPACK ?sytf2
// step by step; every thread takes the same pivot decisions from the same shared reads.
// ld_shared > 0: the matrix is worked on in shared memory (MatrixPlace), after the scratch.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    sytrf_lower_kernel(int n, int ld_shared, T* a_all, int* ipiv_all, int* info_all) {
  using R = typename real_of<T>::type;
  T* w = reinterpret_cast<T*>(dynamic_shared());  // the 2x2 step's multipliers: w[j], w[n + j]
  T* a_global = a_all + static_cast<int64_t>(blockIdx.x) * n * n;
  int* ipiv = ipiv_all + static_cast<int64_t>(blockIdx.x) * n;
  T* a = ld_shared ? w + 2 * n : a_global;
  const int lda = ld_shared ? ld_shared : n;
  if (ld_shared) copy_matrix(a, lda, a_global, n, n, n);
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * lda]; };
  const R alpha = R((1.0 + sqrt(17.0)) / 8.0);
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32;
  int info = 0;

  for (int k = 0; k < n;) {
    R colmax;
    int imax;
    block_argmax(&A(0, k), 1, k + 1, n, &colmax, &imax);
    const R absakk = abs1(A(k, k));
    int kp = k, kstep = 1;
    const bool zero_column = (absakk == R(0) && colmax == R(0)) || isnan(absakk);
    if (zero_column) {
      if (info == 0) info = k + 1;
    } else if (!(absakk >= alpha * colmax)) {
      // Row imax of the trailing matrix: A(imax, k:imax) (stride lda), then A(imax+1:n, imax).
      R rowmax, below;
      int unused;
      block_argmax(&A(imax, 0), lda, k, imax, &rowmax, &unused);
      block_argmax(&A(0, imax), 1, imax + 1, n, &below, &unused);
      rowmax = rowmax > below ? rowmax : below;
      if (absakk >= alpha * colmax * (colmax / rowmax)) {
        kp = k;
      } else if (abs1(A(imax, imax)) >= alpha * rowmax) {
        kp = imax;
      } else {
        kp = imax;
        kstep = 2;
      }
    }
    __syncthreads();  // every thread has read what decides the step before anything moves

    if (!zero_column) {
      const int kk = k + kstep - 1;
      if (kp != kk) {
        // Interchange rows and columns kk and kp of the trailing matrix (lower triangle). The
        // four sets of swapped pairs are disjoint: one parallel pass.
        for (int i = kp + 1 + tid; i < n; i += nthreads) {
          T t = A(i, kk);
          A(i, kk) = A(i, kp);
          A(i, kp) = t;
        }
        for (int j = kk + 1 + tid; j < kp; j += nthreads) {
          T t = A(j, kk);
          A(j, kk) = A(kp, j);
          A(kp, j) = t;
        }
        if (tid == 0) {
          T t = A(kk, kk);
          A(kk, kk) = A(kp, kp);
          A(kp, kp) = t;
          if (kstep == 2) {
            t = A(k + 1, k);
            A(k + 1, k) = A(kp, k);
            A(kp, k) = t;
          }
        }
        __syncthreads();
      }
      // The trailing update, one warp per column j of the lower triangle, in ?syr's order
      // (A(i, j) + x_i (-x_j / D)), then column k (or k, k+1) becomes L's.
      if (kstep == 1 && k + 1 < n) {
        // A(k+1:n, k+1:n) -= x x^T / D, x = A(k+1:n, k) (no conjugation: complex symmetric).
        const T r1 = T(1) / A(k, k);
        for (int j = k + 1 + warp; j < n; j += kWarps) {
          const T xj = r1 * A(j, k);
          for (int i = j + lane; i < n; i += 32) A(i, j) -= A(i, k) * xj;
        }
        __syncthreads();
        for (int i = k + 1 + tid; i < n; i += nthreads) A(i, k) *= r1;
      } else if (kstep == 2 && k + 2 < n) {
        // ?sytf2's 2x2 step: the multipliers W = A(k+2:n, k:k+2) D^-1 from the old columns,
        // then A(k+2:n, k+2:n) -= A(:, k:k+2) W^T, then the columns become W.
        T d21 = A(k + 1, k);
        const T d11 = A(k + 1, k + 1) / d21;
        const T d22 = A(k, k) / d21;
        const T t = T(1) / (d11 * d22 - T(1));
        d21 = t / d21;
        for (int j = k + 2 + tid; j < n; j += nthreads) {
          w[j] = d21 * (d11 * A(j, k) - A(j, k + 1));
          w[n + j] = d21 * (d22 * A(j, k + 1) - A(j, k));
        }
        __syncthreads();
        for (int j = k + 2 + warp; j < n; j += kWarps) {
          const T wk = w[j], wkp1 = w[n + j];
          for (int i = j + lane; i < n; i += 32) {
            A(i, j) = A(i, j) - A(i, k) * wk - A(i, k + 1) * wkp1;
          }
        }
        __syncthreads();
        for (int j = k + 2 + tid; j < n; j += nthreads) {
          A(j, k) = w[j];
          A(j, k + 1) = w[n + j];
        }
      }
    }
    if (tid == 0) {
      if (kstep == 1) {
        ipiv[k] = kp + 1;
      } else {
        ipiv[k] = ipiv[k + 1] = -(kp + 1);
      }
    }
    k += kstep;
    __syncthreads();
  }
  if (tid == 0) info_all[blockIdx.x] = info;
  if (ld_shared) copy_matrix(a_global, n, a, lda, n, n);
}

// Block (matrix, chunk of up to kRhsPerBlock right-hand sides) solves with LAPACK ?sytrs's
// sequence for UPLO = 'L': forward through the pivots with L and D, then back with L^T.
constexpr int kRhsPerBlock = 32;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    sytrs_lower_kernel(int n, int nrhs, const T* ld_all, const int64_t* ipiv_all, T* b_all) {
  const T* a = ld_all + static_cast<int64_t>(blockIdx.x) * n * n;
  const int64_t* ipiv = ipiv_all + static_cast<int64_t>(blockIdx.x) * n;
  const int c0 = blockIdx.y * kRhsPerBlock;
  const int cols = min(kRhsPerBlock, nrhs - c0);
  T* b = b_all + static_cast<int64_t>(blockIdx.x) * n * nrhs + static_cast<int64_t>(c0) * n;
  auto A = [&](int i, int j) -> const T& { return a[i + static_cast<int64_t>(j) * n]; };
  auto B = [&](int i, int c) -> T& { return b[i + static_cast<int64_t>(c) * n]; };
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int warp = tid / 32, lane = tid % 32;
  // A pivot out of [1, n] is no interchange: never an out-of-bounds access.
  auto target = [&](int64_t p) -> int { return p >= 1 && p <= n ? static_cast<int>(p - 1) : -1; };
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
    const int64_t p = ipiv[k];
    if (p > 0) {
      swap_rows(k, target(p));
      __syncthreads();
      for (int c = warp; c < cols; c += kWarps) {
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
      for (int c = warp; c < cols; c += kWarps) {
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
    const int64_t p = ipiv[k];
    const bool two = p < 0 && k >= 1;
    for (int c = warp; c < cols; c += kWarps) {
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
}

}  // namespace

template <typename T>
cudaError_t sytrf_lower_batched(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                                int* info) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > kLdlKernelMaxN || count > INT32_MAX) return cudaErrorInvalidValue;
  const MatrixPlace place = place_matrix(n, n, sizeof(D), 2 * n * sizeof(D));
  if (cudaError_t err = allow_shared(sytrf_lower_kernel<D>, place.smem_bytes); err != cudaSuccess) {
    return err;
  }
  sytrf_lower_kernel<D><<<static_cast<unsigned>(count), kThreads, place.smem_bytes, stream>>>(
      static_cast<int>(n), place.ld_shared, reinterpret_cast<D*>(a), ipiv, info);
  return cudaGetLastError();
}

template <typename T>
cudaError_t sytrs_lower_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                                const T* ld, const int64_t* ipiv, T* b) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0 || nrhs <= 0) return cudaSuccess;
  const int64_t chunks = (nrhs + kRhsPerBlock - 1) / kRhsPerBlock;
  if (n > kLdlKernelMaxN || count > INT32_MAX || chunks > 65535) return cudaErrorInvalidValue;
  dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(chunks));
  sytrs_lower_kernel<D><<<grid, kThreads, 0, stream>>>(
      static_cast<int>(n), static_cast<int>(nrhs), reinterpret_cast<const D*>(ld), ipiv,
      reinterpret_cast<D*>(b));
  return cudaGetLastError();
}

#define JCM_LDL_KERNELS(T)                                                                     \
  template cudaError_t sytrf_lower_batched<T>(cudaStream_t, int64_t, int64_t, T*, int*, int*); \
  template cudaError_t sytrs_lower_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, const T*, \
                                              const int64_t*, T*);
JCM_LDL_KERNELS(float)
JCM_LDL_KERNELS(double)
JCM_LDL_KERNELS(cuComplex)
JCM_LDL_KERNELS(cuDoubleComplex)
#undef JCM_LDL_KERNELS

}  // namespace jcm
