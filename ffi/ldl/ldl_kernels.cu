#include "ldl/ldl_kernels.h"

#include "core/kernel_util.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <utility>

namespace jcm {

namespace {

using namespace kernel;

// Step k's LAPACK pivot entries, 1-based and `base` added (the whole matrix's numbering): kp + 1,
// or -(kp + 1) twice for a 2x2 step.
__device__ inline void record_pivot(int* ipiv, int k, int kp, int kstep, int base) {
  if (kstep == 1) {
    ipiv[k] = base + kp + 1;
  } else {
    ipiv[k] = ipiv[k + 1] = -(base + kp + 1);
  }
}

// A 2x2 pivot's multipliers (LAPACK ?sytf2 / ?lasyf), D = [akk ak1k; ak1k ak1k1]: row i's
// entries of L's two columns, first(x, y) and second(x, y), from its entries x, y of the two
// columns before scaling (W's). Every kernel computes them with these expressions, so the same
// bits.
template <typename T>
struct TwoByTwoPivot {
  T akk, ak1k, ak1k1, d11, d22, d21;
  __device__ TwoByTwoPivot(T akk, T ak1k, T ak1k1)
      : akk(akk), ak1k(ak1k), ak1k1(ak1k1), d11(ak1k1 / ak1k), d22(akk / ak1k) {
    const T t = T(1) / (d11 * d22 - T(1));
    d21 = t / ak1k;
  }
  __device__ T first(T x, T y) const { return d21 * (d11 * x - y); }
  __device__ T second(T x, T y) const { return d21 * (d22 * y - x); }
  // Row i's entries of the step's two columns of L as ?lasyf stores them (rows k, k + 1: D's),
  // through put0 / put1 (row k has none in the second column).
  template <typename Put0, typename Put1>
  __device__ void row_of_l(int i, int k, T x, T y, Put0 put0, Put1 put1) const {
    if (i >= k + 2) {
      put0(first(x, y));
      put1(second(x, y));
    } else if (i == k) {
      put0(akk);
    } else {
      put0(ak1k);
      put1(ak1k1);
    }
  }
};

// ?sytf2's column with nothing to pivot on (its diagonal and below all zero, or a NaN diagonal):
// no interchange, D(k, k) as it is, info = k + 1 (1-based) unless already set.
template <typename R>
__device__ inline bool nothing_to_pivot(R absakk, R colmax, int k, int* info) {
  const bool zero = (absakk == R(0) && colmax == R(0)) || isnan(absakk);
  if (zero && *info == 0) *info = k + 1;
  return zero;
}

// Bunch-Kaufman's choice (LAPACK ?sytf2) once the diagonal failed |A(k, k)| >= alpha colmax and
// rowmax is known: kp, and kstep 2 for a 2x2 pivot. abs_diag() is |A(imax, imax)|, read only
// where the choice needs it.
template <typename R, typename AbsDiag>
__device__ inline void bunch_kaufman_pivot(R absakk, R colmax, R rowmax, R alpha, int k, int imax,
                                           AbsDiag abs_diag, int* kp, int* kstep) {
  if (absakk >= alpha * colmax * (colmax / rowmax)) {
    *kp = k;
  } else {
    *kp = imax;
    *kstep = abs_diag() >= alpha * rowmax ? 1 : 2;
  }
}

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
  // H100 256 x 64 float32 0.144 -> 0.128 ms, float64 0.161 -> 0.137: the grid, session 21 call 7).
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

// One warp per matrix, n <= N <= 32: the same factorization as sytrf_lower_kernel (LAPACK
// ?sytf2, the same pivots and the same arithmetic), with no barrier and no shared memory after the
// load. Lane i keeps physical row i of the whole symmetric matrix in registers (N of them, indexed
// at compile time only), and nothing ever moves: ?sytf2's interchanges only relabel rows and
// columns of the trailing matrix, so each lane carries its row's logical position (`label`) and
// an interchange swaps two labels. Column k of A is each lane's own entry in the pivot's
// physical column (the matrix is symmetric); a step updates both copies of every entry with the
// formula ?sytf2 applies to the one in the lower triangle (its row is the larger label), so the
// copies stay equal to the bit; and column k of L and D goes out at once, at the rows' labels of
// that moment (?sytf2 never swaps the columns left of the current one). NumPy model, checked
// against the block kernel's: benchmarks/diag/ldl_warp_model.py.
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
// 0.286 against 0.183 ms, 1 x 128 0.290 / 0.413 against 0.225; s23-c1-small128*, s23-c1-sytf2.)
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

// A panel's steps from its last (column k - 1) back to j0, as ?lasyf's end walks them to leave
// L as ?sytf2 stores it: undo(r, q, before) for each step, whose interchange of rows r and q
// (r == q: none) is to be undone in the panel's columns before `before` (the step's first).
// pivot(j): ipiv's entry of column j (1-based, negative pairs for 2x2 steps).
template <typename Pivot, typename Undo>
__device__ inline void undo_panel_interchanges(int k, int j0, Pivot pivot, Undo undo) {
  for (int j = k; j > j0;) {
    const int jj = j;
    int jp = pivot(j - 1);
    if (jp < 0) jp = -jp, --j;
    --j;
    undo(jp - 1, jj - 1, j);
  }
}

// Matrix `item` of a panel launch (block blockIdx.x's where a block takes a matrix): its a
// (n x n), w and l (n x (nb + 1)) and pivots.
template <typename T>
struct PanelItem {
  T* a;
  T* w;
  T* l;
  int* ipiv;
};

template <typename T>
__device__ inline PanelItem<T> panel_item(int n, int nb, T* a_all, T* w_all, T* l_all,
                                          int* ipiv_all, int64_t item = blockIdx.x) {
  return {a_all + item * n * n, w_all + item * n * (nb + 1), l_all + item * n * (nb + 1),
          ipiv_all + item * n};
}

// One panel of the blocked LDL^T (LAPACK ?lasyf, UPLO = 'L'), one block per matrix, the matrix
// and the panel's W = L D in global memory (L2). Matrix b's panel starts at its own column
// progress[b] and takes column steps while k < target, so a 2x2 pivot at target - 1 ends it at
// target + 1: every panel of the batch ends at target or target + 1, and one uniform update of
// rows and columns target.. (strided-batched GEMMs, ldl_ops.cc) serves them all, from the
// zero-padded copies this kernel leaves in w and l (n x (nb + 1) each, the matrix's rows; rows
// below the panel's end and columns past its width are zero). Then the panel's interchanges
// are partly undone in its columns, as ?lasyf stores L. Step for step
// benchmarks/diag/ldl_blocked_model.py (panel_to_target, sytrf_lower_uniform).
template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    lasyf_lower_kernel(int n, int nb, int target, T* a_all, T* w_all, T* l_all, int* progress,
                       int* ipiv_all, int* info_all) {
  using R = typename real_of<T>::type;
  const int64_t item = blockIdx.x;
  const PanelItem<T> mine = panel_item(n, nb, a_all, w_all, l_all, ipiv_all);
  T *a = mine.a, *w = mine.w, *l = mine.l;
  int* ipiv = mine.ipiv;
  T* row = reinterpret_cast<T*>(dynamic_shared());  // W(k, 0:c) or W(imax, 0:c)
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * n]; };
  auto W = [&](int i, int c) -> T& { return w[i + static_cast<int64_t>(c) * n]; };
  const R alpha = R((1.0 + sqrt(17.0)) / 8.0);
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int j0 = progress[item];
  int info = 0;

  // W(k:n, col) = from(i) - A(k:n, j0:k) row^T, row = W(r, 0:k - j0) (one pass, coalesced).
  auto panel_gemv = [&](int k, int col, int r, auto from) {
    const int c = k - j0;
    for (int cc = tid; cc < c; cc += nthreads) row[cc] = W(r, cc);
    __syncthreads();
    for (int i = k + tid; i < n; i += nthreads) {
      T s = from(i);
      for (int cc = 0; cc < c; ++cc) s -= A(i, j0 + cc) * row[cc];
      W(i, col) = s;
    }
    __syncthreads();
  };

  int k = j0;
  while (k < target) {
    const int c = k - j0;
    panel_gemv(k, c, k, [&](int i) { return A(i, k); });
    R colmax;
    int imax;
    block_argmax(k + 1, n, [&](int i) { return abs1(W(i, c)); }, &colmax, &imax);
    const R absakk = abs1(W(k, c));
    int kp = k, kstep = 1;
    bool swap = false;
    const bool zero_column = nothing_to_pivot(absakk, colmax, k, &info);
    if (!zero_column && !(absakk >= alpha * colmax)) {
      // Row imax of the up-to-date trailing matrix, into W(:, c + 1).
      panel_gemv(k, c + 1, imax, [&](int i) { return i < imax ? A(imax, i) : A(i, imax); });
      R rowmax;
      int unused;
      block_argmax(k, n, [&](int i) { return i == imax ? R(-1) : abs1(W(i, c + 1)); }, &rowmax,
                   &unused);
      bunch_kaufman_pivot(absakk, colmax, rowmax, alpha, k, imax,
                          [&] { return abs1(W(imax, c + 1)); }, &kp, &kstep);
      swap = kp != k;
    }
    __syncthreads();  // every thread has read what decides the step before anything moves

    if (zero_column) {
      for (int i = k + tid; i < n; i += nthreads) A(i, k) = W(i, c);
    } else {
      if (swap && kstep == 1) {
        for (int i = k + tid; i < n; i += nthreads) W(i, c) = W(i, c + 1);
        __syncthreads();
      }
      const int kk = k + kstep - 1;
      if (kp != kk) {
        // Column kk (not yet updated: A's columns k.. are rewritten from W below) moves to kp;
        // rows kk and kp swap in the panel's L so far and in W. Disjoint sets: one pass.
        if (tid == 0) A(kp, kp) = A(kk, kk);
        for (int j = kk + 1 + tid; j < kp; j += nthreads) A(kp, j) = A(j, kk);
        for (int i = kp + 1 + tid; i < n; i += nthreads) A(i, kp) = A(i, kk);
        for (int j = j0 + tid; j < k; j += nthreads) {
          T t = A(kk, j);
          A(kk, j) = A(kp, j);
          A(kp, j) = t;
        }
        for (int cc = tid; cc < c + kstep; cc += nthreads) {
          T t = W(kk, cc);
          W(kk, cc) = W(kp, cc);
          W(kp, cc) = t;
        }
        __syncthreads();
      }
      if (kstep == 1) {
        const T d = W(k, c);
        const T r1 = T(1) / d;
        for (int i = k + tid; i < n; i += nthreads) A(i, k) = i == k ? d : W(i, c) * r1;
      } else {
        const T akk = W(k, c), ak1k = W(k + 1, c), ak1k1 = W(k + 1, c + 1);
        const TwoByTwoPivot<T> d(akk, ak1k, ak1k1);
        for (int i = k + 2 + tid; i < n; i += nthreads) {
          A(i, k) = d.first(W(i, c), W(i, c + 1));
          A(i, k + 1) = d.second(W(i, c), W(i, c + 1));
        }
        if (tid == 0) A(k, k) = akk, A(k + 1, k) = ak1k, A(k + 1, k + 1) = ak1k1;
      }
    }
    if (tid == 0) record_pivot(ipiv, k, kp, kstep, 0);
    k += kstep;
    __syncthreads();
  }

  // The GEMMs' operands: rows target.. of the panel's L and W, zero outside this panel.
  const int kb = k - j0;
  for (int cc = 0; cc <= nb; ++cc) {
    for (int i = target + tid; i < n; i += nthreads) {
      const bool live = i >= k && cc < kb;
      l[i + static_cast<int64_t>(cc) * n] = live ? A(i, j0 + cc) : T(0);
      if (!live) W(i, cc) = T(0);
    }
  }
  if (tid == 0) {
    progress[item] = k;
    if (info != 0 && info_all[item] == 0) info_all[item] = info;
  }
  __syncthreads();
  // L as ?sytf2 stores it: each interchange undone in the panel columns left of its own step.
  undo_panel_interchanges(k, j0, [&](int j) { return ipiv[j]; }, [&](int r, int q, int before) {
    if (r != q) {
      for (int col = j0 + tid; col < before; col += nthreads) {
        T t = A(r, col);
        A(r, col) = A(q, col);
        A(q, col) = t;
      }
    }
    __syncthreads();
  });
}

// One row of a panel's GEMM operands: its columns 0..nb of L and W (column stride ld, in shared
// memory) to l and w (column stride n), zero from column live_cols on. By pointer: a 64-bit
// element offset worked out again for every entry made these write-outs a fifth of a 1024-row
// panel's instructions (ncu, gpu-tests/session23-c6).
template <typename T>
__device__ inline void write_operand_row(const T* l_row, const T* w_row, T* l_out, T* w_out,
                                         int ld, int n, int nb, int live_cols) {
  for (int cc = 0; cc <= nb; ++cc, l_row += ld, w_row += ld, l_out += n, w_out += n) {
    const bool live = cc < live_cols;
    *l_out = live ? *l_row : T(0);
    *w_out = live ? *w_row : T(0);
  }
}

// lasyf_lower_kernel's panel with the panel's L and W in shared memory (rows base.. of its
// columns, base = target - nb, the panel's first possible column), each thread owning rows
// base + threadIdx.x + m blockDim.x (m < M) for the whole panel: its entries of the column being
// factored stay in registers from the GEMV to the scaling, so a step has two or three barriers
// (the argmaxes' and the step's end) where the global-memory kernel has a dozen after L2 round
// trips. The numbers are the same (the same operations in the same order; LAPACK's pivots).
// A step's data passes between threads through shared slots written before a barrier: the
// diagonal and next entries of rows k, k + 1 and imax (x_* below), which the swap and scaling
// need. The trailing matrix stays in global memory: its column k (kept in registers as read,
// to move to kp without reading it again; the next step's read during this one) and, for the
// candidate pivot, row and column imax.
template <typename T, int M>
__global__ void __launch_bounds__(kMaxThreads)
    lasyf_lower_shared_kernel(int n, int nb, int target, T* a_all, T* w_all, T* l_all,
                              int* progress, int* ipiv_all, int* info_all) {
  using R = typename real_of<T>::type;
  const int64_t item = blockIdx.x;
  const PanelItem<T> mine = panel_item(n, nb, a_all, w_all, l_all, ipiv_all);
  T *w = mine.w, *l = mine.l;
  // The matrix's offset kept in a register: left alone, the compiler works item n n out again
  // at every access to A (ncu's SASS, session 23 call 6). An offset, not the pointer, so that its
  // accesses stay global loads.
  int64_t a_offset = item * n * n;
  asm volatile("" : "+l"(a_offset));
  T* a = a_all + a_offset;
  int* ipiv = mine.ipiv;
  const int base = target - nb, ld = n - base;
  const int tid = threadIdx.x, nthreads = blockDim.x;
  T* ls = reinterpret_cast<T*>(dynamic_shared());
  T* ws = ls + static_cast<int64_t>(ld) * (nb + 1);
  // The step's slots: W(k, c), W(k, c + 1), W(k + 1, ..), W(imax, ..); the next column's entry
  // in row kp.
  enum { kK0, kK1, kK10, kK11, kR0, kR1, kNext, kSlots };
  T* x = ws + static_cast<int64_t>(ld) * (nb + 1);
  R* red_v = reinterpret_cast<R*>(x + kSlots);      // two argmaxes' warp slots
  int* red_i = reinterpret_cast<int*>(red_v + 2 * 32);
  int* piv = red_i + 2 * 32;  // this panel's pivots, as ipiv (0-based column)
  auto L = [&](int i, int cc) -> T& { return ls[(i - base) + cc * ld]; };
  auto W = [&](int i, int cc) -> T& { return ws[(i - base) + cc * ld]; };
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * n]; };
  auto row = [&](int m) { return base + tid + m * nthreads; };
  const R alpha = R((1.0 + sqrt(17.0)) / 8.0);
  const int j0 = progress[item];
  int info = 0;

  // out[m] = from[m] - L(row, 0:c) W(r, 0:c)^T over this thread's rows i >= k. By column
  // pointers and a predicate worked out once: indexing L(row(m), cc) and W(r, cc) afresh took
  // ~6 integer instructions an FFMA (SASS), in the loop that is most of a step.
  auto gemv = [&](int k, int c, int r, const T (&from)[M], T (&out)[M]) {
    bool live[M];
#pragma unroll
    for (int m = 0; m < M; ++m) out[m] = from[m], live[m] = row(m) >= k && row(m) < n;
    const T* l_col = ls + tid;  // L(row(m), cc) at l_col[m * nthreads]
    const T* w_col = &W(r, 0);
    for (int cc = 0; cc < c; ++cc, l_col += ld, w_col += ld) {
      const T wr = *w_col;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        if (live[m]) out[m] -= l_col[m * nthreads] * wr;
      }
    }
  };

  // This thread's entries of column col of the trailing matrix (rows col.., else 0).
  auto load_column = [&](int col, T (&out)[M]) {
    const T* column = a + static_cast<int64_t>(col) * n;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int i = row(m);
      out[m] = i >= col && i < n ? column[i] : T(0);
    }
  };

  int k = j0;
  T ak[M];  // column k, not yet updated: read ahead during the step before (see next1 / next2)
  load_column(k, ak);
  while (k < target) {
    const int c = k - j0;
    T w0[M], w1[M];
    R best = -1;
    int best_i = INT_MAX;
    // The next step's column (k + 1 or k + 2) read now, its round trip hidden behind this step;
    // what this step's interchange writes there is patched in at the step's end.
    T next1[M], next2[M];
    load_column(k + 1, next1);
    load_column(k + 2, next2);
#pragma unroll
    for (int m = 0; m < M; ++m) w1[m] = T(0);
    gemv(k, c, k, ak, w0);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int i = row(m);
      if (i < k || i >= n) continue;
      W(i, c) = w0[m];
      if (i == k) x[kK0] = w0[m];
      if (i == k + 1) x[kK10] = w0[m];
      const R v = abs1(w0[m]);
      if (i > k && v > best) best = v, best_i = i;
    }
    R colmax;
    int imax;
    block_argmax_of(best, best_i, red_v, red_i, k + 1, &colmax, &imax);
    const R absakk = abs1(x[kK0]);
    int kp = k, kstep = 1;
    const bool zero_column = nothing_to_pivot(absakk, colmax, k, &info);
    if (!zero_column && !(absakk >= alpha * colmax)) {
      // Row imax of the up-to-date trailing matrix, as W(:, c + 1).
      T from[M];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int i = row(m);
        from[m] = i >= k && i < n ? (i < imax ? A(imax, i) : A(i, imax)) : T(0);
      }
      gemv(k, c, imax, from, w1);
      best = -1;
      best_i = INT_MAX;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int i = row(m);
        if (i < k || i >= n) continue;
        W(i, c + 1) = w1[m];
        if (i == k) x[kK1] = w1[m];
        if (i == k + 1) x[kK11] = w1[m];
        if (i == imax) x[kR0] = w0[m], x[kR1] = w1[m];
        const R v = abs1(w1[m]);
        if (i != imax && v > best) best = v, best_i = i;
      }
      R rowmax;
      int unused;
      block_argmax_of(best, best_i, red_v + 32, red_i + 32, k, &rowmax, &unused);
      bunch_kaufman_pivot(absakk, colmax, rowmax, alpha, k, imax,
                          [&] { return abs1(x[kR1]); }, &kp, &kstep);
    }
    // No barrier here: what decided the step (the slots, the argmaxes' warp slots) is not
    // written below, and the GEMVs' reads of L and W are behind the argmaxes' barriers.
    const int kk = k + kstep - 1;
    const bool swap = kp != kk;
    if (swap) {
      // Rows kk and kp of the panel's L so far and of W's earlier columns.
      for (int cc = tid; cc < c; cc += nthreads) {
        T t = L(kk, cc);
        L(kk, cc) = L(kp, cc);
        L(kp, cc) = t;
        t = W(kk, cc);
        W(kk, cc) = W(kp, cc);
        W(kp, cc) = t;
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int i = row(m);
      if (i < k || i >= n) continue;
      if (swap) {
        // The trailing matrix's column kk (not yet updated; a 2x2 step's kk = k + 1 read ahead)
        // moves to kp: A(kp, kp), row kp's entries kk + 1 .. kp - 1 and column kp's below it.
        // Of these the next column (kk + 1) has A(kp, kk + 1) if kk + 1 < kp, else (kp = kk + 1)
        // A(kp, kp) and the rest of column kp: the one entry another thread holds goes through
        // x[kNext] (from row kk or kk + 1), the others are this thread's own.
        const T v = kstep == 1 ? ak[m] : next1[m];
        if (i == kk) {
          A(kp, kp) = v;
          if (kp == kk + 1) x[kNext] = v;
        } else if (i > kk && i < kp) {
          A(kp, i) = v;
          if (i == kk + 1) x[kNext] = v;
        } else if (i > kp) {
          A(i, kp) = v;
          if (kp == kk + 1 && kstep == 1) next1[m] = v;
          if (kp == kk + 1 && kstep == 2) next2[m] = v;
        }
      }
      if (zero_column) {
        L(i, c) = w0[m];
      } else if (kstep == 1) {
        if (swap) {
          // Column imax becomes the pivot column, rows k and kp trade places.
          w0[m] = i == k ? x[kR1] : i == kp ? x[kK1] : w1[m];
          W(i, c) = w0[m];
        }
        const T d = swap ? x[kR1] : x[kK0];
        L(i, c) = i == k ? d : w0[m] * (T(1) / d);
      } else {
        if (swap && (i == kk || i == kp)) {
          w0[m] = i == kk ? x[kR0] : x[kK10];
          w1[m] = i == kk ? x[kR1] : x[kK11];
          W(i, c) = w0[m];
          W(i, c + 1) = w1[m];
        }
        TwoByTwoPivot<T>(x[kK0], x[kR0], x[kR1])
            .row_of_l(i, k, w0[m], w1[m], [&](T v) { L(i, c) = v; },
                      [&](T v) { L(i, c + 1) = v; });
      }
    }
    if (tid == 0) {
      record_pivot(ipiv, k, kp, kstep, 0);
      record_pivot(piv - j0, k, kp, kstep, 0);
    }
    k += kstep;
    __syncthreads();
#pragma unroll
    for (int m = 0; m < M; ++m) {
      ak[m] = kstep == 1 ? next1[m] : next2[m];
      if (swap && row(m) == kp) ak[m] = x[kNext];
    }
  }

  // The GEMMs' operands: rows target.. of the panel's L and W, zero outside this panel, each
  // thread its own rows (each store still one warp's consecutive rows).
  const int kb = k - j0;
  for (int i = target + tid; i < n; i += nthreads) {
    write_operand_row(&L(i, 0), &W(i, 0), l + i, w + i, ld, n, nb, i >= k ? kb : 0);
  }
  __syncthreads();  // L's rows are read out before the interchanges are undone
  if (tid == 0) {
    progress[item] = k;
    if (info != 0 && info_all[item] == 0) info_all[item] = info;
  }
  // L as ?sytf2 stores it: each interchange undone in the panel columns left of its own step,
  // a thread per column (its swaps touch that column only), then the columns out.
  for (int col = tid; col < kb; col += nthreads) {
    undo_panel_interchanges(k, j0, [&](int j) { return piv[j - j0]; },
                            [&](int r, int q, int before) {
                              if (r != q && j0 + col < before) {
                                T t = L(r, col);
                                L(r, col) = L(q, col);
                                L(q, col) = t;
                              }
                            });
  }
  __syncthreads();
  // Row i's entries of the panel's columns j0 .. min(i, k - 1), the same way.
  for (int i = j0 + tid; i < n; i += nthreads) {
    const T* l_row = &L(i, 0);
    T* a_out = &A(i, j0);
    const int cols = min(kb, i - j0 + 1);
    for (int cc = 0; cc < cols; ++cc, l_row += ld, a_out += n) *a_out = *l_row;
  }
}

// The slots of a step of lasyf_lower_cluster_kernel (its rows trade labels): W(k, c),
// W(k, c + 1), W(k + 1, ..), W(k + 2, ..), W(imax, ..) (c: the step's first column of the
// panel); the trailing matrix's A(k + 1, k) and A(k + 2, k + 1) as read (what an interchange moves
// to row kp's entry of the next column).
enum LabelSlot { kK0, kK1, kK10, kK11, kK20, kK21, kR0, kR1, kA10, kA21, kLabelSlots };

// Whether (v, key) beats (best, best_key) in an argmax: larger, ties to the smaller key (a
// thread's rows are in no order once they trade labels). NaN never wins.
template <typename R>
__device__ inline bool beats(R v, int key, R best, int best_key) {
  return v > best || (v == best && key < best_key);
}

// The end of a cluster panel's step for this thread's rows (label[m], their L and W through
// L(m, cc) / W(m, cc)), where rows trade labels instead of moving: the interchange's moves in the
// trailing matrix (column kk, not yet updated, to kp), the trade, and the rows' entries of L,
// column imax becoming W's pivot column where it is. x: the step's slots; ak / next1 / next2: the
// columns k, k + 1, k + 2 as read (this row's entry of the next column patched where the
// interchange moves it: the row taking label kp gets it from the slots, not from memory, whose
// round trip would hold up the next step). The arithmetic of ?lasyf.
template <typename T, int M, typename AAt, typename LAt, typename WAt>
__device__ inline void finish_label_step(int n, int k, int c, int kp, int kstep, bool zero_column,
                                         const T* x, const T (&ak)[M], T (&next1)[M],
                                         T (&next2)[M], T (&w0)[M], const T (&w1)[M],
                                         int (&label)[M], AAt A, LAt L, WAt W) {
  const int kk = k + kstep - 1, kn = k + kstep;
  const bool swap = kp != kk;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int i = label[m];
    if (i < k || i >= n) continue;
    if (swap) {
      // Column kk of the trailing matrix (a 2x2 step's kk = k + 1 read ahead) moves to kp:
      // A(kp, kp), row kp's entries kk + 1 .. kp - 1, column kp below.
      const T v = kstep == 1 ? ak[m] : next1[m];
      if (i == kk) {
        A(kp, kp) = v;
        // This row becomes row kp: its entry of the next column is what moved there, column
        // kk's own entry (A(kk, kk), this row's, or A(kn, kk), from the slots).
        const T moved =
            kstep == 1 ? (kp == kn ? ak[m] : x[kA10]) : (kp == kn ? next1[m] : x[kA21]);
        if (kstep == 1) next1[m] = moved;
        if (kstep == 2) next2[m] = moved;
      } else if (i > kk && i < kp) {
        A(kp, i) = v;
      } else if (i > kp) {
        A(i, kp) = v;
        if (kp == kn && kstep == 1) next1[m] = v;
        if (kp == kn && kstep == 2) next2[m] = v;
      }
      label[m] = i == kk ? kp : i == kp ? kk : i;
    }
    const int j = label[m];
    if (zero_column) {
      L(m, c) = w0[m];
    } else if (kstep == 1) {
      if (swap) {
        // Column imax is the pivot column: the rows keep their own entries of it.
        w0[m] = w1[m];
        W(m, c) = w0[m];
      }
      const T d = swap ? x[kR1] : x[kK0];
      L(m, c) = j == k ? d : w0[m] * (T(1) / d);
    } else {
      TwoByTwoPivot<T>(x[kK0], x[kR0], x[kR1])
          .row_of_l(j, k, w0[m], w1[m], [&](T v) { L(m, c) = v; },
                    [&](T v) { L(m, c + 1) = v; });
    }
  }
}

// The end of a cluster panel, once every step is done (k: the first column
// left): the GEMMs' operands (rows target.., zero outside this panel) from this thread's rows,
// and its rows of L to A where ?lasyf's end leaves them: each interchange undone in the panel's
// columns left of its own step, which moves row i's entry of column cc to the row the later
// steps' interchanges take it to. piv: the panel's pivots, as ipiv (0-based column); ld: the
// column stride of L and W.
template <typename T, int M, typename LAt, typename WAt>
__device__ inline void write_label_panel(int n, int nb, int target, int j0, int k, const int* piv,
                                         const int (&label)[M], T* a, T* w, T* l, int ld, LAt L,
                                         WAt W) {
  const int kb = k - j0;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const int i = label[m];
    if (i >= n) continue;
    // By pointer along the row, as write_operand_row.
    const T* l_row = &L(m, 0);
    if (i >= target) write_operand_row(l_row, &W(m, 0), l + i, w + i, ld, n, nb, i >= k ? kb : 0);
    // Columns [before, col_end) of this row go to row p, where the later steps' interchanges
    // took it; only the entries on or below the diagonal (column j0 + cc <= i).
    int p = i, col_end = min(kb, i - j0 + 1);
    undo_panel_interchanges(k, j0, [&](int j) { return piv[j - j0]; },
                            [&](int r, int q, int before) {
                              const int from = before - j0;
                              T* a_out = a + p + static_cast<int64_t>(before) * n;
                              for (int cc = from; cc < col_end; ++cc, a_out += n) {
                                *a_out = l_row[cc * ld];
                              }
                              col_end = min(col_end, from);
                              p = p == r ? q : p == q ? r : p;
                            });
  }
}

// Rows of lasyf_lower_cluster_kernel: the most threads a block, the most blocks a cluster (the
// portable limit is 8; 16 needs the non-portable attribute, JCM_LDL_PANEL_CLUSTER=16 to measure).
constexpr int kClusterPanelMaxThreads = 512;
constexpr int kClusterPanelMaxRanks = 16;
// A cluster panel block's two mbarriers, ahead of its L (16 bytes: L stays 16-byte aligned).
constexpr size_t kClusterBarrierBytes = 2 * sizeof(unsigned long long);

// Where a cluster panel's row lives: block `rank` of the cluster, local row `local` of its L and
// W. Rows start out round-robin over the cluster's threads, so that every block keeps its share
// of the live rows as k advances.
struct ClusterRow {
  int rank;
  int local;
};

// lasyf_lower_shared_kernel's panel over a cluster of blocks (sm_90): the panel's rows spread
// over the blocks, each holding its rows of L and W in its own shared memory, so that a few
// matrices' tall panels get the shared memory and bandwidth of several SMs (one SM reads its
// whole L for each GEMV; float64 L and W of 8 columns at 2048 rows do not even fit one).
// Interchanges do not move rows: each thread's rows carry labels (their row of the matrix), two
// rows trade labels, and every block keeps where each label lives (slot_of). A step has one
// cluster barrier, after the column's argmax (each warp pushes its candidate to every block),
// and where it looks at a candidate row, a second exchange of the row's argmax by st.async onto
// each block's mbarrier, which orders shared memory alone without a GPU-scope fence (a cluster
// barrier's release compiles to MEMBAR.ALL.GPU: a third of the panel's stall samples in session
// 23's ncu); what a step shares goes the same way: the owners of rows k,
// k + 1, k + 2 and imax push their entries of the step's columns to every block (slots by the
// step's parity, so the next step's pushes never meet this one's reads), and W(imax, 0:c) and
// the next W(k, 0:c) are read from their owner's shared memory (the earlier columns, which no
// step writes again). Each step's writes to the trailing matrix (global memory) reach the next
// step's reads through its first cluster barrier: the next columns are read after it. The
// arithmetic is lasyf_lower_shared_kernel's (LAPACK's pivots); at the end each thread writes
// its rows of L straight to where ?lasyf's undone interchanges put them.
template <typename T, int M>
__global__ void __launch_bounds__(kClusterPanelMaxThreads)
    lasyf_lower_cluster_kernel(int n, int nb, int target, T* a_all, T* w_all, T* l_all,
                               int* progress, int* ipiv_all, int* info_all) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using R = typename real_of<T>::type;
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  const int ranks = static_cast<int>(cluster.num_blocks());
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t item = blockIdx.x / ranks;
  const PanelItem<T> mine = panel_item(n, nb, a_all, w_all, l_all, ipiv_all, item);
  T *a = mine.a, *w = mine.w, *l = mine.l;
  const int base = target - nb, rows = n - base;
  const int tid = threadIdx.x, nthreads = blockDim.x, stride = ranks * nthreads;
  const int ld = M * nthreads;  // this block's rows of L and W
  const int warps = nthreads / 32, warp = tid / 32, lane = tid % 32;
  const int cands = ranks * warps;
  // Two mbarriers (by the step's parity) for the second exchange, then L, W and the rest.
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(dynamic_shared());
  T* ls = reinterpret_cast<T*>(dynamic_shared() + kClusterBarrierBytes);
  T* ws = ls + static_cast<int64_t>(ld) * (nb + 1);
  T* wk = ws + static_cast<int64_t>(ld) * (nb + 1);  // W(k, 0:c), two buffers
  T* wr = wk + 2 * (nb + 2);                        // W(imax, 0:c)
  T* slots = wr + (nb + 2);                          // two steps' slots
  R* cand_v = reinterpret_cast<R*>(slots + 2 * kLabelSlots);  // two steps' two argmaxes
  int* cand_i = reinterpret_cast<int*>(cand_v + 4 * cands);
  int* piv = cand_i + 4 * cands;  // this panel's pivots, as ipiv (0-based column)
  int* slot_of = piv + nb + 2;    // label - base -> the slot holding that row
  auto L = [&](int m, int cc) -> T& { return ls[m * nthreads + tid + cc * ld]; };
  auto W = [&](int m, int cc) -> T& { return ws[m * nthreads + tid + cc * ld]; };
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * n]; };
  auto remote = [&](auto* p, int q) { return cluster.map_shared_rank(p, q); };
  auto owner = [&](int label) {
    const int slot = slot_of[label - base];
    return ClusterRow{(slot % stride) / nthreads, (slot / stride) * nthreads + slot % nthreads};
  };
  const R alpha = R((1.0 + sqrt(17.0)) / 8.0);
  const int j0 = progress[item];
  int info = 0;
  int label[M];
#pragma unroll
  for (int m = 0; m < M; ++m) label[m] = base + rank * nthreads + tid + m * stride;
  for (int i = tid; i < rows; i += nthreads) slot_of[i] = i;

  // Every slot's L read, the sum kept by a select: a branch around each read compiled to ~13
  // instructions a column (session 21's SASS of a one-block panel like this one).
  auto gemv = [&](int k, int c, const T* wrow, const T (&from)[M], T (&out)[M]) {
    bool live[M];
#pragma unroll
    for (int m = 0; m < M; ++m) out[m] = from[m], live[m] = label[m] >= k && label[m] < n;
    const T* l_col = &L(0, 0);  // L(m, cc) at l_col[m * nthreads]
    for (int cc = 0; cc < c; ++cc, l_col += ld) {
      const T wv = wrow[cc];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const T lv = l_col[m * nthreads];
        out[m] = live[m] ? out[m] - lv * wv : out[m];
      }
    }
  };
  auto load_column = [&](int col, T (&out)[M]) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int i = label[m];
      out[m] = i >= col && i < n ? A(i, col) : T(0);
    }
  };
  // The argmax of candidate set `set`, once every warp's candidate is in (the largest, ties to
  // the smallest index, as block_argmax_of): each warp reduces the whole set.
  auto reduce_candidates = [&](int set, int none, R* value, int* index) {
    const R* set_v = cand_v + set * cands;
    const int* set_i = cand_i + set * cands;
    R best = R(-1);
    int best_i = INT_MAX;
    for (int e = lane; e < cands; e += 32) {
      if (set_v[e] > best || (set_v[e] == best && set_i[e] < best_i)) {
        best = set_v[e], best_i = set_i[e];
      }
    }
    warp_argmax_all(best, best_i);
    *value = best < R(0) ? R(0) : best;
    *index = best < R(0) ? none : best_i;
  };
  // The cluster's argmax: each warp's candidate into every block's set, one cluster barrier.
  auto cluster_argmax = [&](R best, int best_i, int set, int none, R* value, int* index) {
    warp_argmax_all(best, best_i);
    if (lane < ranks) {
      *remote(cand_v + set * cands + rank * warps + warp, lane) = best;
      *remote(cand_i + set * cands + rank * warps + warp, lane) = best_i;
    }
    cluster.sync();
    reduce_candidates(set, none, value, index);
  };
  // The same over set `set` (this step's second), each warp's candidate by st.async onto every
  // block's mbarrier of the step's parity, whose phase (with the step's slots pushed the same way)
  // each block waits for: no cluster barrier, no GPU-scope fence. What is exchanged so is shared
  // memory alone; the reuse of these sets two steps on waits for the next step's cluster barrier.
  unsigned phases = 0;  // each mbarrier's current phase parity
  auto cluster_argmax_async = [&](R best, int best_i, int set, int none, int parity, R* value,
                                  int* index) {
    warp_argmax_all(best, best_i);
    if (lane < ranks) {
      push_async(cand_v + set * cands + rank * warps + warp, bars + parity, lane, best);
      push_async(cand_i + set * cands + rank * warps + warp, bars + parity, lane, best_i);
    }
    wait_phase(bars + parity, (phases >> parity) & 1u);
    phases ^= 1u << parity;
    reduce_candidates(set, none, value, index);
  };

  int k = j0, cur = 0, parity = 0;
  T ak[M];  // column k, not yet updated (read during the step before)
  load_column(k, ak);
  if (tid == 0) {
    for (int b = 0; b < 2; ++b) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(
          static_cast<unsigned>(__cvta_generic_to_shared(bars + b))));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // slot_of and the mbarriers in; every block of the cluster started before any writes to its
  // shared memory.
  cluster.sync();
  while (k < target) {
    const int c = k - j0;
    T* x = slots + parity * kLabelSlots;
    auto push = [&](int slot, T v) {
      for (int q = 0; q < ranks; ++q) *remote(x + slot, q) = v;
    };
    T w0[M], w1[M];
    R best = -1;
    int best_i = INT_MAX;
#pragma unroll
    for (int m = 0; m < M; ++m) w1[m] = T(0);
    gemv(k, c, wk + cur * (nb + 2), ak, w0);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const int i = label[m];
      if (i < k || i >= n) continue;
      W(m, c) = w0[m];
      if (i == k) push(kK0, w0[m]);
      if (i == k + 1) push(kK10, w0[m]), push(kA10, ak[m]);
      if (i == k + 2) push(kK20, w0[m]);
      const R v = abs1(w0[m]);
      if (i > k && beats(v, i, best, best_i)) best = v, best_i = i;
    }
    R colmax;
    int imax;
    cluster_argmax(best, best_i, 2 * parity, k + 1, &colmax, &imax);
    // The next step's column (k + 1 or k + 2), read now that the last step's writes are in;
    // what this step's interchange writes there is patched in below.
    T next1[M], next2[M];
    load_column(k + 1, next1);
    load_column(k + 2, next2);
    const R absakk = abs1(x[kK0]);
    int kp = k, kstep = 1;
    const bool zero_column = nothing_to_pivot(absakk, colmax, k, &info);
    if (!zero_column && !(absakk >= alpha * colmax)) {
      const ClusterRow at = owner(imax);
      for (int cc = tid; cc < c; cc += nthreads) wr[cc] = *remote(ws + at.local + cc * ld, at.rank);
      T from[M];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int i = label[m];
        from[m] = i >= k && i < n ? (i < imax ? A(imax, i) : A(i, imax)) : T(0);
      }
      __syncthreads();
      gemv(k, c, wr, from, w1);
      // What this exchange brings every block: each warp's candidate, and the slots of rows k,
      // k + 1 (imax > k is a row), k + 2 where there is one and imax.
      if (tid == 0) {
        arrive_expect_bytes(bars + parity,
                            cands * (sizeof(R) + sizeof(int)) + sizeof(T) * (k + 2 < n ? 6 : 4));
      }
      auto push_slot = [&](int slot, T v) {
        for (int q = 0; q < ranks; ++q) push_async(x + slot, bars + parity, q, v);
      };
      best = -1;
      best_i = INT_MAX;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int i = label[m];
        if (i < k || i >= n) continue;
        W(m, c + 1) = w1[m];
        if (i == k) push_slot(kK1, w1[m]);
        if (i == k + 1) push_slot(kK11, w1[m]);
        if (i == k + 2) push_slot(kK21, w1[m]), push_slot(kA21, next1[m]);
        if (i == imax) push_slot(kR0, w0[m]), push_slot(kR1, w1[m]);
        const R v = abs1(w1[m]);
        if (i != imax && v > best) best = v, best_i = i;
      }
      R rowmax;
      int unused;
      cluster_argmax_async(best, best_i, 2 * parity + 1, k, parity, &rowmax, &unused);
      bunch_kaufman_pivot(absakk, colmax, rowmax, alpha, k, imax,
                          [&] { return abs1(x[kR1]); }, &kp, &kstep);
    }
    const int kk = k + kstep - 1, kn = k + kstep;
    const bool swap = kp != kk;
    // The next W(k, 0:c)'s earlier columns: the row labelled kn after this step's trade.
    const ClusterRow src = owner(swap && kp == kn ? kk : kn);
    finish_label_step(n, k, c, kp, kstep, zero_column, x, ak, next1, next2, w0, w1, label, A, L,
                      W);
    if (kn < target) {
      // The next W(k, 0:c + kstep): the earlier columns from their owner, this step's from the
      // slots (the entries of the row labelled kn).
      T* next_wk = wk + (1 - cur) * (nb + 2);
      for (int cc = tid; cc < c + kstep; cc += nthreads) {
        T v;
        if (cc < c) {
          v = *remote(ws + src.local + cc * ld, src.rank);
        } else if (kstep == 1) {
          v = !swap ? x[kK10] : kp == kn ? x[kK1] : x[kK11];
        } else if (cc == c) {
          v = kp == kn ? x[kK10] : x[kK20];
        } else {
          v = kp == kn ? x[kK11] : x[kK21];
        }
        next_wk[cc] = v;
      }
    }
    if (tid == 0) {
      if (rank == 0) record_pivot(mine.ipiv, k, kp, kstep, 0);
      record_pivot(piv - j0, k, kp, kstep, 0);
    }
    __syncthreads();  // the next W(k) in; slot_of read for this step
    if (tid == 0 && swap) {
      const int t = slot_of[kk - base];
      slot_of[kk - base] = slot_of[kp - base];
      slot_of[kp - base] = t;
    }
#pragma unroll
    for (int m = 0; m < M; ++m) ak[m] = kstep == 1 ? next1[m] : next2[m];
    k = kn;
    cur = 1 - cur;
    parity = 1 - parity;
  }
  __syncthreads();  // piv

  write_label_panel(n, nb, target, j0, k, piv, label, a, w, l, ld, L, W);
  if (rank == 0 && tid == 0) {
    progress[item] = k;
    if (info != 0 && info_all[item] == 0) info_all[item] = info;
  }
  cluster.sync();  // no block leaves while another may still read its shared memory
#endif
}

// Shared memory of a block of lasyf_lower_cluster_kernel: two mbarriers, its L and W (`local`
// rows x (nb + 1) each), W(k) twice and W(imax), two steps' slots and argmax candidates (a warp
// of the cluster's each), the panel's pivots and where each of its `rows` rows lives.
template <typename T>
size_t lasyf_cluster_shared_bytes(int64_t local, int64_t nb, int64_t ranks, int64_t warps,
                                  int64_t rows) {
  using R = typename real_of<T>::type;
  const size_t cands = static_cast<size_t>(ranks * warps);
  const size_t entries = 2 * static_cast<size_t>(local) * (nb + 1) + 3 * (nb + 2) + 2 * kLabelSlots;
  return kClusterBarrierBytes + entries * sizeof(T) + 4 * cands * sizeof(R) +
         (4 * cands + static_cast<size_t>(nb) + 2 + static_cast<size_t>(rows)) * sizeof(int);
}

// Shared memory of lasyf_lower_shared_kernel: L and W (rows x (nb + 1) each), the step's slots,
// the argmaxes' warp slots and the panel's pivots.
template <typename T>
size_t lasyf_shared_bytes(int64_t rows, int64_t nb) {
  using R = typename real_of<T>::type;
  return (2 * static_cast<size_t>(rows) * (nb + 1) + 8) * sizeof(T) +
         64 * sizeof(R) + (64 + static_cast<size_t>(nb) + 2) * sizeof(int);
}

// Block (matrix, chunk of up to kRhsPerBlock right-hand sides) solves with LAPACK ?sytrs's
// sequence for UPLO = 'L': forward through the pivots with L and D, then back with L^T. A warp
// per right-hand side (up to kWarps): a step's value is read right after another thread wrote
// it, so the chunk of B sits in shared memory when it fits (ld_shared > 0), where that round
// trip is several times shorter than through L2, and a block has no warp without a column.
// kFactorShared: the factor's lower triangle (packed by columns) and the pivots are copied to
// shared memory first, after B's chunk, so that no step waits for L2 for its pivot and column
// (H100 ldl_solve, the whole call, in global / shared memory: float32 1 x 128 0.406 / 0.362 ms,
// float64 256 x 128 0.948 / 0.847; s18-ldl-solve-global-a / smem-a). Up to n = 128 the warp
// kernel below takes it.
constexpr int kRhsPerBlock = 32;
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
// float64 256 x 128 0.943 / 0.847 / 0.807; s18-ldl-solve-global-c / smem-a / warp-a). B(i) of a
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

// The blocked solve (sytrs_lower_blocked_*; NumPy model benchmarks/diag/
// ldl_solve_blocked_model.py). The blocks are cut at K0 = 0, nb, 2 nb, ... for the whole batch;
// a matrix whose 2x2 pivot straddles a cut moves that cut one column down, so its block is
// [k0, k1) with k0 in {K0, K0 + 1}, k1 in {K1, K1 + 1} (K1 = min(n, K0 + nb)). The GEMMs take
// the common columns K0..K0 + nb and rows from K1 + 1 on; y holds the block's solved values
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

}  // namespace

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

template <typename T>
cudaError_t sytrf_lower_batched(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                                int* info, int threads) {
  using D = typename device_type<T>::type;
  return launch_sytf2(stream, count, n, n, nullptr, reinterpret_cast<D*>(a), ipiv, info,
                      threads);
}

template <typename T, int N>
cudaError_t launch_sytrf_small(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                               int* info) {
  sytrf_small_kernel<T, N><<<static_cast<unsigned>(count), 32, N * (N + 1) * sizeof(T), stream>>>(
      static_cast<int>(n), a, ipiv, info);
  return cudaGetLastError();
}

template <typename T>
cudaError_t sytrf_small_batched(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                                int* info) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > kLdlWarpMaxN || count > INT32_MAX) return cudaErrorInvalidValue;
  D* ad = reinterpret_cast<D*>(a);
  if (n <= 8) return launch_sytrf_small<D, 8>(stream, count, n, ad, ipiv, info);
  if (n <= 16) return launch_sytrf_small<D, 16>(stream, count, n, ad, ipiv, info);
  return launch_sytrf_small<D, 32>(stream, count, n, ad, ipiv, info);
}

template <typename T, int kRows, int kCols>
cudaError_t launch_sytrf_small_block(cudaStream_t stream, int64_t count, int64_t n, T* a,
                                     int* ipiv, int* info) {
  const int threads = 32 * static_cast<int>((n + kCols - 1) / kCols);
  const size_t smem_bytes = 2 * static_cast<size_t>(n * n) * sizeof(T);
  auto kernel = sytrf_small_block_kernel<T, kRows, kCols>;
  if (cudaError_t err = allow_shared(kernel, smem_bytes); err != cudaSuccess) return err;
  kernel<<<static_cast<unsigned>(count), threads, smem_bytes, stream>>>(static_cast<int>(n), a,
                                                                        ipiv, info);
  return cudaGetLastError();
}

template <typename T>
cudaError_t sytrf_small_block_batched(cudaStream_t stream, int64_t count, int64_t n, T* a,
                                      int* ipiv, int* info, int cols) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > kLdlSmallBlockMaxN || count > INT32_MAX) return cudaErrorInvalidValue;
  D* ad = reinterpret_cast<D*>(a);
  // kRows rows a lane (n <= 32 kRows), kRows .. 8 kRows columns a thread.
  auto launch = [&](auto rows) {
    constexpr int kRows = decltype(rows)::value;
    if (cols <= kRows) {
      return launch_sytrf_small_block<D, kRows, kRows>(stream, count, n, ad, ipiv, info);
    }
    if (cols <= 2 * kRows) {
      return launch_sytrf_small_block<D, kRows, 2 * kRows>(stream, count, n, ad, ipiv, info);
    }
    if (cols <= 4 * kRows) {
      return launch_sytrf_small_block<D, kRows, 4 * kRows>(stream, count, n, ad, ipiv, info);
    }
    return launch_sytrf_small_block<D, kRows, 8 * kRows>(stream, count, n, ad, ipiv, info);
  };
  if (n <= 32) return launch(std::integral_constant<int, 1>{});
  return launch(std::integral_constant<int, 2>{});
}

template <typename T>
cudaError_t sytf2_lower_tail_batched(cudaStream_t stream, int64_t count, int64_t n,
                                     int64_t m_max, const int* start, T* a, int* ipiv,
                                     int* info, int threads) {
  using D = typename device_type<T>::type;
  return launch_sytf2(stream, count, n, m_max, start, reinterpret_cast<D*>(a), ipiv, info,
                      threads);
}

// An integer setting from the environment (to measure others), else `fallback`; read once per
// process by the caller's static.
inline int64_t env_int(const char* name, int64_t fallback) {
  const char* env = std::getenv(name);
  return env ? std::atoll(env) : fallback;
}

// Rows a thread of lasyf_lower_shared_kernel owns at most (three registers of entries each).
constexpr int64_t kPanelMaxRowsPerThread = 4;

// f(std::integral_constant<int, M>{}) with M the panel kernels' rows a thread for `per_thread`
// rows: 1, 2, or kPanelMaxRowsPerThread (their template instances).
template <typename F>
auto with_rows_per_thread(int64_t per_thread, F f) {
  if (per_thread == 1) return f(std::integral_constant<int, 1>{});
  if (per_thread == 2) return f(std::integral_constant<int, 2>{});
  return f(std::integral_constant<int, static_cast<int>(kPanelMaxRowsPerThread)>{});
}

// Whether a panel over `rows` rows and nb columns runs lasyf_lower_shared_kernel: its L and W in
// the block's shared memory. JCM_LDL_PANEL_SHARED=0 keeps every panel in global memory
// (lasyf_lower_kernel), to measure. (W alone in L2, for panels twice as wide, was slower at every
// shape measured, its GEMVs waiting on L2: float32 1x1024 2.72 -> 2.95 ms, 1x2048 7.82 -> 9.62;
// s19-ldl-panel-shared-a / s19-ldl-panel-lw.)
template <typename D>
bool panel_fits_shared(int64_t rows, int64_t nb) {
  static const bool enabled = env_int("JCM_LDL_PANEL_SHARED", 1) != 0;
  if (!enabled || rows > kMaxThreads * kPanelMaxRowsPerThread) return false;
  return lasyf_shared_bytes<D>(rows, nb) + kStaticShared <= shared_optin_bytes();
}

template <typename D, int M>
cudaError_t launch_lasyf_shared(cudaStream_t stream, int64_t count, int64_t n, int64_t nb,
                                int64_t target, D* a, D* w, D* l, int* progress, int* ipiv,
                                int* info, int threads) {
  const size_t smem = lasyf_shared_bytes<D>(n - (target - nb), nb);
  if (cudaError_t err = allow_shared(lasyf_lower_shared_kernel<D, M>, smem); err != cudaSuccess) {
    return err;
  }
  lasyf_lower_shared_kernel<D, M><<<static_cast<unsigned>(count), threads, smem, stream>>>(
      static_cast<int>(n), static_cast<int>(nb), static_cast<int>(target), a, w, l, progress,
      ipiv, info);
  return cudaGetLastError();
}

template <typename D>
cudaError_t launch_lasyf_shared(cudaStream_t stream, int64_t count, int64_t n, int64_t nb,
                                int64_t target, D* a, D* w, D* l, int* progress, int* ipiv,
                                int* info) {
  // A thread per row up to 1024 rows, then 1024 threads of 2 or 4 rows each; or
  // JCM_LDL_PANEL_THREADS (with as many rows a thread as that takes), to measure (512 threads
  // from 1024 rows on: float32 1x2048 7.82 -> 8.04 ms; s19-ldl-panel-shared-t512).
  static const int forced = [] {
    const int value = static_cast<int>(env_int("JCM_LDL_PANEL_THREADS", 0));
    return valid_threads(value) ? value : 0;
  }();
  const int64_t rows = n - (target - nb);
  int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, (rows + 31) / 32 * 32));
  if (forced && (rows + forced - 1) / forced <= kPanelMaxRowsPerThread) threads = forced;
  return with_rows_per_thread((rows + threads - 1) / threads, [&](auto m) {
    return launch_lasyf_shared<D, decltype(m)::value>(stream, count, n, nb, target, a, w, l,
                                                      progress, ipiv, info, threads);
  });
}

// The widest of nb, nb / 2, ... whose one-block panel (L and W) fits in shared memory, or 0.
// A narrower panel means more GEMMs over every matrix's trailing square (their traffic grows
// with count n^2 elements, what the panel saves with n): 8 columns pay up to count n elements
// of 128 KiB (H100 float64 4x1024 5.57 -> 3.92 ms, float32 16x2048 21.6 -> 19.7), not beyond
// (float64 64x1024 11.3 -> 14.6, 16x2048 26.8 -> 29.3); 16 columns up to 512 KiB (float32
// 64x1024 8.66 -> 6.86; s19-ldl-panel-global-a / shared-a, the grid of session 19 call 5).
template <typename D>
int64_t one_block_width(int64_t rows, int64_t nb, int64_t count) {
  const int64_t bytes = count * rows * static_cast<int64_t>(sizeof(D));
  const int64_t narrowest = bytes <= (int64_t{128} << 10)   ? kLdlMinSharedBlock
                            : bytes <= (int64_t{512} << 10) ? 16
                                                            : nb;
  for (int64_t width = nb; width >= narrowest; width /= 2) {
    if (panel_fits_shared<D>(rows, width)) return width;
  }
  return 0;
}

// A panel's launch over a cluster of blocks (lasyf_lower_cluster_kernel): `ranks` blocks a
// matrix (0: not on a cluster), `threads` each, `per_thread` rows a thread.
struct ClusterPanel {
  int ranks = 0;
  int threads = 0;
  int per_thread = 0;
  size_t smem = 0;
};

template <typename D, int M>
cudaError_t prepare_cluster_kernel(const ClusterPanel& shape) {
  auto kernel = lasyf_lower_cluster_kernel<D, M>;
  if (cudaError_t err = allow_shared(kernel, shape.smem); err != cudaSuccess) return err;
  if (shape.ranks > 8) {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  }
  return cudaSuccess;
}

template <typename D, int M>
cudaLaunchConfig_t cluster_config(const ClusterPanel& shape, int64_t count, cudaStream_t stream,
                                  cudaLaunchAttribute* attribute) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(count * shape.ranks));
  config.blockDim = dim3(static_cast<unsigned>(shape.threads));
  config.dynamicSmemBytes = shape.smem;
  config.stream = stream;
  attribute->id = cudaLaunchAttributeClusterDimension;
  attribute->val.clusterDim.x = static_cast<unsigned>(shape.ranks);
  attribute->val.clusterDim.y = 1;
  attribute->val.clusterDim.z = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  return config;
}

// Whether the device runs a cluster of this shape at all (shared memory per SM, cluster size),
// asked once per shape.
template <typename D, int M>
bool cluster_fits(const ClusterPanel& shape) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, size_t>, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(shape.ranks, shape.threads, shape.smem);
  if (auto it = known.find(key); it != known.end()) return it->second;
  int clusters = 0;
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = cluster_config<D, M>(shape, 1, nullptr, &attribute);
  const bool fits = prepare_cluster_kernel<D, M>(shape) == cudaSuccess &&
                    cudaOccupancyMaxActiveClusters(&clusters, lasyf_lower_cluster_kernel<D, M>,
                                                   &config) == cudaSuccess &&
                    clusters > 0;
  cudaGetLastError();
  known[key] = fits;
  return fits;
}

// The cluster a panel over `rows` rows of `count` matrices runs on, where it runs on one: up to
// JCM_LDL_PANEL_CLUSTER_COUNT matrices (default 16; float64 16x2048 24.5 -> 17.6 ms, float32
// 19.7 -> 14.8, but 64x1024 float64 10.7 against 10.3 in global memory; s20-ldl-c7-*) whose
// one-block panel would be narrower than 16 columns, not fit at all, or (up to
// JCM_LDL_PANEL_CLUSTER_TALL_COUNT matrices, default 16) take more rows than threads
// (JCM_LDL_PANEL_CLUSTER_MIN_ROWS: from that many rows instead, to measure and test; a panel too
// wide for such a cluster then runs on it at the one-block width), blocks of
// JCM_LDL_PANEL_CLUSTER_THREADS (default 256) a thread per row, as many as the rows take up to
// JCM_LDL_PANEL_CLUSTER blocks (default 8, the portable size; 0: never), two or four rows a
// thread beyond that. sm_90 and later. (H100, the whole
// factorization: float32 1x2048 6.79 -> 6.46 ms, float64 1x2048 10.8 -> 7.76 and 6.96 with
// clusters also for 8 columns, 4x2048 16.1 -> 10.1; where 16 or 32 columns fit one block, its
// steps are shorter: float32 1x1024 2.35 vs 2.98 on 4 blocks of 256, 2.93 on 2 of 512;
// s20-ldl-cluster2-*, s20-ldl-c6-*.)
template <typename D>
ClusterPanel cluster_panel_shape(int64_t rows, int64_t nb, int64_t count) {
  static const int max_ranks = static_cast<int>(
      std::min<int64_t>(kClusterPanelMaxRanks, env_int("JCM_LDL_PANEL_CLUSTER", 8)));
  static const int64_t min_rows = env_int("JCM_LDL_PANEL_CLUSTER_MIN_ROWS", -1);
  static const int64_t max_count = env_int("JCM_LDL_PANEL_CLUSTER_COUNT", 16);
  static const int64_t tall_count = env_int("JCM_LDL_PANEL_CLUSTER_TALL_COUNT", 16);
  static const int threads = [] {
    const int value = static_cast<int>(env_int("JCM_LDL_PANEL_CLUSTER_THREADS", 256));
    return valid_threads(value) && value <= kClusterPanelMaxThreads ? value : 256;
  }();
  static const bool has_clusters = [] {
    int device = 0, major = 0;
    const bool ok = cudaGetDevice(&device) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) ==
                        cudaSuccess;
    cudaGetLastError();
    return ok && major >= 9;
  }();
  ClusterPanel shape;
  if (!has_clusters || max_ranks < 2 || count > max_count) return shape;
  // A one-block panel of more rows than threads (two or four rows a thread: float32 from 1025
  // rows) runs its steps slower than a cluster since the cluster's steps lost one of their two
  // cluster barriers (float32 1x2048 5.72 -> 5.42 ms; s25-c1-stasync-min1025).
  const bool tall = rows > kMaxThreads && count <= tall_count;
  if (min_rows >= 0 ? rows < min_rows
                    : !tall && one_block_width<D>(rows, nb, count) >= std::min<int64_t>(16, nb)) {
    return shape;
  }
  for (int per_thread : {1, 2, 4}) {
    const int64_t ranks = (rows + int64_t{threads} * per_thread - 1) / (threads * per_thread);
    if (ranks > max_ranks) continue;
    if (ranks < 2) return shape;
    shape = {static_cast<int>(ranks), threads, per_thread,
             lasyf_cluster_shared_bytes<D>(int64_t{per_thread} * threads, nb, ranks,
                                           threads / 32, rows)};
    const bool fits =
        shape.smem + kStaticShared <= shared_optin_bytes() &&
        with_rows_per_thread(per_thread, [&](auto m) {
          return cluster_fits<D, decltype(m)::value>(shape);
        });
    return fits ? shape : ClusterPanel{};
  }
  return shape;
}

template <typename D, int M>
cudaError_t launch_lasyf_cluster(cudaStream_t stream, const ClusterPanel& shape, int64_t count,
                                 int64_t n, int64_t nb, int64_t target, D* a, D* w, D* l,
                                 int* progress, int* ipiv, int* info) {
  if (cudaError_t err = prepare_cluster_kernel<D, M>(shape); err != cudaSuccess) return err;
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = cluster_config<D, M>(shape, count, stream, &attribute);
  return cudaLaunchKernelEx(&config, lasyf_lower_cluster_kernel<D, M>, static_cast<int>(n),
                            static_cast<int>(nb), static_cast<int>(target), a, w, l, progress,
                            ipiv, info);
}

template <typename D>
cudaError_t launch_lasyf_cluster(cudaStream_t stream, const ClusterPanel& shape, int64_t count,
                                 int64_t n, int64_t nb, int64_t target, D* a, D* w, D* l,
                                 int* progress, int* ipiv, int* info) {
  return with_rows_per_thread(shape.per_thread, [&](auto m) {
    return launch_lasyf_cluster<D, decltype(m)::value>(stream, shape, count, n, nb, target, a, w,
                                                       l, progress, ipiv, info);
  });
}

template <typename T>
int64_t lasyf_panel_width(int64_t rows, int64_t nb, int64_t count) {
  using D = typename device_type<T>::type;
  if (cluster_panel_shape<D>(rows, nb, count).ranks > 0) return nb;
  const int64_t width = one_block_width<D>(rows, nb, count);
  return width > 0 ? width : nb;
}

template <typename T>
cudaError_t lasyf_lower_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nb,
                                int64_t target, T* a, T* w, T* l, int* progress, int* ipiv,
                                int* info, int threads) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (nb < 1 || nb > kLdlMaxBlock || target < nb || target >= n || n > INT32_MAX ||
      count > INT32_MAX || !valid_threads(threads)) {
    return cudaErrorInvalidValue;
  }
  D* ad = reinterpret_cast<D*>(a);
  D* wd = reinterpret_cast<D*>(w);
  D* ldd = reinterpret_cast<D*>(l);
  if (const ClusterPanel shape = cluster_panel_shape<D>(n - (target - nb), nb, count);
      shape.ranks > 0) {
    return launch_lasyf_cluster<D>(stream, shape, count, n, nb, target, ad, wd, ldd, progress,
                                   ipiv, info);
  }
  if (panel_fits_shared<D>(n - (target - nb), nb)) {
    return launch_lasyf_shared<D>(stream, count, n, nb, target, ad, wd, ldd, progress, ipiv, info);
  }
  lasyf_lower_kernel<D><<<static_cast<unsigned>(count), threads, (nb + 1) * sizeof(D), stream>>>(
      static_cast<int>(n), static_cast<int>(nb), static_cast<int>(target), ad, wd, ldd, progress,
      ipiv, info);
  return cudaGetLastError();
}

template <typename T>
cudaError_t sytrs_lower_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                                const T* ld, const int64_t* ipiv, T* b) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0 || nrhs <= 0) return cudaSuccess;
  const int64_t chunks = (nrhs + kRhsPerBlock - 1) / kRhsPerBlock;
  if (n > INT32_MAX || count > INT32_MAX || chunks > 65535) return cudaErrorInvalidValue;
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
  // JCM_LDL_SOLVE_SHARED_FACTOR=0 keeps it in global memory, to measure.
  static const bool factor_shared = env_int("JCM_LDL_SOLVE_SHARED_FACTOR", 1) != 0;
  if (factor_shared && n <= 32 * kSolveWarpMaxRows &&
      factor_bytes + kStaticShared <= kSolveFactorSharedBytes) {
    auto launch = [&](auto kernel) {
      if (cudaError_t err = allow_shared(kernel, factor_bytes); err != cudaSuccess) return err;
      kernel<<<grid, std::max(threads, 128), factor_bytes, stream>>>(n32, nrhs32, ld_d, ipiv, b_d);
      return cudaGetLastError();
    };
    if (n <= 32) return launch(sytrs_lower_warp_kernel<D, 1>);
    if (n <= 64) return launch(sytrs_lower_warp_kernel<D, 2>);
    return launch(sytrs_lower_warp_kernel<D, kSolveWarpMaxRows>);
  }
  if (factor_shared && smem + kStaticShared <= kSolveFactorSharedBytes) {
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

// The blocked solve kernels' grid, (count, right-hand-side chunks); grid.x == 0: nothing to do.
inline cudaError_t solve_block_grid(int64_t count, int64_t n, int64_t nrhs, int64_t nb,
                                    int64_t k0, dim3& grid) {
  grid = dim3(0, 0);
  if (count <= 0 || n <= 0 || nrhs <= 0) return cudaSuccess;
  const int64_t chunks = (nrhs + kRhsPerBlock - 1) / kRhsPerBlock;
  if (nb < 2 || nb > kLdlSolveMaxBlock || k0 < 0 || k0 >= n || n > INT32_MAX ||
      count > INT32_MAX || chunks > 65535) {
    return cudaErrorInvalidValue;
  }
  grid = dim3(static_cast<unsigned>(count), static_cast<unsigned>(chunks));
  return cudaSuccess;
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

#define JCM_LDL_KERNELS(T)                                                                     \
  template cudaError_t sytrf_small_batched<T>(cudaStream_t, int64_t, int64_t, T*, int*, int*);  \
  template cudaError_t sytrf_small_block_batched<T>(cudaStream_t, int64_t, int64_t, T*, int*,     \
                                                    int*, int);                                   \
  template cudaError_t sytrf_lower_batched<T>(cudaStream_t, int64_t, int64_t, T*, int*, int*,  \
                                              int);                                            \
  template cudaError_t sytf2_lower_tail_batched<T>(cudaStream_t, int64_t, int64_t, int64_t,    \
                                                   const int*, T*, int*, int*, int);            \
  template cudaError_t lasyf_lower_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, int64_t,  \
                                              T*, T*, T*, int*, int*, int*, int);               \
  template int64_t lasyf_panel_width<T>(int64_t, int64_t, int64_t);                              \
  template cudaError_t sytrs_lower_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, const T*, \
                                              const int64_t*, T*);                              \
  template cudaError_t sytrs_lower_blocked_forward<T>(cudaStream_t, int64_t, int64_t, int64_t,   \
                                                      int64_t, int64_t, const T*, const int64_t*, \
                                                      T*, T*);                                  \
  template cudaError_t sytrs_lower_blocked_backward<T>(cudaStream_t, int64_t, int64_t, int64_t,  \
                                                       int64_t, int64_t, bool, const T*,        \
                                                       const int64_t*, T*, const T*);  \
  template cudaError_t ldl_solve_convert<T>(cudaStream_t, int64_t, int64_t, const T*,            \
                                            const int64_t*, T*, int*, int*, int2*);              \
  template bool ldl_solve_convert_fits<T>(int64_t);                                              \
  template cudaError_t ldl_solve_permute<T>(cudaStream_t, int64_t, int64_t, int64_t, const int*, \
                                            const T*, T*, bool);                                 \
  template cudaError_t ldl_solve_diagonal<T>(cudaStream_t, int64_t, int64_t, int64_t, const T*,  \
                                             const int*, T*);
JCM_LDL_KERNELS(float)
JCM_LDL_KERNELS(double)
JCM_LDL_KERNELS(cuComplex)
JCM_LDL_KERNELS(cuDoubleComplex)
#undef JCM_LDL_KERNELS

}  // namespace jcm
