// The batched LDL^T factor for n <= kLdlWarpMaxN (LAPACK ?sytf2's steps, lower): one warp a
// matrix, its rows in registers. ldl_sytf2_kernels.cu's pivots, L and D to the bit.
#include "ldl/ldl_device.cuh"
#include "ldl/ldl_kernels.h"

#include "core/kernel_util.cuh"

#include <cstdint>

namespace jcm {

namespace {

using namespace kernel;
using namespace ldl;

// One warp per matrix, n <= N <= 32: the same factorization as sytrf_lower_kernel (LAPACK
// ?sytf2, the same pivots and the same arithmetic), with no barrier and no shared memory after the
// load. Lane i keeps physical row i of the whole symmetric matrix in registers (N of them, indexed
// at compile time only), and nothing ever moves: ?sytf2's interchanges only relabel rows and
// columns of the trailing matrix, so each lane carries its row's logical position (`label`) and
// an interchange swaps two labels. Column k of A is each lane's own entry in the pivot's
// physical column (the matrix is symmetric); a step updates both copies of every entry with the
// formula ?sytf2 applies to the one in the lower triangle (its row is the larger label), so the
// copies stay equal to the bit; and column k of L and D goes out at once, at the rows' labels of
// that moment (?sytf2 never swaps the columns left of the current one).
template <typename T, int N>
__global__ void __launch_bounds__(32)
    sytrf_small_kernel(int n, T* a_all, int* ipiv_all, int* info_all) {
  using R = typename real_of<T>::type;
  constexpr unsigned kAll = 0xffffffffu;
  constexpr int ld = N + 1;
  const int lane = threadIdx.x;
  T* a = a_all + static_cast<int64_t>(blockIdx.x) * n * n;
  int* ipiv = ipiv_all + static_cast<int64_t>(blockIdx.x) * n;
  // The lower triangle through shared memory (coalesced by columns), then row `lane` mirrored.
  T* stage = reinterpret_cast<T*>(dynamic_shared());
  for (int j = 0; j < n; ++j) {
    if (lane >= j && lane < n) stage[lane + j * ld] = a[lane + j * n];
  }
  __syncwarp();
  T row[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    T v = T(0);
    if (lane < n && j < n) v = j <= lane ? stage[lane + j * ld] : stage[j + lane * ld];
    row[j] = v;
  }
  int label = lane;  // lanes >= n keep labels >= n and never take part
  int labels[N];     // every row's label, kept on every lane (no shuffle per column)
#pragma unroll
  for (int j = 0; j < N; ++j) labels[j] = j;
  const R alpha = R((1.0 + sqrt(17.0)) / 8.0);
  int info = 0;
  auto lane_of = [&](int target) { return __ffs(__ballot_sync(kAll, label == target)) - 1; };
  // This row's entry in physical column c (c the same on every lane): selects, no local memory.
  // A tree of selects on c's bits: log2(N) deep, where a chain would be N - 1.
  auto entry = [&](int c) {
    T t[N];
#pragma unroll
    for (int j = 0; j < N; ++j) t[j] = row[j];
#pragma unroll
    for (int w = 1; w < N; w *= 2) {
#pragma unroll
      for (int j = 0; j + w < N; j += 2 * w) t[j] = (c & w) ? t[j + w] : t[j];
    }
    return t[0];
  };
  // The largest v over the lanes that `take` part, ties to the smallest label, NaN never wins;
  // none: 0 at `begin` (block_argmax's contract). On every lane.
  auto largest = [&](bool take, R v, int begin, R* value, int* index) {
    R best = -1;
    int best_i = begin;
    if (take && v > best) best = v, best_i = label;
    warp_argmax(best, best_i);
    best = __shfl_sync(kAll, best, 0);
    best_i = __shfl_sync(kAll, best_i, 0);
    *value = best < 0 ? R(0) : best;
    *index = best < 0 ? begin : best_i;
  };

  for (int k = 0; k < n;) {
    const int p = lane_of(k);
    const T x = entry(p);  // A(this row, k)
    R colmax;
    int imax;
    largest(label > k && label < n, abs1(x), k + 1, &colmax, &imax);
    const R absakk = abs1(shfl_idx(x, p));
    int kp = k, kstep = 1;
    const bool zero_column = nothing_to_pivot(absakk, colmax, k, &info);
    if (!zero_column && !(absakk >= alpha * colmax)) {
      // Row imax of the trailing matrix but its diagonal: each lane's entry in column imax.
      const int q = lane_of(imax);
      const T xq = entry(q);
      R rowmax;
      int unused;
      largest(label >= k && label < n && lane != q, abs1(xq), k, &rowmax, &unused);
      bunch_kaufman_pivot(absakk, colmax, rowmax, alpha, k, imax,
                          [&] { return abs1(shfl_idx(xq, q)); }, &kp, &kstep);
      const int kk = k + kstep - 1;
      if (kp != kk) {
        label = label == kk ? kp : label == kp ? kk : label;
#pragma unroll
        for (int j = 0; j < N; ++j) {
          labels[j] = labels[j] == kk ? kp : labels[j] == kp ? kk : labels[j];
        }
      }
    }

    const int p0 = lane_of(k);
    const T x0 = entry(p0);  // A(this row, k), after the interchange
    if (zero_column) {
      if (label >= k && label < n) a[label + k * n] = x0;
    } else if (kstep == 1) {
      if (label == k) a[k + k * n] = x0;
      if (k + 1 < n) {
        // A(i, j) - A(i, k) (A(j, k) / D) on the lower copy; A(j, k) is lane j's x0.
        const T r1 = T(1) / shfl_idx(x0, p0);
        const bool live = label > k && label < n;
#pragma unroll
        for (int j = 0; j < N; ++j) {
          const T xj = shfl_idx(x0, j);
          const int label_j = labels[j];
          if (live && label_j > k && label_j < n) {
            row[j] = label_j <= label ? row[j] - x0 * (r1 * xj) : row[j] - xj * (r1 * x0);
          }
        }
        if (live) a[label + k * n] = x0 * r1;
      }
    } else {
      const int p1 = lane_of(k + 1);
      const T y0 = entry(p1);  // A(this row, k + 1)
      const T akk = shfl_idx(x0, p0), ak1k = shfl_idx(x0, p1), ak1k1 = shfl_idx(y0, p1);
      if (label == k) a[k + k * n] = akk;
      if (label == k + 1) a[k + 1 + k * n] = ak1k, a[k + 1 + (k + 1) * n] = ak1k1;
      if (k + 2 < n) {
        // ?sytf2's 2x2 step (sytrf_lower_kernel's expressions): W from the old columns, then
        // A(i, j) - A(i, k) W(j, 0) - A(i, k + 1) W(j, 1) on the lower copy.
        const TwoByTwoPivot<T> d(akk, ak1k, ak1k1);
        const bool live = label >= k + 2 && label < n;
        const T w0 = d.first(x0, y0), w1 = d.second(x0, y0);
#pragma unroll
        for (int j = 0; j < N; ++j) {
          const T xj = shfl_idx(x0, j), yj = shfl_idx(y0, j);
          // Lane j's w0, w1 from its x0, y0: the same expressions, so the same bits.
          const T w0j = d.first(xj, yj), w1j = d.second(xj, yj);
          const int label_j = labels[j];
          if (live && label_j >= k + 2 && label_j < n) {
            row[j] = label_j <= label ? row[j] - x0 * w0j - y0 * w1j : row[j] - xj * w0 - yj * w1;
          }
        }
        if (live) a[label + k * n] = w0, a[label + (k + 1) * n] = w1;
      }
    }
    if (lane == 0) record_pivot(ipiv, k, kp, kstep, 0);
    k += kstep;
  }
  if (lane == 0) info_all[blockIdx.x] = info;
}

template <typename T, int N>
cudaError_t launch_sytrf_small(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                               int* info) {
  sytrf_small_kernel<T, N><<<static_cast<unsigned>(count), 32, N * (N + 1) * sizeof(T), stream>>>(
      static_cast<int>(n), a, ipiv, info);
  return cudaGetLastError();
}

}  // namespace

template <typename T>
cudaError_t sytrf_small_batched(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                                int* info) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > kLdlWarpMaxN || count > INT32_MAX) return cudaErrorInvalidValue;
  D* ad = reinterpret_cast<D*>(a);
  if (n <= 8) return launch_sytrf_small<D, 8>(stream, count, n, ad, ipiv, info);
  return launch_sytrf_small<D, kLdlWarpMaxN>(stream, count, n, ad, ipiv, info);
}

#define JCM_LDL_WARP_KERNELS(T) \
  template cudaError_t sytrf_small_batched<T>(cudaStream_t, int64_t, int64_t, T*, int*, int*);
JCM_LDL_WARP_KERNELS(float)
JCM_LDL_WARP_KERNELS(double)
JCM_LDL_WARP_KERNELS(cuComplex)
JCM_LDL_WARP_KERNELS(cuDoubleComplex)
#undef JCM_LDL_WARP_KERNELS

}  // namespace jcm
