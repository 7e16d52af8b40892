// The batched LDL^T factor for kLdlWarpMaxN < n <= kLdlSmallBlockMaxN (LAPACK ?sytf2's steps,
// lower): one block a matrix, the matrix mirrored in shared memory, one barrier a step.
// ldl_sytf2_kernels.cu's pivots, L and D to the bit.
#include "ldl/ldl_device.cuh"
#include "ldl/ldl_kernels.h"

#include "core/kernel_util.cuh"

#include <climits>
#include <cstdint>

namespace jcm {

namespace {

using namespace kernel;
using namespace ldl;

// The warp kernel's factorization (LAPACK ?sytf2: the same pivots and the same arithmetic, rows
// relabelled, never moved) with one block per matrix, n <= 32 kRows, for the sizes where a
// warp's selects and 64-bit shuffles cost more than barriers. The whole symmetric matrix sits in
// shared memory, and every warp finds the step's pivot itself from it: the same reads, so the
// same decisions, with nothing to share. A step's writes to the trailing matrix would race the
// other warps' reads of the searched columns where one of them stays in it (a 1x1 step after the
// second search), so the matrix is there twice: step s reads copy s % 2 and writes the trailing
// matrix to the other, and a step has one barrier (its end) where sytrf_lower_kernel's has
// three. Thread (lane, warp) holds rows lane + 32 i (i < kRows) of columns warp + W j (j <
// kCols), W = blockDim.x / 32, and their labels; column k of L and D goes out at the rows'
// labels of that moment, from warp k % W. (Up to n = 128 with one copy and a second barrier in
// those steps, 8 or 16 warps, it was slower than the ?sytf2 kernel: H100 float32 1 x 96 0.196 /
// 0.286 against 0.183 ms, 1 x 128 0.290 / 0.413 against 0.225; the H100 report.)
template <typename T, int kRows, int kCols>
__global__ void __launch_bounds__(32 * (32 * kRows / kCols))  // n <= 32 kRows
    sytrf_small_block_kernel(int n, T* a_all, int* ipiv_all, int* info_all) {
  using R = typename real_of<T>::type;
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int kPast = INT_MAX;  // the label of a row or column past n: never takes part
  const int size = n * n;
  T* a = a_all + static_cast<int64_t>(blockIdx.x) * size;
  int* ipiv = ipiv_all + static_cast<int64_t>(blockIdx.x) * n;
  T* copies = reinterpret_cast<T*>(dynamic_shared());  // two n x n copies, ld n
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  // The lower triangle, mirrored.
  for (int e = threadIdx.x; e < size; e += blockDim.x) {
    const int r = e % n, c = e / n;
    copies[e] = r >= c ? a[e] : a[c + r * n];
  }
  int row_label[kRows], col_label[kCols];
#pragma unroll
  for (int i = 0; i < kRows; ++i) row_label[i] = lane + 32 * i < n ? lane + 32 * i : kPast;
#pragma unroll
  for (int j = 0; j < kCols; ++j) col_label[j] = warp + warps * j < n ? warp + warps * j : kPast;
  // The physical row labelled `target` (< n: some row is).
  auto row_of = [&](int target) {
    int row = 0;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const unsigned found = __ballot_sync(kAll, row_label[i] == target);
      if (found) row = 32 * i + __ffs(found) - 1;
    }
    return row;
  };
  const R alpha = R((1.0 + sqrt(17.0)) / 8.0);
  int info = 0;
  __syncthreads();

  for (int k = 0, step = 0; k < n; ++step) {
    const T* cur = copies + (step & 1) * size;
    T* next = copies + ((step + 1) & 1) * size;
    const int p = row_of(k);
    // colmax over the rows labelled k + 1.. of column k (physical p), ties to the smaller label.
    R best = -1;
    int best_label = kPast;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      if (row_label[i] > k && row_label[i] < n) {
        const R v = abs1(cur[lane + 32 * i + p * n]);
        if (v > best || (v == best && row_label[i] < best_label)) {
          best = v, best_label = row_label[i];
        }
      }
    }
    warp_argmax_all(best, best_label);
    const R colmax = best < R(0) ? R(0) : best;
    const int imax = best < R(0) ? k + 1 : best_label;
    const R absakk = abs1(cur[p + p * n]);
    int kp = k, kstep = 1, q = p;
    const bool zero_column = nothing_to_pivot(absakk, colmax, k, &info);
    const bool second_search = !zero_column && !(absakk >= alpha * colmax);
    if (second_search) {
      // Row imax of the trailing matrix but its diagonal: column imax (physical q), labels k..
      q = row_of(imax);
      R rowmax = -1;
      int unused = 0;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int r = lane + 32 * i;
        if (row_label[i] >= k && row_label[i] < n && r != q) {
          const R v = abs1(cur[r + q * n]);
          if (v > rowmax) rowmax = v;
        }
      }
      warp_argmax_all(rowmax, unused);
      if (rowmax < R(0)) rowmax = R(0);
      bunch_kaufman_pivot(absakk, colmax, rowmax, alpha, k, imax,
                          [&] { return abs1(cur[q + q * n]); }, &kp, &kstep);
      const int kk = k + kstep - 1;
      if (kp != kk) {
        auto swapped = [&](int label) { return label == kk ? kp : label == kp ? kk : label; };
#pragma unroll
        for (int i = 0; i < kRows; ++i) row_label[i] = swapped(row_label[i]);
#pragma unroll
        for (int j = 0; j < kCols; ++j) col_label[j] = swapped(col_label[j]);
      }
    }
    // The physical rows labelled k (and k + 1) now, and their columns' entries in this thread's
    // rows and columns (read once: the compiler cannot tell the copies apart).
    const int p0 = kstep == 1 && kp != k ? q : p, p1 = q;
    const int done = k + kstep;  // rows and columns labelled done.. make the trailing matrix
    T x_row[kRows], y_row[kRows], x_col[kCols], y_col[kCols];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int r = lane + 32 * i;
      x_row[i] = r < n ? cur[r + p0 * n] : T(0);
      y_row[i] = kstep == 2 && r < n ? cur[r + p1 * n] : T(0);
    }
#pragma unroll
    for (int j = 0; j < kCols; ++j) {
      const int c = warp + warps * j;
      x_col[j] = c < n ? cur[c + p0 * n] : T(0);
      y_col[j] = kstep == 2 && c < n ? cur[c + p1 * n] : T(0);
    }
    // next(r, c) = update(i, j, that entry) for this thread's entries of the trailing matrix.
    auto update_trailing = [&](auto update) {
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          if (row_label[i] >= done && row_label[i] < n && col_label[j] >= done &&
              col_label[j] < n) {
            const int e = lane + 32 * i + (warp + warps * j) * n;
            next[e] = update(i, j, cur[e]);
          }
        }
      }
    };
    const bool writes_l = warp == k % warps;
    if (zero_column) {
      if (writes_l) {
#pragma unroll
        for (int i = 0; i < kRows; ++i) {
          if (row_label[i] >= k && row_label[i] < n) a[row_label[i] + k * n] = x_row[i];
        }
      }
      update_trailing([](int, int, T v) { return v; });
    } else if (kstep == 1) {
      const T d = cur[p0 + p0 * n];
      if (writes_l && lane == 0) a[k + k * n] = d;
      if (k + 1 < n) {
        // A(i, j) - A(i, k) (A(j, k) / D) on the lower copy (i: the larger label), both copies.
        const T r1 = T(1) / d;
        if (writes_l) {
#pragma unroll
          for (int i = 0; i < kRows; ++i) {
            if (row_label[i] > k && row_label[i] < n) a[row_label[i] + k * n] = x_row[i] * r1;
          }
        }
        update_trailing([&](int i, int j, T v) {
          return col_label[j] <= row_label[i] ? v - x_row[i] * (r1 * x_col[j])
                                              : v - x_col[j] * (r1 * x_row[i]);
        });
      }
    } else {
      const T akk = cur[p0 + p0 * n], ak1k = cur[p1 + p0 * n], ak1k1 = cur[p1 + p1 * n];
      if (writes_l && lane == 0) {
        a[k + k * n] = akk;
        a[k + 1 + k * n] = ak1k;
        a[k + 1 + (k + 1) * n] = ak1k1;
      }
      if (k + 2 < n) {
        // ?sytf2's 2x2 step (sytrf_lower_kernel's expressions): W from the old columns, then
        // A(i, j) - A(i, k) W(j, 0) - A(i, k + 1) W(j, 1) on the lower copy, both copies.
        const TwoByTwoPivot<T> d(akk, ak1k, ak1k1);
        if (writes_l) {
#pragma unroll
          for (int i = 0; i < kRows; ++i) {
            if (row_label[i] >= k + 2 && row_label[i] < n) {
              a[row_label[i] + k * n] = d.first(x_row[i], y_row[i]);
              a[row_label[i] + (k + 1) * n] = d.second(x_row[i], y_row[i]);
            }
          }
        }
        update_trailing([&](int i, int j, T v) {
          return col_label[j] <= row_label[i]
                     ? v - x_row[i] * d.first(x_col[j], y_col[j]) -
                           y_row[i] * d.second(x_col[j], y_col[j])
                     : v - x_col[j] * d.first(x_row[i], y_row[i]) -
                           y_col[j] * d.second(x_row[i], y_row[i]);
        });
      }
    }
    if (threadIdx.x == 0) record_pivot(ipiv, k, kp, kstep, 0);
    k = done;
    __syncthreads();  // the trailing matrix written before the next step reads it
  }
  if (threadIdx.x == 0) info_all[blockIdx.x] = info;
}

// kRows rows a lane (n <= 32 kRows); each of the kLdlSmallBlockWarps warps updates an equal
// share of the columns.
template <typename T, int kRows>
cudaError_t launch_sytrf_small_block(cudaStream_t stream, int64_t count, int64_t n, T* a,
                                     int* ipiv, int* info) {
  constexpr int kCols = 32 * kRows / kLdlSmallBlockWarps;
  const int threads = 32 * static_cast<int>((n + kCols - 1) / kCols);
  const size_t smem_bytes = 2 * static_cast<size_t>(n * n) * sizeof(T);
  auto kernel = sytrf_small_block_kernel<T, kRows, kCols>;
  if (cudaError_t err = allow_shared(kernel, smem_bytes); err != cudaSuccess) return err;
  kernel<<<static_cast<unsigned>(count), threads, smem_bytes, stream>>>(static_cast<int>(n), a,
                                                                        ipiv, info);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t sytrf_small_block_batched(cudaStream_t stream, int64_t count, int64_t n, T* a,
                                      int* ipiv, int* info) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > kLdlSmallBlockMaxN || count > INT32_MAX) return cudaErrorInvalidValue;
  D* ad = reinterpret_cast<D*>(a);
  if (n <= 32) return launch_sytrf_small_block<D, 1>(stream, count, n, ad, ipiv, info);
  return launch_sytrf_small_block<D, 2>(stream, count, n, ad, ipiv, info);
}

#define JCM_LDL_SMALL_BLOCK_KERNELS(T)                                                          \
  template cudaError_t sytrf_small_block_batched<T>(cudaStream_t, int64_t, int64_t, T*, int*,   \
                                                    int*);
JCM_LDL_SMALL_BLOCK_KERNELS(float)
JCM_LDL_SMALL_BLOCK_KERNELS(double)
JCM_LDL_SMALL_BLOCK_KERNELS(cuComplex)
JCM_LDL_SMALL_BLOCK_KERNELS(cuDoubleComplex)
#undef JCM_LDL_SMALL_BLOCK_KERNELS

}  // namespace jcm
