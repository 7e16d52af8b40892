// Device helpers shared by the LDL^T kernels' translation units (ldl_*_kernels.cu; private to
// ffi/ldl/): Bunch-Kaufman's pivot arithmetic, which every factor kernel computes with the same
// expressions (so the same bits), the pieces the ?lasyf panels share (one block or a cluster of
// blocks a matrix), and the host-side sizing that chooses between those panels.
#pragma once

#include "core/kernel_util.cuh"
#include "ldl/ldl_kernels.h"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace jcm {
namespace ldl {

using namespace kernel;

// ---------------------------------------------------------------------------------------------
// Bunch-Kaufman pivoting (LAPACK ?sytf2 / ?lasyf)
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// The ?lasyf panels' shared pieces (ldl_panel_kernels.cu, ldl_cluster_kernels.cu)
// ---------------------------------------------------------------------------------------------

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

// One row of a panel's GEMM operands: its columns 0..nb of L and W (column stride ld, in shared
// memory) to l and w (column stride n), zero from column live_cols on. By pointer: a 64-bit
// element offset worked out again for every entry made these write-outs a fifth of a 1024-row
// panel's instructions (ncu).
template <typename T>
__device__ inline void write_operand_row(const T* l_row, const T* w_row, T* l_out, T* w_out,
                                         int ld, int n, int nb, int live_cols) {
  for (int cc = 0; cc <= nb; ++cc, l_row += ld, w_row += ld, l_out += n, w_out += n) {
    const bool live = cc < live_cols;
    *l_out = live ? *l_row : T(0);
    *w_out = live ? *w_row : T(0);
  }
}

// Shared memory of lasyf_lower_shared_kernel: L and W (rows x (nb + 1) each), the step's slots,
// the argmaxes' warp slots and the panel's pivots.
template <typename T>
size_t lasyf_shared_bytes(int64_t rows, int64_t nb) {
  using R = typename real_of<T>::type;
  return (2 * static_cast<size_t>(rows) * (nb + 1) + 8) * sizeof(T) +
         64 * sizeof(R) + (64 + static_cast<size_t>(nb) + 2) * sizeof(int);
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
// the block's shared memory; else lasyf_lower_kernel keeps them in global memory. (W alone in
// L2, for panels twice as wide, was slower at every shape measured, its GEMVs waiting on L2:
// float32 1x1024 2.72 -> 2.95 ms, 1x2048 7.82 -> 9.62; the H100 report.)
template <typename D>
bool panel_fits_shared(int64_t rows, int64_t nb) {
  if (rows > kMaxThreads * kPanelMaxRowsPerThread) return false;
  return lasyf_shared_bytes<D>(rows, nb) + kStaticShared <= shared_optin_bytes();
}

// The widest of nb, nb / 2, ... whose one-block panel (L and W) fits in shared memory, or 0.
// A narrower panel means more GEMMs over every matrix's trailing square (their traffic grows
// with count n^2 elements, what the panel saves with n): 8 columns pay up to count n elements
// of 128 KiB (H100 float64 4x1024 5.57 -> 3.92 ms, float32 16x2048 21.6 -> 19.7), not beyond
// (float64 64x1024 11.3 -> 14.6, 16x2048 26.8 -> 29.3); 16 columns up to 512 KiB (float32
// 64x1024 8.66 -> 6.86; the H100 report).
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

// A panel's launch over a cluster of blocks (lasyf_lower_cluster_kernel, ldl_cluster_kernels.cu):
// `ranks` blocks a matrix (0: not on a cluster), `threads` each, `per_thread` rows a thread,
// `smem` bytes of dynamic shared memory a block.
struct ClusterPanel {
  int ranks = 0;
  int threads = 0;
  int per_thread = 0;
  size_t smem = 0;
};

// The cluster a panel over `rows` rows of `count` matrices runs on, or ranks == 0 where it runs
// on one block a matrix (ldl_cluster_kernels.cu says when). D: the device type.
template <typename D>
ClusterPanel cluster_panel_shape(int64_t rows, int64_t nb, int64_t count);

// Launches lasyf_lower_cluster_kernel on cluster_panel_shape's `shape` (ranks > 0).
template <typename D>
cudaError_t launch_lasyf_cluster(cudaStream_t stream, const ClusterPanel& shape, int64_t count,
                                 int64_t n, int64_t nb, int64_t target, D* a, D* w, D* l,
                                 int* progress, int* ipiv, int* info);

}  // namespace ldl
}  // namespace jcm
