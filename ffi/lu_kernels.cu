#include "lu_kernels.h"

#include "kernel_util.cuh"

#include <cuda/std/limits>

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

// Panel widths up to this solve U12's columns in registers.
constexpr int kRegisterSolve = 32;

// One thread per (column outside the panel, matrix): the panel's interchanges in order. The
// column's rows j0 .. j0 + jb sit in a few sectors that stay in L1 across the swaps. `solve`:
// then, right of the panel, U12 = L11^-1 A12 on the column's rows j0 .. j0 + jb (L11 unit lower,
// the panel's top; no thread writes the panel, so reading it here is race-free).
template <typename T>
__global__ void laswp_outside_kernel(int n, int j0, int jb, bool solve, T* a_all,
                                     const int* ipiv_all) {
  const int64_t item = blockIdx.x;
  const int t = blockIdx.y * blockDim.x + threadIdx.x;
  if (t >= n - jb) return;
  const int col = t < j0 ? t : t + jb;
  T* a = a_all + item * n * n;
  T* column = a + static_cast<int64_t>(col) * n;
  const int* ipiv = ipiv_all + item * n;
  for (int k = j0; k < j0 + jb; ++k) {
    const int r = ipiv[k] - 1;
    if (r != k) {
      const T x = column[k];
      column[k] = column[r];
      column[r] = x;
    }
  }
  if (!solve || col < j0 + jb) return;
  const T* l11 = a + static_cast<int64_t>(j0) * (n + 1);  // L(j0 + k, j0 + i) = l11[k + i n]
  T* x = column + j0;
  if (jb <= kRegisterSolve) {  // the column in registers (the default panel width)
    T xr[kRegisterSolve];
#pragma unroll
    for (int k = 0; k < kRegisterSolve; ++k) xr[k] = k < jb ? x[k] : T(0);
#pragma unroll
    for (int i = 0; i < kRegisterSolve; ++i) {
#pragma unroll
      for (int k = i + 1; k < kRegisterSolve; ++k) {
        if (k < jb) xr[k] -= l11[k + static_cast<int64_t>(i) * n] * xr[i];
      }
    }
#pragma unroll
    for (int k = 0; k < kRegisterSolve; ++k) {
      if (k < jb) x[k] = xr[k];
    }
    return;
  }
  for (int i = 0; i < jb; ++i) {
    const T xi = x[i];
    for (int k = i + 1; k < jb; ++k) x[k] -= l11[k + static_cast<int64_t>(i) * n] * xi;
  }
}

template <typename D>
cudaError_t launch_laswp(cudaStream_t stream, int64_t count, int64_t n, int64_t j0, int64_t jb,
                         bool solve, D* a, const int* ipiv) {
  if (count <= 0 || n <= jb) return cudaSuccess;
  const int64_t column_blocks = (n - jb + kThreads - 1) / kThreads;
  if (j0 < 0 || jb <= 0 || j0 + jb > n || n > INT32_MAX || count > INT32_MAX ||
      column_blocks > 65535) {
    return cudaErrorInvalidValue;
  }
  dim3 grid(static_cast<unsigned>(count), static_cast<unsigned>(column_blocks));
  laswp_outside_kernel<D><<<grid, kThreads, 0, stream>>>(
      static_cast<int>(n), static_cast<int>(j0), static_cast<int>(jb), solve, a, ipiv);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t getf2_panel_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t j0,
                                int64_t jb, T* a, int* ipiv, int* info, int threads) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0 || jb <= 0) return cudaSuccess;
  if (j0 < 0 || j0 + jb > n || jb > kLuMaxBlock || n > INT32_MAX || count > INT32_MAX ||
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
  return launch_laswp(stream, count, n, j0, jb, false, reinterpret_cast<D*>(a), ipiv);
}

template <typename T>
cudaError_t laswp_trsm_outside_panel_batched(cudaStream_t stream, int64_t count, int64_t n,
                                             int64_t j0, int64_t jb, T* a, const int* ipiv) {
  using D = typename device_type<T>::type;
  return launch_laswp(stream, count, n, j0, jb, true, reinterpret_cast<D*>(a), ipiv);
}

#define JCM_LU_KERNELS(T)                                                                      \
  template cudaError_t getf2_panel_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, int64_t, \
                                              T*, int*, int*, int);                            \
  template cudaError_t laswp_outside_panel_batched<T>(cudaStream_t, int64_t, int64_t, int64_t,  \
                                                      int64_t, T*, const int*);                 \
  template cudaError_t laswp_trsm_outside_panel_batched<T>(cudaStream_t, int64_t, int64_t,      \
                                                           int64_t, int64_t, T*, const int*);
JCM_LU_KERNELS(float)
JCM_LU_KERNELS(double)
JCM_LU_KERNELS(cuComplex)
JCM_LU_KERNELS(cuDoubleComplex)
#undef JCM_LU_KERNELS

}  // namespace jcm
