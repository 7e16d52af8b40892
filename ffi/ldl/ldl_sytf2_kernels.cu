// The unblocked LDL^T factorization (LAPACK ?sytf2, lower) with one thread block a matrix: the
// batched factor for kLdlSmallBlockMaxN < n <= kLdlKernelMaxN, and the blocked factorization's
// last columns.
#include "ldl/ldl_device.cuh"
#include "ldl/ldl_kernels.h"

#include "core/kernel_util.cuh"

#include <cstdint>

namespace jcm {

namespace {

using namespace kernel;
using namespace ldl;

// One block factors one matrix (column-major, A(i, j) = a[i + j n]), following LAPACK ?sytf2
// step by step; every thread takes the same pivot decisions from the same shared reads.
// ld_shared > 0: the matrix is worked on in shared memory (MatrixPlace), after the scratch.
//
// start_all != nullptr: the blocked factorization's tail. Matrix b is factored from its own
// column start_all[b] on (the trailing (n - start) x (n - start) matrix, m_max >= n - start),
// pivots and info in the whole matrix's numbering, info kept where a panel already set it.
template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    sytrf_lower_kernel(int n_all, int m_max, int ld_shared, const int* start_all, T* a_all,
                       int* ipiv_all, int* info_all) {
  using R = typename real_of<T>::type;
  T* w = reinterpret_cast<T*>(dynamic_shared());  // the 2x2 step's multipliers: w[j], w[m_max + j]
  const int start = start_all ? start_all[blockIdx.x] : 0;
  const int n = n_all - start;  // the order of the matrix factored here
  T* a_global = a_all + static_cast<int64_t>(blockIdx.x) * n_all * n_all +
                static_cast<int64_t>(start) * (n_all + 1);
  int* ipiv = ipiv_all + static_cast<int64_t>(blockIdx.x) * n_all + start;
  T* a = ld_shared ? w + 2 * m_max : a_global;
  const int lda = ld_shared ? ld_shared : n_all;
  if (ld_shared) copy_matrix(a, lda, a_global, n_all, n, n);
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * lda]; };
  const R alpha = R((1.0 + sqrt(17.0)) / 8.0);
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32;
  const int nwarps = nthreads / 32;
  int info = 0;
  // The next column's largest entry below the diagonal, found by the warp that updates that
  // column (warp 0 takes it first) while it updates it: saves a pass and two barriers per step.
  __shared__ R next_max;
  __shared__ int next_index;
  bool next_known = false;  // the same on every thread
  // Column j's update by one warp, A(i, j) = update(i) for i >= j; `track`: j is the next
  // step's column, whose largest |A(i, j)|, i > j, goes to next_max / next_index as
  // block_argmax would find it (first index on ties, NaN never wins, none: 0 at j + 1).
  auto update_column = [&](int j, bool track, auto update) {
    if (!track) {
      for (int i = j + lane; i < n; i += 32) A(i, j) = update(i);
      return;
    }
    R best = -1;
    int best_i = j + 1;
    for (int i = j + lane; i < n; i += 32) {
      const T v = update(i);
      A(i, j) = v;
      if (i > j && abs1(v) > best) best = abs1(v), best_i = i;
    }
    warp_argmax(best, best_i);
    if (lane == 0) next_max = best < 0 ? R(0) : best, next_index = best < 0 ? j + 1 : best_i;
  };

  // The two searches of a step need no barriers of their own (block_argmax<false>): each call
  // site's slots are its own, the step's last barrier comes between a call site's calls, and the
  // one below between the searches' reads and the step's writes (14 -> 10 barriers in the PTX;
  // H100 256 x 64 float32 0.144 -> 0.128 ms, float64 0.161 -> 0.137: the H100 report).
  for (int k = 0; k < n;) {
    R colmax;
    int imax;
    if (next_known) {
      colmax = next_max, imax = next_index;
    } else {
      block_argmax<false>(k + 1, n, [&](int i) { return abs1(A(i, k)); }, &colmax, &imax);
    }
    next_known = false;
    const R absakk = abs1(A(k, k));
    int kp = k, kstep = 1;
    const bool zero_column = nothing_to_pivot(absakk, colmax, k, &info);
    if (!zero_column && !(absakk >= alpha * colmax)) {
      // Row imax of the trailing matrix but its diagonal: A(imax, k:imax), A(imax+1:n, imax).
      R rowmax;
      int unused;
      block_argmax<false>(k, n, [&](int i) {
        return i < imax ? abs1(A(imax, i)) : i > imax ? abs1(A(i, imax)) : R(-1);
      }, &rowmax, &unused);
      bunch_kaufman_pivot(absakk, colmax, rowmax, alpha, k, imax,
                          [&] { return abs1(A(imax, imax)); }, &kp, &kstep);
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
        for (int j = k + 1 + warp; j < n; j += nwarps) {
          const T xj = r1 * A(j, k);
          update_column(j, j == k + 1, [&](int i) { return A(i, j) - A(i, k) * xj; });
        }
        next_known = true;
        __syncthreads();
        for (int i = k + 1 + tid; i < n; i += nthreads) A(i, k) *= r1;
      } else if (kstep == 2 && k + 2 < n) {
        // ?sytf2's 2x2 step: the multipliers W = A(k+2:n, k:k+2) D^-1 from the old columns,
        // then A(k+2:n, k+2:n) -= A(:, k:k+2) W^T, then the columns become W.
        const TwoByTwoPivot<T> d(A(k, k), A(k + 1, k), A(k + 1, k + 1));
        for (int j = k + 2 + tid; j < n; j += nthreads) {
          w[j] = d.first(A(j, k), A(j, k + 1));
          w[m_max + j] = d.second(A(j, k), A(j, k + 1));
        }
        __syncthreads();
        for (int j = k + 2 + warp; j < n; j += nwarps) {
          const T wk = w[j], wkp1 = w[m_max + j];
          update_column(j, j == k + 2,
                        [&](int i) { return A(i, j) - A(i, k) * wk - A(i, k + 1) * wkp1; });
        }
        next_known = true;
        __syncthreads();
        for (int j = k + 2 + tid; j < n; j += nthreads) {
          A(j, k) = w[j];
          A(j, k + 1) = w[m_max + j];
        }
      }
    }
    if (tid == 0) record_pivot(ipiv, k, kp, kstep, start);
    k += kstep;
    // No barrier here: what a step writes after its last barrier (column k scaled, a 2x2 step's
    // columns from w) the next step neither reads nor writes before its own first barrier; its
    // searches read columns from k + 1 on, written before this step's last barrier.
  }
  __syncthreads();  // the last step's writes before the copy out
  if (tid == 0) {
    if (!start_all) {
      info_all[blockIdx.x] = info;
    } else if (info != 0 && info_all[blockIdx.x] == 0) {
      info_all[blockIdx.x] = start + info;
    }
  }
  if (ld_shared) copy_matrix(a_global, n_all, a, lda, n, n);
}

template <typename D>
cudaError_t launch_sytf2(cudaStream_t stream, int64_t count, int64_t n, int64_t m_max,
                         const int* start, D* a, int* ipiv, int* info, int threads) {
  if (count <= 0 || n <= 0 || m_max <= 0) return cudaSuccess;
  if (m_max > kLdlKernelMaxN || m_max > n || n > INT32_MAX || count > INT32_MAX ||
      !valid_threads(threads)) {
    return cudaErrorInvalidValue;
  }
  const MatrixPlace place = place_matrix(m_max, m_max, sizeof(D), 2 * m_max * sizeof(D));
  if (cudaError_t err = allow_shared(sytrf_lower_kernel<D>, place.smem_bytes); err != cudaSuccess) {
    return err;
  }
  sytrf_lower_kernel<D><<<static_cast<unsigned>(count), threads, place.smem_bytes, stream>>>(
      static_cast<int>(n), static_cast<int>(m_max), place.ld_shared, start, a, ipiv, info);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t sytrf_lower_batched(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                                int* info, int threads) {
  using D = typename device_type<T>::type;
  return launch_sytf2(stream, count, n, n, nullptr, reinterpret_cast<D*>(a), ipiv, info,
                      threads);
}

template <typename T>
cudaError_t sytf2_lower_tail_batched(cudaStream_t stream, int64_t count, int64_t n,
                                     int64_t m_max, const int* start, T* a, int* ipiv,
                                     int* info, int threads) {
  using D = typename device_type<T>::type;
  return launch_sytf2(stream, count, n, m_max, start, reinterpret_cast<D*>(a), ipiv, info,
                      threads);
}

#define JCM_LDL_SYTF2_KERNELS(T)                                                                \
  template cudaError_t sytrf_lower_batched<T>(cudaStream_t, int64_t, int64_t, T*, int*, int*,   \
                                              int);                                             \
  template cudaError_t sytf2_lower_tail_batched<T>(cudaStream_t, int64_t, int64_t, int64_t,     \
                                                   const int*, T*, int*, int*, int);
JCM_LDL_SYTF2_KERNELS(float)
JCM_LDL_SYTF2_KERNELS(double)
JCM_LDL_SYTF2_KERNELS(cuComplex)
JCM_LDL_SYTF2_KERNELS(cuDoubleComplex)
#undef JCM_LDL_SYTF2_KERNELS

}  // namespace jcm
