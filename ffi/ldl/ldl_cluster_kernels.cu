// One panel of the blocked LDL^T factorization (LAPACK ?lasyf, lower) over a cluster of thread
// blocks a matrix (sm_90): the panel's rows spread over several SMs' shared memory, for a few
// matrices' tall panels. ldl_panel_kernels.cu decides where a panel runs (cluster_panel_shape).
#include "ldl/ldl_device.cuh"
#include "ldl/ldl_kernels.h"

#include "core/kernel_util.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

namespace jcm {

namespace {

using namespace kernel;
using namespace ldl;

// The slots of a step of lasyf_lower_cluster_kernel (its rows trade labels): W(k, c),
// W(k, c + 1), W(k + 1, ..), W(k + 2, ..), W(imax, ..) (c: the step's first column of the
// panel); the trailing matrix's A(k + 1, k) and A(k + 2, k + 1) as read (what an interchange moves
// to row kp's entry of the next column).
enum LabelSlot { kK0, kK1, kK10, kK11, kK20, kK21, kR0, kR1, kA10, kA21, kLabelSlots };

// The second exchange of a step (where it looks at a candidate row): the slots the owner of each
// row pushes to every block, in the order of push_row's values. Row k + 2 takes part only where
// k + 2 < n. The pushes and the bytes each block's mbarrier expects are both read from here: a
// count above the bytes pushed would leave the phase open (wait_phase then traps).
enum SecondExchangeRow { kRowK, kRowK1, kRowK2, kRowImax, kSecondExchangeRows };
struct RowSlots {
  int count;
  LabelSlot slot[2];
};
__host__ __device__ constexpr RowSlots second_exchange_slots(SecondExchangeRow row) {
  switch (row) {
    case kRowK: return {1, {kK1, kK1}};
    case kRowK1: return {1, {kK11, kK11}};
    case kRowK2: return {2, {kK21, kA21}};
    default: return {2, {kR0, kR1}};  // imax: W(imax, c) and W(imax, c + 1)
  }
}

// The slots pushed in a step's second exchange.
__host__ __device__ constexpr int second_exchange_slot_count(bool row_k2) {
  int slots = 0;
  for (int r = 0; r < kSecondExchangeRows; ++r) {
    const auto row = static_cast<SecondExchangeRow>(r);
    if (row != kRowK2 || row_k2) slots += second_exchange_slots(row).count;
  }
  return slots;
}

// The bytes every block receives in a step's second exchange: each warp's candidate of the
// cluster (its magnitude and index, cluster_argmax_async) and the slots above.
template <typename T, typename R>
__host__ __device__ constexpr size_t second_exchange_bytes(int cands, bool row_k2) {
  constexpr int kWithRowK2 = second_exchange_slot_count(true);
  constexpr int kWithoutRowK2 = second_exchange_slot_count(false);
  return cands * (sizeof(R) + sizeof(int)) + sizeof(T) * (row_k2 ? kWithRowK2 : kWithoutRowK2);
}
static_assert(second_exchange_bytes<cuda::std::complex<double>, double>(
                  kLdlClusterMaxRanks * (kLdlClusterThreads / 32), true) <= kMaxTransactionBytes,
              "a phase's bytes must fit an mbarrier's transaction count");

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

// lasyf_lower_cluster_kernel's launch bound. It runs kLdlClusterThreads a block; the bound (128
// registers a thread) is the one its measured code was compiled under.
constexpr int kClusterPanelMaxThreads = 512;
// A cluster panel block's two mbarriers, ahead of its L (16 bytes: L stays 16-byte aligned).
constexpr size_t kClusterBarrierBytes = 2 * sizeof(unsigned long long);

// Where a cluster panel's row lives: block `rank` of the cluster, local row `local` of its L and
// W. Rows start out round-robin over the cluster's threads, so that every block keeps its share
// of the live rows as k advances.
struct ClusterRow {
  int rank;
  int local;
};

// lasyf_lower_shared_kernel's panel over a cluster of blocks (sm_90): the panel's rows spread over
// the blocks, each holding its rows of L and W in its own shared memory, so that a few matrices'
// tall panels get the shared memory and bandwidth of several SMs (one SM reads its whole L for each
// GEMV; float64 L and W of 8 columns at 2048 rows do not even fit one). Interchanges do not move
// rows: each thread's rows carry labels (their row of the matrix), two rows trade labels, and every
// block keeps where each label lives (slot_of). A step has one cluster barrier, after the column's
// argmax (each warp pushes its candidate to every block), and where it looks at a candidate row, a
// second exchange of the row's argmax by st.async onto each block's mbarrier, which orders shared
// memory alone without a GPU-scope fence (a cluster barrier's release compiles to MEMBAR.ALL.GPU: a
// third of the panel's stall samples in ncu); what a step shares goes the same way: the owners of
// rows k, k + 1, k + 2 and imax push their entries of the step's columns to every block (slots by
// the step's parity, so the next step's pushes never meet this one's reads), and W(imax, 0:c) and
// the next W(k, 0:c) are read from their owner's shared memory (the earlier columns, which no step
// writes again). Each step's writes to the trailing matrix (global memory) reach the next step's
// reads through its first cluster barrier: the next columns are read after it. The arithmetic is
// lasyf_lower_shared_kernel's (LAPACK's pivots); at the end each thread writes its rows of L
// straight to where ?lasyf's undone interchanges put them.
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
  // instructions a column (the SASS of a one-block panel like this one).
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
        arrive_expect_bytes(bars + parity, second_exchange_bytes<T, R>(cands, k + 2 < n));
      }
      auto push_row = [&](SecondExchangeRow row, T v0, T v1) {
        const RowSlots slots = second_exchange_slots(row);
        for (int e = 0; e < slots.count; ++e) {
          for (int q = 0; q < ranks; ++q) {
            push_async(x + slots.slot[e], bars + parity, q, e == 0 ? v0 : v1);
          }
        }
      };
      best = -1;
      best_i = INT_MAX;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const int i = label[m];
        if (i < k || i >= n) continue;
        W(m, c + 1) = w1[m];
        if (i == k) push_row(kRowK, w1[m], w1[m]);
        if (i == k + 1) push_row(kRowK1, w1[m], w1[m]);
        if (i == k + 2) push_row(kRowK2, w1[m], next1[m]);
        if (i == imax) push_row(kRowImax, w0[m], w1[m]);
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

// Whether `device` runs thread block clusters (sm_90 and later), asked once per device: a
// process may drive GPUs of several generations.
bool device_has_clusters(int device) {
  static std::mutex mutex;
  static std::map<int, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(device); it != known.end()) return it->second;
  int major = 0;
  const bool ok =
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess;
  cudaGetLastError();
  return known[device] = ok && major >= 9;
}

// Whether `device` runs a cluster of this shape at all (shared memory per SM, cluster size),
// asked once per device and shape.
template <typename D, int M>
bool cluster_fits(int device, const ClusterPanel& shape) {
  static std::mutex mutex;
  static std::map<std::tuple<int, int, int, size_t>, bool> known;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(device, shape.ranks, shape.threads, shape.smem);
  if (auto it = known.find(key); it != known.end()) return it->second;
  int clusters = 0;
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = cluster_config<D, M>(shape, 1, nullptr, &attribute);
  const bool fits = allow_shared(lasyf_lower_cluster_kernel<D, M>, shape.smem) == cudaSuccess &&
                    cudaOccupancyMaxActiveClusters(&clusters, lasyf_lower_cluster_kernel<D, M>,
                                                   &config) == cudaSuccess &&
                    clusters > 0;
  cudaGetLastError();
  known[key] = fits;
  return fits;
}

template <typename D, int M>
cudaError_t launch_cluster_kernel(cudaStream_t stream, const ClusterPanel& shape, int64_t count,
                                  int64_t n, int64_t nb, int64_t target, D* a, D* w, D* l,
                                  int* progress, int* ipiv, int* info) {
  if (cudaError_t err = allow_shared(lasyf_lower_cluster_kernel<D, M>, shape.smem);
      err != cudaSuccess) {
    return err;
  }
  cudaLaunchAttribute attribute;
  const cudaLaunchConfig_t config = cluster_config<D, M>(shape, count, stream, &attribute);
  return cudaLaunchKernelEx(&config, lasyf_lower_cluster_kernel<D, M>, static_cast<int>(n),
                            static_cast<int>(nb), static_cast<int>(target), a, w, l, progress,
                            ipiv, info);
}

}  // namespace

namespace ldl {

// A panel runs on a cluster for up to kLdlClusterMaxCount matrices where its one-block panel
// would be narrower than 16 columns, not fit at all, or take more rows than threads: blocks of
// kLdlClusterThreads, a thread per row, as many as the rows take up to kLdlClusterMaxRanks
// blocks, two or four rows a thread beyond that. sm_90 and later. (H100, the whole
// factorization: float32 1x2048 6.79 -> 6.46 ms, float64 1x2048 10.8 -> 7.76 and 6.96 with
// clusters also for 8 columns, 4x2048 16.1 -> 10.1; where 16 or 32 columns fit one block, its
// steps are shorter: float32 1x1024 2.35 vs 2.98 on 4 blocks of 256, 2.93 on 2 of 512; the H100
// report.)
template <typename D>
ClusterPanel cluster_panel_shape(int64_t rows, int64_t nb, int64_t count) {
  constexpr int threads = kLdlClusterThreads;
  ClusterPanel shape;
  if (count > kLdlClusterMaxCount) return shape;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return shape;
  }
  if (!device_has_clusters(device)) return shape;
  // A one-block panel of more rows than threads (two or four rows a thread: float32 from 1025
  // rows) runs its steps slower than a cluster since the cluster's steps lost one of their two
  // cluster barriers (float32 1x2048 5.72 -> 5.42 ms; the H100 report).
  const bool tall = rows > kMaxThreads;
  if (!tall && one_block_width<D>(rows, nb, count) >= std::min<int64_t>(16, nb)) return shape;
  for (int per_thread : {1, 2, 4}) {
    const int64_t ranks = (rows + int64_t{threads} * per_thread - 1) / (threads * per_thread);
    if (ranks > kLdlClusterMaxRanks) continue;
    if (ranks < 2) return shape;
    shape = {static_cast<int>(ranks), threads, per_thread,
             lasyf_cluster_shared_bytes<D>(int64_t{per_thread} * threads, nb, ranks,
                                           threads / 32, rows)};
    const bool fits =
        shape.smem + kStaticShared <= shared_optin_bytes() &&
        with_rows_per_thread(per_thread, [&](auto m) {
          return cluster_fits<D, decltype(m)::value>(device, shape);
        });
    return fits ? shape : ClusterPanel{};
  }
  return shape;
}

template <typename D>
cudaError_t launch_lasyf_cluster(cudaStream_t stream, const ClusterPanel& shape, int64_t count,
                                 int64_t n, int64_t nb, int64_t target, D* a, D* w, D* l,
                                 int* progress, int* ipiv, int* info) {
  return with_rows_per_thread(shape.per_thread, [&](auto m) {
    return launch_cluster_kernel<D, decltype(m)::value>(stream, shape, count, n, nb, target, a,
                                                        w, l, progress, ipiv, info);
  });
}

#define JCM_LDL_CLUSTER_KERNELS(D)                                                              \
  template ClusterPanel cluster_panel_shape<D>(int64_t, int64_t, int64_t);                      \
  template cudaError_t launch_lasyf_cluster<D>(cudaStream_t, const ClusterPanel&, int64_t,      \
                                               int64_t, int64_t, int64_t, D*, D*, D*, int*,     \
                                               int*, int*);
JCM_LDL_CLUSTER_KERNELS(float)
JCM_LDL_CLUSTER_KERNELS(double)
JCM_LDL_CLUSTER_KERNELS(device_type<cuComplex>::type)
JCM_LDL_CLUSTER_KERNELS(device_type<cuDoubleComplex>::type)
#undef JCM_LDL_CLUSTER_KERNELS

}  // namespace ldl
}  // namespace jcm
