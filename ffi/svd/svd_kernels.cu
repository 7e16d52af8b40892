#include "svd/svd_kernels.h"

#include "core/jacobi.cuh"
#include "core/kernel_util.cuh"

#include <cuda/std/limits>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

namespace jcm {

using limits::kGesvdjKernelMaxN;

namespace {

using namespace kernel;

// A warp per pair of columns (lane = row): the most threads a launch takes.
constexpr int kSvdThreads = 32 * (kGesvdjKernelMaxN / 2);
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

// One block per matrix. W = A, or A^H for a wide A, so that rows >= cols; A^H = U' S V'^H gives
// A = V' S U'^H, so a wide A's U is V' and its V is U'. Shared memory: W (rows x cp, cp = cols
// rounded up to even: an odd count gets a zero column that no rotation touches), V' (cp x cp) and
// U' (rows x rows), each with leading dimension its row count. A round: warp w rotates the
// columns of pair w of the round-robin order (disjoint, so no barrier inside a round): its lanes
// hold the two columns' rows, and their Gram matrix [[alpha, gamma], [conj(gamma), beta]] is one
// butterfly sum (gamma) and the squared norms alpha, beta, which the rotations carry along (summed
// afresh each sweep); the rotation that diagonalizes it (jacobi.cuh rotation_for) turns the two
// columns of W and of V'. Converged: a sweep in which no pair was out of orthogonality.
template <typename T>
__global__ void __launch_bounds__(kSvdThreads)
    gesvdj_small_kernel(int m, int n, bool econ, const T* a_all,
                        typename real_of<T>::type* s_all, T* u_all, T* v_all, int* info_all) {
  using R = typename real_of<T>::type;
  const bool wide = m < n, vectors = u_all != nullptr;
  const int rows = wide ? n : m, cols = wide ? m : n, cp = cols + (cols & 1);
  const int left_cols = econ ? cols : rows;  // U' is rows x left_cols; V' cols x cols
  T* w = reinterpret_cast<T*>(dynamic_shared());
  T* vr = w + rows * cp;
  T* ul = vr + cp * cp;
  R* sigma = reinterpret_cast<R*>(ul + rows * rows);
  int* rank = reinterpret_cast<int*>(sigma + cp);
  const int64_t item = blockIdx.x, u_cols = econ ? cols : m, v_cols = econ ? cols : n;
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
  for (int idx = tid; idx < cp * cp; idx += nthreads) vr[idx] = T(idx % cp == idx / cp ? 1 : 0);
  const bool bad = __syncthreads_or(!finite);
  largest = block_reduce(largest, [](R x, R y) { return x > y ? x : y; });
  if (bad) return fill_nan(cols, m * u_cols, n * v_cols, s, u, v, info_all, 0);
  // Scaled by a power of two (exact) so that every |entry| < 1: the Gram entries of 32 rows stay
  // far from overflow and underflow.
  const int exponent = scale_exponent(largest);
  const R scale = ldexp(R(1), -exponent);
  for (int idx = tid; idx < rows * cp; idx += nthreads) w[idx] = w[idx] * scale;
  __syncthreads();

  // Columns p, q count as orthogonal when |gamma| <= tol sqrt(alpha beta), LAPACK gesvj's
  // measure (its tol sqrt(rows) eps, doubled: a Gram entry summed over 32 rows is off by about
  // eps, so at sqrt(rows) eps a converged pair would still rotate now and then). A |gamma| below
  // negligible is not rotated (its square would underflow), so columns shorter than keep_norm
  // (gamma below negligible even at tol relative to their norms) get U' columns by completion.
  const R eps = cuda::std::numeric_limits<R>::epsilon();
  const R tol = 2 * sqrt(R(rows)) * eps, tol2 = tol * tol;
  const R negligible = negligible_of(R(0)), negligible2 = negligible * negligible;
  const R keep_norm = sqrt(negligible / tol);
  // Column j's squared norm, on every lane of the warp.
  auto norm2_of = [&](int j) { return warp_allsum(abs2(lane < rows ? w[lane + j * rows] : T(0))); };
  bool converged = false;
  for (int sweep = 0; sweep < kMaxSweeps && !converged; ++sweep) {
    // The columns' squared norms (in sigma until the end), summed afresh each sweep; a rotation
    // carries them along, so a round sums only the pair's inner product.
    for (int j = warp; j < cp; j += warps) {
      const R norm2 = norm2_of(j);
      if (lane == 0) sigma[j] = norm2;
    }
    __syncthreads();
    bool rotated = false;
    for (int round = 0; round < cp - 1; ++round) {
      int p = circle_index(warp, round, cp), q = circle_index(cp - 1 - warp, round, cp);
      if (p > q) p ^= q, q ^= p, p ^= q;
      T* wp_col = w + p * rows;
      T* wq_col = w + q * rows;
      const T wp = lane < rows ? wp_col[lane] : T(0), wq = lane < rows ? wq_col[lane] : T(0);
      const R alpha = sigma[p], beta = sigma[q];
      const T gamma = warp_allsum(conj_of(wp) * wq);
      const R g2 = abs2(gamma);
      if (g2 > tol2 * alpha * beta && g2 >= negligible2) {  // the same on every lane
        const Rotation<T, R> r = rotation_for(alpha, beta, gamma);
        const T new_p = r.c * wp - r.se * wq, new_q = r.s * wp + r.ce * wq;
        if (lane < rows) {
          wp_col[lane] = new_p;
          wq_col[lane] = new_q;
        }
        // The Gram matrix's diagonal moves by the shift (jacobi.cuh). A norm that loses half of
        // itself or more to it has lost digits in the difference: summed again.
        R alpha_new = alpha - r.shift, beta_new = beta + r.shift;
        if (!(alpha_new >= R(0.5) * alpha)) alpha_new = warp_allsum(abs2(new_p));
        if (!(beta_new >= R(0.5) * beta)) beta_new = warp_allsum(abs2(new_q));
        __syncwarp();  // every lane has read sigma[p], sigma[q] before lane 0 writes them
        if (lane == 0) sigma[p] = alpha_new, sigma[q] = beta_new;
        if (vectors && lane < cp) {
          T* vp = vr + p * cp;
          T* vq = vr + q * cp;
          const T x = vp[lane], y = vq[lane];
          vp[lane] = r.c * x - r.se * y;
          vq[lane] = r.s * x + r.ce * y;
        }
        rotated = true;
      }
      __syncthreads();  // the round's columns are written before the next round reads them
    }
    converged = !__syncthreads_or(rotated);
  }
  if (!converged) return fill_nan(cols, m * u_cols, n * v_cols, s, u, v, info_all, cols + 1);

  // Singular values: the columns' norms, descending (ties in index order).
  for (int j = warp; j < cols; j += warps) {
    const R norm = sqrt(norm2_of(j));
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
    // U': the normalized columns, in rank order; the kept ones take ranks 0 .. kept - 1.
    int kept = 0;
    for (int j = 0; j < cols; ++j) kept += sigma[j] >= keep_norm;
    for (int j = warp; j < cols; j += warps) {
      if (lane < rows && sigma[j] >= keep_norm) {
        ul[lane + rank[j] * rows] = w[lane + j * rows] / sigma[j];
      }
    }
    __syncthreads();
    if (warp == 0) {
      // Completion, column by column: e_i for the row i of least weight in the basis so far (so
      // 1 - that weight >= (rows - c) / rows), minus its projection onto the basis, twice.
      for (int c = kept; c < left_cols; ++c) {
        R weight = 0;
        for (int j = 0; j < c; ++j) weight += lane < rows ? abs2(ul[lane + j * rows]) : R(0);
        R room = lane < rows ? R(1) - weight : R(-1);
        int row = lane;
        warp_argmax(room, row);
        row = __shfl_sync(0xffffffffu, row, 0);
        T x = T(lane == row ? 1 : 0);
        for (int pass = 0; pass < 2; ++pass) {
          for (int j = 0; j < c; ++j) {
            const T uj = lane < rows ? ul[lane + j * rows] : T(0);
            x -= uj * warp_allsum(conj_of(uj) * x);
          }
        }
        const R norm = sqrt(warp_allsum(abs2(x)));
        if (lane < rows) ul[lane + c * rows] = x / norm;
        __syncwarp();
      }
    }
    __syncthreads();
    T* left = wide ? v : u;  // rows x left_cols
    for (int idx = tid; idx < rows * left_cols; idx += nthreads) left[idx] = ul[idx];
  }
  if (tid == 0) info_all[blockIdx.x] = 0;
}

}  // namespace

template <typename T, typename R>
cudaError_t gesvdj_small_batched(cudaStream_t stream, int64_t count, int64_t m, int64_t n,
                                 bool econ, const T* a, R* s, T* u, T* v, int* info) {
  using D = typename device_type<T>::type;
  if (count <= 0 || m <= 0 || n <= 0) return cudaSuccess;
  if (m > kGesvdjKernelMaxN || n > kGesvdjKernelMaxN || count > INT32_MAX ||
      (u == nullptr) != (v == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const int64_t rows = std::max(m, n), cols = std::min(m, n), cp = cols + (cols & 1);
  const size_t smem = static_cast<size_t>(rows * cp + cp * cp + rows * rows) * sizeof(D) +
                      static_cast<size_t>(cp) * (sizeof(R) + sizeof(int));
  if (cudaError_t err = allow_shared(gesvdj_small_kernel<D>, smem); err != cudaSuccess) {
    return err;
  }
  gesvdj_small_kernel<D><<<static_cast<unsigned>(count), static_cast<int>(32 * (cp / 2)), smem,
                           stream>>>(static_cast<int>(m), static_cast<int>(n), econ,
                                     reinterpret_cast<const D*>(a), s, reinterpret_cast<D*>(u),
                                     reinterpret_cast<D*>(v), info);
  return cudaGetLastError();
}

template cudaError_t gesvdj_small_batched<float, float>(cudaStream_t, int64_t, int64_t, int64_t,
                                                        bool, const float*, float*, float*,
                                                        float*, int*);
template cudaError_t gesvdj_small_batched<double, double>(cudaStream_t, int64_t, int64_t, int64_t,
                                                          bool, const double*, double*, double*,
                                                          double*, int*);
template cudaError_t gesvdj_small_batched<cuComplex, float>(cudaStream_t, int64_t, int64_t,
                                                            int64_t, bool, const cuComplex*,
                                                            float*, cuComplex*, cuComplex*, int*);
template cudaError_t gesvdj_small_batched<cuDoubleComplex, double>(
    cudaStream_t, int64_t, int64_t, int64_t, bool, const cuDoubleComplex*, double*,
    cuDoubleComplex*, cuDoubleComplex*, int*);

}  // namespace jcm
