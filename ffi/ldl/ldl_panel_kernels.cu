// One panel of the blocked LDL^T factorization (LAPACK ?lasyf, lower) with one thread block a
// matrix: the panel's L and W in the block's shared memory where they fit, else in global
// memory; and the choice among these and the cluster panel (ldl_cluster_kernels.cu).
#include "ldl/ldl_device.cuh"
#include "ldl/ldl_kernels.h"

#include "core/kernel_util.cuh"

#include <algorithm>
#include <climits>
#include <cstdint>

namespace jcm {

namespace {

using namespace kernel;
using namespace ldl;

// One panel of the blocked LDL^T (LAPACK ?lasyf, UPLO = 'L'), one block per matrix, the matrix
// and the panel's W = L D in global memory (L2). Matrix b's panel starts at its own column
// progress[b] and takes column steps while k < target, so a 2x2 pivot at target - 1 ends it at
// target + 1: every panel of the batch ends at target or target + 1, and one uniform update of
// rows and columns target.. (strided-batched GEMMs, ldl_handlers.cc) serves them all, from the
// zero-padded copies this kernel leaves in w and l (n x (nb + 1) each, the matrix's rows; rows
// below the panel's end and columns past its width are zero). Then the panel's interchanges
// are partly undone in its columns, as ?lasyf stores L.
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
  // at every access to A (ncu's SASS). An offset, not the pointer, so that its
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

// A thread per row up to 1024 rows, then 1024 threads of 2 or 4 rows each (512 threads from
// 1024 rows on were slower: float32 1x2048 7.82 -> 8.04 ms; the H100 report).
template <typename D>
cudaError_t launch_lasyf_shared(cudaStream_t stream, int64_t count, int64_t n, int64_t nb,
                                int64_t target, D* a, D* w, D* l, int* progress, int* ipiv,
                                int* info) {
  const int64_t rows = n - (target - nb);
  const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, (rows + 31) / 32 * 32));
  return with_rows_per_thread((rows + threads - 1) / threads, [&](auto m) {
    return launch_lasyf_shared<D, decltype(m)::value>(stream, count, n, nb, target, a, w, l,
                                                      progress, ipiv, info, threads);
  });
}

}  // namespace

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

#define JCM_LDL_PANEL_KERNELS(T)                                                                \
  template int64_t lasyf_panel_width<T>(int64_t, int64_t, int64_t);                             \
  template cudaError_t lasyf_lower_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, int64_t, \
                                              T*, T*, T*, int*, int*, int*, int);
JCM_LDL_PANEL_KERNELS(float)
JCM_LDL_PANEL_KERNELS(double)
JCM_LDL_PANEL_KERNELS(cuComplex)
JCM_LDL_PANEL_KERNELS(cuDoubleComplex)
#undef JCM_LDL_PANEL_KERNELS

}  // namespace jcm
