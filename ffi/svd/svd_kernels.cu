#include "svd/svd_kernels.h"

#include "core/jacobi.cuh"
#include "core/kernel_util.cuh"

#include <cuda/std/limits>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace jcm {

using limits::kGesvdjKernelMaxN;

namespace {

using namespace kernel;

// A warp per pair of columns, up to these many warps: 16 (all 32 x 32 needs) where a lane holds
// one row or three or four (more warps would leave a thread too few registers for the rows it
// holds), 32 for two rows a lane.
constexpr int max_warps(int chunks) { return chunks == 2 ? 32 : 16; }
// Sweeps before giving up (info = k + 1). One-sided Jacobi converges quadratically: 32 columns
// take about 6-10 sweeps from a random matrix.
constexpr int kMaxSweeps = 40;

// This block's outputs all NaN, and its info.
template <typename T, typename R>
__device__ void fill_nan(int k, int64_t u_size, int64_t v_size, R* s, T* u, T* v, int* info_all,
                         int info) {
  const R nan = cuda::std::numeric_limits<R>::quiet_NaN();
  for (int i = threadIdx.x; i < k; i += blockDim.x) s[i] = nan;
  if (u != nullptr) {
    for (int64_t idx = threadIdx.x; idx < u_size; idx += blockDim.x) u[idx] = T(nan);
    for (int64_t idx = threadIdx.x; idx < v_size; idx += blockDim.x) v[idx] = T(nan);
  }
  if (threadIdx.x == 0) info_all[blockIdx.x] = info;
}

// Where a launch keeps W (rows x cp) and V' (cp x cp): in shared memory where they fit, W first
// (every rotation reads its two columns twice, V' once), else in the workspace, global memory
// that L1 caches. H100 opt-in shared memory (227 KB) holds both up to 128 x 128 float32; W
// alone up to 128 x 128 float64 / complex64; neither at 128 x 128 complex128.
// The placement is a template argument of the kernel so that the rotations reach W and V' in
// shared memory with shared-memory instructions; through a pointer chosen at run time they were
// generic loads, and n <= 32 ran slower than with the 32 x 32 kernel this one replaced.
enum class SvdPlacement { kShared, kWShared, kSpilled };  // W and V' / W only / neither

struct SvdPlace {
  SvdPlacement placement = SvdPlacement::kShared;
  size_t smem = 0;             // dynamic shared memory of the launch
  int64_t spill_elements = 0;  // workspace per matrix, in elements of T
};

template <typename T>
SvdPlace place_svd(int64_t m, int64_t n, bool vectors) {
  using R = typename real_of<T>::type;
  const int64_t rows = std::max(m, n), cols = std::min(m, n), cp = cols + (cols & 1);
  const size_t w_bytes = static_cast<size_t>(rows * cp) * sizeof(T);
  const size_t v_bytes = vectors ? static_cast<size_t>(cp * cp) * sizeof(T) : 0;
  const size_t tail = static_cast<size_t>(cp) * (sizeof(R) + sizeof(int));  // sigma, rank
  const size_t optin = shared_optin_bytes();
  const bool w_shared = w_bytes + tail + kStaticShared <= optin;
  const bool v_shared = w_shared && w_bytes + v_bytes + tail + kStaticShared <= optin;
  SvdPlace place;
  place.placement = v_shared   ? SvdPlacement::kShared
                    : w_shared ? SvdPlacement::kWShared
                               : SvdPlacement::kSpilled;
  place.smem = (w_shared ? w_bytes : 0) + (v_shared ? v_bytes : 0) + tail;
  place.spill_elements = (w_shared ? 0 : rows * cp) + (v_shared || !vectors ? 0 : cp * cp);
  return place;
}

// The most workspace a call takes: a batch whose matrices spill goes through in slices of as many
// matrices as that holds (the GPU runs a few hundred blocks at once anyway), one launch each,
// every launch reusing it in stream order; 128 x 128 complex128, 512 KB a matrix, 512 a slice.
constexpr size_t kMaxSpillBytes = size_t(256) << 20;

// The matrices of one launch.
int64_t spill_slice(int64_t count, int64_t spill_elements, size_t elem_bytes) {
  if (spill_elements == 0) return count;
  const int64_t fit = static_cast<int64_t>(kMaxSpillBytes / (spill_elements * elem_bytes));
  return std::max<int64_t>(1, std::min(count, fit));
}

// The sum over a group of `kLanes` lanes (a warp, or a team of 16 in half of one) on each of
// them, `mask` naming them: a butterfly, so bitwise the same on all.
template <int kLanes, typename V>
__device__ inline V group_allsum(V v, unsigned mask) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    v += shuffled(v, [=](auto x) { return __shfl_xor_sync(mask, x, offset); });
  }
  return v;
}

// U's columns `kept` .. `last` - 1 of the rows x last column-major `left`, whose first `kept`
// are orthonormal, completing a basis: column by column, e_i for the row i of least weight in
// the basis so far (so 1 - that weight >= (rows - c) / rows), minus its projection onto the
// basis, twice. By a group of kLanes lanes (mask), lane holding rows lane, lane + kLanes, ...
// (kRowsPerLane of them); `left` written by the group before.
template <typename T, int kLanes, int kRowsPerLane>
__device__ void complete_basis(T* left, int rows, int kept, int last, int lane, unsigned mask) {
  using R = typename real_of<T>::type;
  for (int c = kept; c < last; ++c) {
    R room = R(-1);
    int row = 0;
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      const int i = lane + kLanes * k;
      if (i >= rows) continue;
      R weight = 0;
      for (int j = 0; j < c; ++j) weight += abs2(left[i + static_cast<int64_t>(j) * rows]);
      if (R(1) - weight > room) room = R(1) - weight, row = i;
    }
    for (int offset = kLanes / 2; offset > 0; offset /= 2) {  // the largest, ties to the lowest
      const R other_room = __shfl_xor_sync(mask, room, offset);
      const int other_row = __shfl_xor_sync(mask, row, offset);
      if (other_room > room || (other_room == room && other_row < row)) {
        room = other_room, row = other_row;
      }
    }
    T x[kRowsPerLane];
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) x[k] = T(lane + kLanes * k == row ? 1 : 0);
    for (int pass = 0; pass < 2; ++pass) {
      for (int j = 0; j < c; ++j) {
        const T* uj = left + static_cast<int64_t>(j) * rows;
        T dot = T(0);
#pragma unroll
        for (int k = 0; k < kRowsPerLane; ++k) {
          const int i = lane + kLanes * k;
          if (i < rows) dot += conj_of(uj[i]) * x[k];
        }
        dot = group_allsum<kLanes>(dot, mask);
#pragma unroll
        for (int k = 0; k < kRowsPerLane; ++k) {
          const int i = lane + kLanes * k;
          if (i < rows) x[k] -= uj[i] * dot;
        }
      }
    }
    R norm2 = 0;
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) norm2 += abs2(x[k]);
    const R norm = sqrt(group_allsum<kLanes>(norm2, mask));
#pragma unroll
    for (int k = 0; k < kRowsPerLane; ++k) {
      const int i = lane + kLanes * k;
      if (i < rows) left[i + static_cast<int64_t>(c) * rows] = x[k] / norm;
    }
    __syncwarp(mask);  // column c is written before the next column reads it
  }
}

// One block per matrix. W = A, or A^H for a wide A, so that rows >= cols; A^H = U' S V'^H gives
// A = V' S U'^H, so a wide A's U is V' and its V is U'. W (rows x cp, cp = cols rounded up to
// even: an odd count gets a zero column that no rotation touches) and V' (cp x cp), each with
// leading dimension its row count, live where place_svd put them (`spill`: this launch's
// workspace, spill_elements a matrix); U' goes straight to its output. A round: each warp
// rotates the columns of its pairs of the round-robin order (disjoint, so no barrier inside a
// round): lane l holds rows l, l + 32, ... (kChunks of them) of the two columns, and their Gram
// matrix [[alpha, gamma], [conj(gamma), beta]] is one butterfly sum (gamma) and the squared
// norms alpha, beta, which the rotations carry along (summed afresh each sweep); the rotation
// that diagonalizes it (jacobi.cuh rotation_for) turns the two columns of W and of V'.
// Converged: a sweep in which no pair was out of orthogonality.
template <typename T, int kChunks, SvdPlacement kPlacement>
__global__ void __launch_bounds__(32 * max_warps(kChunks))
    gesvdj_small_kernel(int m, int n, bool econ, const T* a_all, typename real_of<T>::type* s_all,
                        T* u_all, T* v_all, int* info_all, T* spill, int64_t spill_elements) {
  using R = typename real_of<T>::type;
  const bool wide = m < n, vectors = u_all != nullptr;
  const int rows = wide ? n : m, cols = wide ? m : n, cp = cols + (cols & 1);
  const int left_cols = econ ? cols : rows;  // U' is rows x left_cols; V' cols x cols
  const int64_t item = blockIdx.x, u_cols = econ ? cols : m, v_cols = econ ? cols : n;
  T* shared = reinterpret_cast<T*>(dynamic_shared());
  constexpr bool w_shared = kPlacement != SvdPlacement::kSpilled;
  constexpr bool v_shared = kPlacement == SvdPlacement::kShared;
  T* spilled = spill + item * spill_elements;
  T* w = w_shared ? shared : spilled;
  T* vr = v_shared ? shared + rows * cp : w_shared ? spilled : spilled + rows * cp;
  R* sigma = reinterpret_cast<R*>(shared + (w_shared ? rows * cp : 0) +
                                  (v_shared && vectors ? cp * cp : 0));
  int* rank = reinterpret_cast<int*>(sigma + cp);
  const T* a = a_all + item * m * n;
  R* s = s_all + item * cols;
  T* u = vectors ? u_all + item * m * u_cols : nullptr;
  T* v = vectors ? v_all + item * n * v_cols : nullptr;
  const int tid = threadIdx.x, nthreads = blockDim.x, lane = tid % 32, warp = tid / 32;
  const int warps = nthreads / 32;

  R largest = 0;
  bool finite = true;
  for (int idx = tid; idx < rows * cp; idx += nthreads) {
    const int i = idx % rows, j = idx / rows;
    T x = T(0);
    if (j < cols) x = wide ? conj_of(a[j + i * m]) : a[i + j * m];
    const R size = abs1(x);  // >= |x|: bound enough for the scaling
    finite = finite && isfinite(size);
    largest = size > largest ? size : largest;
    w[idx] = x;
  }
  if (vectors) {
    for (int idx = tid; idx < cp * cp; idx += nthreads) vr[idx] = T(idx % cp == idx / cp ? 1 : 0);
  }
  const bool bad = __syncthreads_or(!finite);
  largest = block_reduce(largest, [](R x, R y) { return x > y ? x : y; });
  if (bad) return fill_nan(cols, m * u_cols, n * v_cols, s, u, v, info_all, 0);
  // Scaled by a power of two (exact) so that every |entry| < 1: the Gram entries of up to 128
  // rows stay far from overflow and underflow.
  const int exponent = scale_exponent(largest);
  const R scale = ldexp(R(1), -exponent);
  for (int idx = tid; idx < rows * cp; idx += nthreads) w[idx] = w[idx] * scale;
  __syncthreads();

  // Columns p, q count as orthogonal when |gamma| <= tol sqrt(alpha beta), LAPACK gesvj's
  // measure (its tol sqrt(rows) eps, doubled: a Gram entry summed over the rows is off by about
  // eps, so at sqrt(rows) eps a converged pair would still rotate now and then). A |gamma| below
  // negligible is not rotated (its square would underflow), so columns shorter than keep_norm
  // (gamma below negligible even at tol relative to their norms) get U' columns by completion.
  const R eps = cuda::std::numeric_limits<R>::epsilon();
  const R tol = 2 * sqrt(R(rows)) * eps, tol2 = tol * tol;
  const R negligible = negligible_of(R(0)), negligible2 = negligible * negligible;
  const R keep_norm = sqrt(negligible / tol);
  // Column j's squared norm, on every lane of the warp.
  auto norm2_of = [&](const T* col) {
    R sum = 0;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      const int i = lane + 32 * c;
      if (i < rows) sum += abs2(col[i]);
    }
    return warp_allsum(sum);
  };
  bool converged = false;
  for (int sweep = 0; sweep < kMaxSweeps && !converged; ++sweep) {
    // The columns' squared norms (in sigma until the end), summed afresh each sweep; a rotation
    // carries them along, so a round sums only the pair's inner product.
    for (int j = warp; j < cp; j += warps) {
      const R norm2 = norm2_of(w + j * rows);
      if (lane == 0) sigma[j] = norm2;
    }
    __syncthreads();
    bool rotated = false;
    for (int round = 0; round < cp - 1; ++round) {
      for (int pair = warp; pair < cp / 2; pair += warps) {
        int p = circle_index(pair, round, cp), q = circle_index(cp - 1 - pair, round, cp);
        if (p > q) p ^= q, q ^= p, p ^= q;
        T* wp_col = w + p * rows;
        T* wq_col = w + q * rows;
        T wp[kChunks], wq[kChunks];
        T dot = T(0);
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
          const int i = lane + 32 * c;
          wp[c] = i < rows ? wp_col[i] : T(0);
          wq[c] = i < rows ? wq_col[i] : T(0);
          dot += conj_of(wp[c]) * wq[c];
        }
        const R alpha = sigma[p], beta = sigma[q];
        const T gamma = warp_allsum(dot);
        const R g2 = abs2(gamma);
        if (g2 > tol2 * alpha * beta && g2 >= negligible2) {  // the same on every lane
          const Rotation<T, R> r = rotation_for(alpha, beta, gamma);
          R p2 = 0, q2 = 0;
#pragma unroll
          for (int c = 0; c < kChunks; ++c) {
            const int i = lane + 32 * c;
            const T new_p = r.c * wp[c] - r.se * wq[c], new_q = r.s * wp[c] + r.ce * wq[c];
            p2 += abs2(new_p);
            q2 += abs2(new_q);
            if (i < rows) {
              wp_col[i] = new_p;
              wq_col[i] = new_q;
            }
          }
          // The Gram matrix's diagonal moves by the shift (jacobi.cuh). A norm that loses half
          // of itself or more to it has lost digits in the difference: summed again.
          R alpha_new = alpha - r.shift, beta_new = beta + r.shift;
          if (!(alpha_new >= R(0.5) * alpha)) alpha_new = warp_allsum(p2);
          if (!(beta_new >= R(0.5) * beta)) beta_new = warp_allsum(q2);
          __syncwarp();  // every lane has read sigma[p], sigma[q] before lane 0 writes them
          if (lane == 0) sigma[p] = alpha_new, sigma[q] = beta_new;
          if (vectors) {
            T* vp = vr + p * cp;
            T* vq = vr + q * cp;
            for (int i = lane; i < cp; i += 32) {
              const T x = vp[i], y = vq[i];
              vp[i] = r.c * x - r.se * y;
              vq[i] = r.s * x + r.ce * y;
            }
          }
          rotated = true;
        }
      }
      __syncthreads();  // the round's columns are written before the next round reads them
    }
    converged = !__syncthreads_or(rotated);
  }
  if (!converged) return fill_nan(cols, m * u_cols, n * v_cols, s, u, v, info_all, cols + 1);

  // Singular values: the columns' norms, descending (ties in index order).
  for (int j = warp; j < cols; j += warps) {
    const R norm = sqrt(norm2_of(w + j * rows));
    if (lane == 0) sigma[j] = norm;
  }
  __syncthreads();
  for (int j = tid; j < cols; j += nthreads) {
    int r = 0;
    for (int i = 0; i < cols; ++i) r += sigma[i] > sigma[j] || (sigma[i] == sigma[j] && i < j);
    rank[j] = r;
    s[r] = ldexp(sigma[j], exponent);
  }
  __syncthreads();
  if (vectors) {
    T* right = wide ? u : v;  // cols x cols either way
    for (int idx = tid; idx < cols * cols; idx += nthreads) {
      const int i = idx % cols, j = idx / cols;
      right[i + static_cast<int64_t>(rank[j]) * cols] = vr[i + j * cp];
    }
    // U' (rows x left_cols) in its output: the normalized columns, in rank order; the kept ones
    // take ranks 0 .. kept - 1.
    T* left = wide ? v : u;
    int kept = 0;
    for (int j = 0; j < cols; ++j) kept += sigma[j] >= keep_norm;
    for (int j = warp; j < cols; j += warps) {
      if (sigma[j] >= keep_norm) {
        for (int i = lane; i < rows; i += 32) {
          left[i + static_cast<int64_t>(rank[j]) * rows] = w[i + j * rows] / sigma[j];
        }
      }
    }
    __syncthreads();  // the block's writes to `left` are visible to warp 0
    if (warp == 0) complete_basis<T, 32, kChunks>(left, rows, kept, left_cols, lane, 0xffffffffu);
  }
  if (tid == 0) info_all[blockIdx.x] = 0;
}

// Many matrices of at most 32 rows (after the transpose of a wide one) and 15 to 32 columns: a
// team of 16 lanes (half a warp) per matrix, a lane per pair of columns, W and V' in the team's
// part of shared memory. gesvdj_small_kernel's method, tolerances, ordering, completion of U and
// NaN conventions. Its block of a warp per pair spends most of a round's instructions on work
// each lane repeats (the butterfly sum of a pair's inner product, the rotation, the barrier);
// here a lane sums its pair's inner product over the rows itself and the team's 16 rotations run
// side by side, so a matrix takes a small fraction of the instructions. It pays where the batch
// is larger than the GPU holds blocks of the other at once; below, a block's 16 warps finish a
// matrix sooner. Leading dimensions odd (rows | 1, cp | 1), so that the lanes of a round, each in
// its own columns at the same row, hit distinct banks.
constexpr int kTeamLanes = 16;
constexpr int kTeamMaxRows = 2 * kTeamLanes;  // cp / 2 <= 16 pairs: a lane for each
constexpr int kTeamMinCols = 15;              // cp >= 16: half the lanes or more have a pair
constexpr int kTeamsMax = 8;                  // teams a block

struct TeamLayout {
  int ldw, ldv;
  size_t bytes;  // one team's W, V', sigma and rank, rounded up to 16 bytes
};

template <typename T>
__host__ __device__ inline TeamLayout team_layout(int rows, int cp) {
  using R = typename real_of<T>::type;
  TeamLayout layout;
  layout.ldw = rows | 1;
  layout.ldv = cp | 1;
  const size_t bytes = static_cast<size_t>(layout.ldw + layout.ldv) * cp * sizeof(T) +
                       static_cast<size_t>(cp) * (sizeof(R) + sizeof(int));
  layout.bytes = (bytes + 15) / 16 * 16;
  return layout;
}

// The largest of a team's values on each of its lanes: `mask` names its 16 lanes, so that one
// team may run more sweeps than the other half of its warp.
template <typename R>
__device__ inline R team_max(R v, unsigned mask) {
  for (int offset = kTeamLanes / 2; offset > 0; offset /= 2) {
    const R other = __shfl_xor_sync(mask, v, offset);
    v = other > v ? other : v;
  }
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kTeamsMax * kTeamLanes)
    gesvdj_team_kernel(int64_t count, int m, int n, bool econ, const T* a_all,
                       typename real_of<T>::type* s_all, T* u_all, T* v_all, int* info_all) {
  using R = typename real_of<T>::type;
  const int teams = blockDim.x / kTeamLanes, team = threadIdx.x / kTeamLanes;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * teams + team;
  if (item >= count) return;  // the whole team: its lanes share `item`
  const int lane = threadIdx.x % kTeamLanes;
  const unsigned mask = 0xffffu << (threadIdx.x % 32 / kTeamLanes * kTeamLanes);
  const bool wide = m < n, vectors = u_all != nullptr;
  const int rows = wide ? n : m, cols = wide ? m : n, cp = cols + (cols & 1);
  const int left_cols = econ ? cols : rows;
  const int64_t u_cols = econ ? cols : m, v_cols = econ ? cols : n;
  const TeamLayout layout = team_layout<T>(rows, cp);
  const int ldw = layout.ldw, ldv = layout.ldv;
  T* w = reinterpret_cast<T*>(dynamic_shared() + team * layout.bytes);
  T* vr = w + ldw * cp;
  R* sigma = reinterpret_cast<R*>(vr + ldv * cp);
  int* rank = reinterpret_cast<int*>(sigma + cp);
  const T* a = a_all + item * m * n;
  R* s = s_all + item * cols;
  T* u = vectors ? u_all + item * m * u_cols : nullptr;
  T* v = vectors ? v_all + item * n * v_cols : nullptr;
  auto fill_nan_team = [&](int info) {
    const R nan = cuda::std::numeric_limits<R>::quiet_NaN();
    for (int i = lane; i < cols; i += kTeamLanes) s[i] = nan;
    if (vectors) {
      for (int64_t idx = lane; idx < m * u_cols; idx += kTeamLanes) u[idx] = T(nan);
      for (int64_t idx = lane; idx < n * v_cols; idx += kTeamLanes) v[idx] = T(nan);
    }
    if (lane == 0) info_all[item] = info;
  };

  R largest = 0;
  bool finite = true;
  for (int idx = lane; idx < rows * cp; idx += kTeamLanes) {
    const int i = idx % rows, j = idx / rows;
    T x = T(0);
    if (j < cols) x = wide ? conj_of(a[j + i * m]) : a[i + j * m];
    const R size = abs1(x);
    finite = finite && isfinite(size);
    largest = size > largest ? size : largest;
    w[i + j * ldw] = x;
  }
  if (vectors) {
    for (int idx = lane; idx < cp * cp; idx += kTeamLanes) {
      vr[idx % cp + idx / cp * ldv] = T(idx % cp == idx / cp ? 1 : 0);
    }
  }
  if (__any_sync(mask, !finite)) return fill_nan_team(0);
  largest = team_max(largest, mask);
  const int exponent = scale_exponent(largest);
  const R scale = ldexp(R(1), -exponent);
  for (int idx = lane; idx < rows * cp; idx += kTeamLanes) {
    w[idx % rows + idx / rows * ldw] *= scale;
  }
  __syncwarp(mask);

  const R eps = cuda::std::numeric_limits<R>::epsilon();
  const R tol = 2 * sqrt(R(rows)) * eps, tol2 = tol * tol;
  const R negligible = negligible_of(R(0)), negligible2 = negligible * negligible;
  const R keep_norm = sqrt(negligible / tol);
  auto norm2_of = [&](const T* col) {
    R sum = 0;
    for (int i = 0; i < rows; ++i) sum += abs2(col[i]);
    return sum;
  };
  bool converged = false;
  for (int sweep = 0; sweep < kMaxSweeps && !converged; ++sweep) {
    for (int j = lane; j < cp; j += kTeamLanes) sigma[j] = norm2_of(w + j * ldw);
    __syncwarp(mask);
    bool rotated = false;
    for (int round = 0; round < cp - 1; ++round) {
      if (lane < cp / 2) {
        int p = circle_index(lane, round, cp), q = circle_index(cp - 1 - lane, round, cp);
        if (p > q) p ^= q, q ^= p, p ^= q;
        T* wp = w + p * ldw;
        T* wq = w + q * ldw;
        T gamma = T(0);
        for (int i = 0; i < rows; ++i) gamma += conj_of(wp[i]) * wq[i];
        const R alpha = sigma[p], beta = sigma[q];
        const R g2 = abs2(gamma);
        if (g2 > tol2 * alpha * beta && g2 >= negligible2) {
          const Rotation<T, R> r = rotation_for(alpha, beta, gamma);
          R p2 = 0, q2 = 0;
          for (int i = 0; i < rows; ++i) {
            const T x = wp[i], y = wq[i];
            const T new_p = r.c * x - r.se * y, new_q = r.s * x + r.ce * y;
            wp[i] = new_p;
            wq[i] = new_q;
            p2 += abs2(new_p);
            q2 += abs2(new_q);
          }
          // As gesvdj_small_kernel: the shift, unless the norm lost half of itself or more.
          const R alpha_new = alpha - r.shift, beta_new = beta + r.shift;
          sigma[p] = alpha_new >= R(0.5) * alpha ? alpha_new : p2;
          sigma[q] = beta_new >= R(0.5) * beta ? beta_new : q2;
          if (vectors) {
            T* vp = vr + p * ldv;
            T* vq = vr + q * ldv;
            for (int i = 0; i < cp; ++i) {
              const T x = vp[i], y = vq[i];
              vp[i] = r.c * x - r.se * y;
              vq[i] = r.s * x + r.ce * y;
            }
          }
          rotated = true;
        }
      }
      __syncwarp(mask);  // the round's columns are written before the next round reads them
    }
    converged = !__any_sync(mask, rotated);
  }
  if (!converged) return fill_nan_team(cols + 1);

  for (int j = lane; j < cols; j += kTeamLanes) sigma[j] = sqrt(norm2_of(w + j * ldw));
  __syncwarp(mask);
  for (int j = lane; j < cols; j += kTeamLanes) {
    int r = 0;
    for (int i = 0; i < cols; ++i) r += sigma[i] > sigma[j] || (sigma[i] == sigma[j] && i < j);
    rank[j] = r;
    s[r] = ldexp(sigma[j], exponent);
  }
  __syncwarp(mask);
  if (vectors) {
    T* right = wide ? u : v;
    for (int idx = lane; idx < cols * cols; idx += kTeamLanes) {
      const int i = idx % cols, j = idx / cols;
      right[i + static_cast<int64_t>(rank[j]) * cols] = vr[i + j * ldv];
    }
    T* left = wide ? v : u;
    int kept = 0;
    for (int j = 0; j < cols; ++j) kept += sigma[j] >= keep_norm;
    for (int idx = lane; idx < rows * cols; idx += kTeamLanes) {
      const int i = idx % rows, j = idx / rows;
      if (sigma[j] >= keep_norm) {
        left[i + static_cast<int64_t>(rank[j]) * rows] = w[i + j * ldw] / sigma[j];
      }
    }
    __syncwarp(mask);  // the team's writes to `left` are visible to all of its lanes
    complete_basis<T, kTeamLanes, kTeamMaxRows / kTeamLanes>(left, rows, kept, left_cols, lane,
                                                             mask);
  }
  if (lane == 0) info_all[item] = 0;
}

// Square n <= kGesvdjTinyMaxN: a thread per matrix, W = A, V and U in registers, through the
// stage both ways (kernel_util.cuh tiny_load). gesvdj_small_kernel's method, tolerances,
// ordering, completion of U and NaN conventions, with the pairs in cyclic-by-row order. An index
// known only at run time (a column's rank) is matched against each constant instead, so that
// nothing goes to local memory.
template <typename T, int N>
__global__ void __launch_bounds__(kTinyThreads)
    gesvdj_tiny_kernel(int64_t count, const T* a_all, typename real_of<T>::type* s_all,
                       T* u_all, T* v_all, int* info_all) {
  using R = typename real_of<T>::type;
  constexpr int kSize = N * N;
  const bool vectors = u_all != nullptr;
  const TinyThread<T> me = tiny_begin(count, a_all, kSize);
  T w[N][N], v[N][N];
  R largest = 0;
  bool finite = true;
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      w[i][j] = me.active ? me.mine[i + j * N] : T(i == j);
      v[i][j] = T(i == j ? 1 : 0);
      const R size = abs1(w[i][j]);
      finite = finite && isfinite(size);
      largest = size > largest ? size : largest;
    }
  }
  const int exponent = finite ? scale_exponent(largest) : 0;
  const R scale = ldexp(R(1), -exponent);
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = 0; i < N; ++i) w[i][j] = w[i][j] * scale;
  }
  const R eps = cuda::std::numeric_limits<R>::epsilon();
  const R tol = 2 * sqrt(R(N)) * eps, tol2 = tol * tol;
  const R negligible = negligible_of(R(0)), negligible2 = negligible * negligible;
  const R keep_norm = sqrt(negligible / tol);
  R sigma[N];
  bool converged = false;
  for (int sweep = 0; finite && sweep < kMaxSweeps && !converged; ++sweep) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      sigma[j] = 0;
#pragma unroll
      for (int i = 0; i < N; ++i) sigma[j] += abs2(w[i][j]);
    }
    bool rotated = false;
#pragma unroll
    for (int p = 0; p < N - 1; ++p) {
#pragma unroll
      for (int q = p + 1; q < N; ++q) {
        T gamma = T(0);
#pragma unroll
        for (int i = 0; i < N; ++i) gamma += conj_of(w[i][p]) * w[i][q];
        const R alpha = sigma[p], beta = sigma[q], g2 = abs2(gamma);
        if (g2 > tol2 * alpha * beta && g2 >= negligible2) {
          const Rotation<T, R> r = rotation_for(alpha, beta, gamma);
          R alpha_new = 0, beta_new = 0;
#pragma unroll
          for (int i = 0; i < N; ++i) {
            const T x = w[i][p], y = w[i][q];
            w[i][p] = r.c * x - r.se * y;
            w[i][q] = r.s * x + r.ce * y;
            alpha_new += abs2(w[i][p]);
            beta_new += abs2(w[i][q]);
            const T vx = v[i][p], vy = v[i][q];
            v[i][p] = r.c * vx - r.se * vy;
            v[i][q] = r.s * vx + r.ce * vy;
          }
          // As gesvdj_small_kernel: the norms carried along by the shift, summed again where
          // half or more of one was lost to it.
          const R alpha_shifted = alpha - r.shift, beta_shifted = beta + r.shift;
          sigma[p] = alpha_shifted >= R(0.5) * alpha ? alpha_shifted : alpha_new;
          sigma[q] = beta_shifted >= R(0.5) * beta ? beta_shifted : beta_new;
          rotated = true;
        }
      }
    }
    converged = !rotated;
  }
  const int info = !finite ? 0 : converged ? 0 : N + 1;
  const bool ok = finite && converged;
  const R nan = cuda::std::numeric_limits<R>::quiet_NaN();
  int rank[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    sigma[j] = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) sigma[j] += abs2(w[i][j]);
    // Zero where the matrix failed: a NaN norm compares false with every other, so its rank
    // would not be unique and some rank's S and V entries would never be written.
    sigma[j] = ok ? sqrt(sigma[j]) : R(0);
  }
#pragma unroll
  for (int j = 0; j < N; ++j) {  // descending, ties in index order
    rank[j] = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) rank[j] += sigma[i] > sigma[j] || (sigma[i] == sigma[j] && i < j);
  }
  if (me.active) {
    R* s = s_all + me.item() * N;
#pragma unroll
    for (int j = 0; j < N; ++j) {
#pragma unroll
      for (int r = 0; r < N; ++r) {
        if (r == rank[j]) s[r] = ok ? ldexp(sigma[j], exponent) : nan;
      }
    }
    info_all[me.item()] = info;
  }
  if (!vectors) return;  // the same on every thread of the launch
  if (me.active) {  // V, its columns in rank order
#pragma unroll
    for (int j = 0; j < N; ++j) {
#pragma unroll
      for (int r = 0; r < N; ++r) {
        if (r == rank[j]) {
#pragma unroll
          for (int i = 0; i < N; ++i) me.mine[i + r * N] = ok ? v[i][j] : T(nan);
        }
      }
    }
  }
  tiny_store(v_all, me.stage, me.block, kSize);
  // U: the normalized columns in rank order (the kept ones take ranks 0 .. kept - 1), then the
  // completion: e_i for the row i of least weight in the basis so far, minus its projection
  // onto the basis, twice.
  T u[N][N];
  int kept = 0;
#pragma unroll
  for (int j = 0; j < N; ++j) kept += sigma[j] >= keep_norm;
  // Gathered by selects: a store at u[.][rank[j]] would put u in local memory.
  R inverse[N];
#pragma unroll
  for (int j = 0; j < N; ++j) inverse[j] = sigma[j] >= keep_norm ? R(1) / sigma[j] : R(0);
#pragma unroll
  for (int r = 0; r < N; ++r) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      T x = T(0);
#pragma unroll
      for (int j = 0; j < N; ++j) x = rank[j] == r ? w[i][j] * inverse[j] : x;
      u[i][r] = x;
    }
  }
#pragma unroll
  for (int c = 0; c < N; ++c) {
    // Column c of the completion, where c >= kept: each step is computed and kept or not, so
    // that every index stays a constant.
    R room_best = R(-1);
    int row = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      R weight = 0;
#pragma unroll
      for (int j = 0; j < c; ++j) weight += abs2(u[i][j]);
      if (R(1) - weight > room_best) room_best = R(1) - weight, row = i;
    }
    T x[N];
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] = T(i == row ? 1 : 0);
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
#pragma unroll
      for (int j = 0; j < c; ++j) {
        T dot = T(0);
#pragma unroll
        for (int i = 0; i < N; ++i) dot += conj_of(u[i][j]) * x[i];
#pragma unroll
        for (int i = 0; i < N; ++i) x[i] -= u[i][j] * dot;
      }
    }
    R norm2 = 0;
#pragma unroll
    for (int i = 0; i < N; ++i) norm2 += abs2(x[i]);
    const R norm = sqrt(norm2);
#pragma unroll
    for (int i = 0; i < N; ++i) u[i][c] = c < kept ? u[i][c] : x[i] / norm;
  }
  __syncthreads();  // V's store has read the stage before U takes it
  if (me.active) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
#pragma unroll
      for (int i = 0; i < N; ++i) me.mine[i + j * N] = ok ? u[i][j] : T(nan);
    }
  }
  tiny_store(u_all, me.stage, me.block, kSize);
}

// Blocks of `threads` the device runs at once, by threads alone (the SVD kernel's blocks of
// up to 32 columns are far below any SM's shared memory); where the device does not say, the
// block kernel throughout.
int64_t resident_blocks(int threads) {
  int device = 0, sms = 0, threads_per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device) !=
          cudaSuccess) {
    cudaGetLastError();
    return INT64_MAX;
  }
  return static_cast<int64_t>(sms) * (threads_per_sm / std::max(threads, 32));
}

}  // namespace

template <typename T>
size_t gesvdj_small_workspace_bytes(int64_t count, int64_t m, int64_t n, bool vectors) {
  using D = typename device_type<T>::type;
  if (count <= 0 || m <= 0 || n <= 0 || (m == n && n <= limits::kGesvdjTinyMaxN)) return 0;
  const int64_t spill = place_svd<D>(m, n, vectors).spill_elements;
  return static_cast<size_t>(spill_slice(count, spill, sizeof(D)) * spill) * sizeof(D);
}

template <typename T, typename R>
cudaError_t gesvdj_small_batched(cudaStream_t stream, int64_t count, int64_t m, int64_t n,
                                 bool econ, const T* a, R* s, T* u, T* v, int* info,
                                 void* work) {
  using D = typename device_type<T>::type;
  if (count <= 0 || m <= 0 || n <= 0) return cudaSuccess;
  if (m > kGesvdjKernelMaxN || n > kGesvdjKernelMaxN || count > INT32_MAX ||
      (u == nullptr) != (v == nullptr)) {
    return cudaErrorInvalidValue;
  }
  if (m == n && n <= limits::kGesvdjTinyMaxN) {  // econ is the full SVD for a square matrix
    return with_tiny_n(n, [&](auto order) {
      constexpr int N = decltype(order)::value;
      gesvdj_tiny_kernel<D, N><<<tiny_blocks(count), kTinyThreads,
                                 tiny_stage_bytes(N * N, sizeof(D)), stream>>>(
          count, reinterpret_cast<const D*>(a), s, reinterpret_cast<D*>(u),
          reinterpret_cast<D*>(v), info);
      return cudaGetLastError();
    });
  }
  const bool vectors = u != nullptr;
  const int64_t rows = std::max(m, n), cols = std::min(m, n), cp = cols + (cols & 1);
  const int block_threads = 32 * static_cast<int>(std::min<int64_t>(cp / 2, max_warps(1)));
  if (rows <= kTeamMaxRows && cols >= kTeamMinCols &&
      count > resident_blocks(block_threads)) {
    const TeamLayout layout = team_layout<D>(static_cast<int>(rows), static_cast<int>(cp));
    // Teams a block: as many as 48 KB hold, even (whole warps), 2 to kTeamsMax.
    const int teams =
        std::max(2, std::min(kTeamsMax, static_cast<int>(48 * 1024 / layout.bytes) & ~1));
    const size_t smem = teams * layout.bytes;
    auto kernel = gesvdj_team_kernel<D>;
    if (cudaError_t err = allow_shared(kernel, smem); err != cudaSuccess) return err;
    kernel<<<static_cast<unsigned>((count + teams - 1) / teams), teams * kTeamLanes, smem,
             stream>>>(count, static_cast<int>(m), static_cast<int>(n), econ,
                       reinterpret_cast<const D*>(a), s, reinterpret_cast<D*>(u),
                       reinterpret_cast<D*>(v), info);
    return cudaGetLastError();
  }
  const SvdPlace place = place_svd<D>(m, n, vectors);
  if (place.spill_elements > 0 && work == nullptr) return cudaErrorInvalidValue;
  const int64_t u_size = m * (econ ? cols : m), v_size = n * (econ ? cols : n);
  const int64_t slice = spill_slice(count, place.spill_elements, sizeof(D));
  const int chunks = static_cast<int>((rows + 31) / 32);
  auto launch = [&](auto chunks_of) {
    constexpr int kChunks = decltype(chunks_of)::value;
    auto kernel = gesvdj_small_kernel<D, kChunks, SvdPlacement::kSpilled>;
    if (place.placement == SvdPlacement::kShared) {
      kernel = gesvdj_small_kernel<D, kChunks, SvdPlacement::kShared>;
    } else if (place.placement == SvdPlacement::kWShared) {
      kernel = gesvdj_small_kernel<D, kChunks, SvdPlacement::kWShared>;
    }
    if (cudaError_t err = allow_shared(kernel, place.smem); err != cudaSuccess) return err;
    const int threads = 32 * static_cast<int>(std::min<int64_t>(cp / 2, max_warps(kChunks)));
    for (int64_t begin = 0; begin < count; begin += slice) {
      kernel<<<static_cast<unsigned>(std::min(slice, count - begin)), threads, place.smem,
               stream>>>(static_cast<int>(m), static_cast<int>(n), econ,
                         reinterpret_cast<const D*>(a) + begin * m * n, s + begin * cols,
                         vectors ? reinterpret_cast<D*>(u) + begin * u_size : nullptr,
                         vectors ? reinterpret_cast<D*>(v) + begin * v_size : nullptr,
                         info + begin, static_cast<D*>(work), place.spill_elements);
      if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    }
    return cudaSuccess;
  };
  static_assert(kGesvdjKernelMaxN <= 4 * 32, "a lane holds at most four rows of a column");
  switch (chunks) {
    case 1: return launch(std::integral_constant<int, 1>{});
    case 2: return launch(std::integral_constant<int, 2>{});
    case 3: return launch(std::integral_constant<int, 3>{});
    default: return launch(std::integral_constant<int, 4>{});
  }
}

#define JCM_GESVDJ_SMALL(T, R)                                                                   \
  template size_t gesvdj_small_workspace_bytes<T>(int64_t, int64_t, int64_t, bool);             \
  template cudaError_t gesvdj_small_batched<T, R>(cudaStream_t, int64_t, int64_t, int64_t, bool, \
                                                  const T*, R*, T*, T*, int*, void*);
JCM_GESVDJ_SMALL(float, float)
JCM_GESVDJ_SMALL(double, double)
JCM_GESVDJ_SMALL(cuComplex, float)
JCM_GESVDJ_SMALL(cuDoubleComplex, double)
#undef JCM_GESVDJ_SMALL

}  // namespace jcm
