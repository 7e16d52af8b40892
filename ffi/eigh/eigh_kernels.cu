#include "eigh/eigh_kernels.h"

#include "core/jacobi.cuh"
#include "core/kernel_util.cuh"

#include <cuda/std/limits>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

namespace jcm {

using limits::kSyevjKernelMaxN;

namespace {

using namespace kernel;

// The most threads a launch takes: one per pair of 2 x 2 blocks, (kSyevjKernelMaxN / 2)^2.
constexpr int kJacobiThreads = (kSyevjKernelMaxN / 2) * (kSyevjKernelMaxN / 2);
// Sweeps before giving up (info = n + 1). Cyclic Jacobi converges quadratically: n <= 32 takes
// about 6-10 to reach machine epsilon from a random matrix.
constexpr int kMaxSweeps = 40;

// The shared matrices' leading dimension for each even m (index m / 2): of [m, 2m], the one with
// the fewest shared-memory wavefronts over the kernel's accesses, float and double summed (a
// count of bank conflicts from a model of them; 32: 11220 where m + 1 gave 29784).
constexpr int kJacobiLd[kSyevjKernelMaxN / 2 + 1] = {0,  2,  4,  11, 12, 11, 22, 25, 24,
                                                     22, 22, 44, 44, 46, 46, 48, 48};

// Lane `lane`'s rotation, but for its shift (the thread's own pair has it). Real: only se and
// ce, since c > 0 and e = +-1 give c = |ce| and s = se e, exactly.
template <typename R>
__device__ inline Rotation<R, R> rotation_of_lane(const Rotation<R, R>& r, int lane) {
  const R se = shfl_idx(r.se, lane), ce = shfl_idx(r.ce, lane);
  const R e = ce < R(0) ? R(-1) : R(1);
  return {fabs(ce), se * e, R(0), se, ce};
}
template <typename R>
__device__ inline Rotation<cuda::std::complex<R>, R> rotation_of_lane(
    const Rotation<cuda::std::complex<R>, R>& r, int lane) {
  return {shfl_idx(r.c, lane), shfl_idx(r.s, lane), R(0), shfl_idx(r.se, lane),
          shfl_idx(r.ce, lane)};
}

// This block's matrix's eigenvalues and eigenvectors all NaN, and its info.
template <typename T, typename R>
__device__ void fill_nan(int n, T* a, R* w, int* info_all, int info) {
  const R nan = cuda::std::numeric_limits<R>::quiet_NaN();
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) a[idx] = T(nan);
  for (int i = threadIdx.x; i < n; i += blockDim.x) w[i] = nan;
  if (threadIdx.x == 0) info_all[blockIdx.x] = info;
}

// One block per matrix. Shared memory: the matrix twice (each round reads one copy and writes
// the other, so one barrier a round suffices) and the eigenvectors, m x ld each (m = n rounded up
// to even: an odd n gets a zero row and column that no rotation touches). A round: the m / 2
// disjoint pairs of the round-robin order rotate at once. The matrix is stored by position in
// that order, not by index: pair k is always rows and columns (k, m - 1 - k), and the round's
// output is written where the next round's order puts each index (`moved`), so a warp's lanes
// read distinct rows (by index, a round's pairs crowd a few banks: 8-way conflicts at n = 32).
// A sweep's m - 1 rounds bring every index back to its own position. Lane l computes the rotation
// of pair l % (m / 2) (every warp redundantly: no barrier between), which is its thread's kp, so
// thread (kp, kq) takes only kq's from lane kq, and writes block (kp, kq) of J^H A J and the
// rows kp, m - 1 - kp of V J (V by index: its columns do not move).
template <typename T>
__global__ void __launch_bounds__(kJacobiThreads)
    syevj_small_kernel(int n, int ld, bool lower, T* a_all, typename real_of<T>::type* w_all,
                       int* info_all) {
  using R = typename real_of<T>::type;
  const int m = n + (n & 1), pairs = m / 2;
  T* cur = reinterpret_cast<T*>(dynamic_shared());
  T* next = cur + m * ld;
  T* v = next + m * ld;
  R* eig = reinterpret_cast<R*>(v + m * ld);
  int* rank = reinterpret_cast<int*>(eig + m);
  T* a = a_all + static_cast<int64_t>(blockIdx.x) * n * n;
  R* w = w_all + static_cast<int64_t>(blockIdx.x) * n;
  const int tid = threadIdx.x, nthreads = blockDim.x;

  for (int idx = tid; idx < m * m; idx += nthreads) {
    const int i = idx % m, j = idx / m;
    cur[i + j * ld] = T(0);
    v[i + j * ld] = T(i == j ? 1 : 0);
  }
  __syncthreads();
  // The stored triangle, mirrored; its largest magnitude, and whether it is all finite.
  R largest = 0;
  bool finite = true;
  for (int idx = tid; idx < n * n; idx += nthreads) {
    const int i = idx % n, j = idx / n;
    if (lower ? i < j : i > j) continue;
    T x = a[idx];
    if (i == j) x = T(real_part(x));
    const R size = abs1(x);  // >= |x| / sqrt(2): bound enough for the scaling
    finite = finite && isfinite(size);
    largest = size > largest ? size : largest;
    cur[i + j * ld] = x;
    if (i != j) cur[j + i * ld] = conj_of(x);
  }
  const bool bad = __syncthreads_or(!finite);
  largest = block_reduce(largest, [](R x, R y) { return x > y ? x : y; });
  if (bad) return fill_nan(n, a, w, info_all, 0);
  // Scaled by a power of two (exact) so that every |entry| < 1: no square below overflows, and
  // sums of squares stay far from underflow.
  const int exponent = scale_exponent(largest);
  const R scale = ldexp(R(1), -exponent);
  R norm2 = 0;
  for (int idx = tid; idx < m * m; idx += nthreads) {
    const int i = idx % m, j = idx / m;
    T& x = cur[i + j * ld];
    x = x * scale;
    norm2 += abs2(x);
  }
  norm2 = block_reduce(norm2, [](R x, R y) { return x + y; });
  const R eps = cuda::std::numeric_limits<R>::epsilon();
  const R tolerance2 = eps * eps * norm2;

  // kp = lane % pairs: each warp covers 32 / pairs values of kq (pairs <= 16).
  const int lane = tid % 32, per_warp = 32 / pairs, kq_of_lane = tid / 32 * per_warp + lane / pairs;
  const bool works = lane < per_warp * pairs && kq_of_lane < pairs;
  const int kp = lane % pairs, kq = works ? kq_of_lane : 0;
  const int P1 = kp, Q1 = m - 1 - kp, P2 = kq, Q2 = m - 1 - kq;
  // Where the entry at position x goes for the next round: the order's turn, positions 1.. m - 1
  // one down and 1 to the end.
  auto moved = [&](int x) { return x == 0 ? 0 : x == 1 ? m - 1 : x - 1; };
  const int P1n = moved(P1), Q1n = moved(Q1), P2n = moved(P2), Q2n = moved(Q2);
  bool converged = false;
  for (int sweep = 0;; ++sweep) {
    R off2 = 0;
    for (int idx = tid; idx < m * m; idx += nthreads) {
      const int i = idx % m, j = idx / m;
      if (i != j) off2 += abs2(cur[i + j * ld]);
    }
    off2 = block_reduce(off2, [](R x, R y) { return x + y; });
    converged = off2 <= tolerance2;
    if (converged || sweep == kMaxSweeps) break;
    for (int round = 0; round < m - 1; ++round) {
      auto A = [&](int i, int j) -> T { return cur[i + j * ld]; };
      auto N = [&](int i, int j) -> T& { return next[i + j * ld]; };
      const Rotation<T, R> r1 = rotation_for(real_part(A(P1, P1)), real_part(A(Q1, Q1)), A(P1, Q1));
      const Rotation<T, R> r2 = rotation_of_lane(r1, kq);
      if (works) {
        if (kp == kq) {
          N(P1n, P1n) = T(real_part(A(P1, P1)) - r1.shift);
          N(Q1n, Q1n) = T(real_part(A(Q1, Q1)) + r1.shift);
          N(P1n, Q1n) = T(0);
          N(Q1n, P1n) = T(0);
        } else {
          // X = B J2 (columns), then J1^H X (rows).
          const T x00 = r2.c * A(P1, P2) - r2.se * A(P1, Q2);
          const T x01 = r2.s * A(P1, P2) + r2.ce * A(P1, Q2);
          const T x10 = r2.c * A(Q1, P2) - r2.se * A(Q1, Q2);
          const T x11 = r2.s * A(Q1, P2) + r2.ce * A(Q1, Q2);
          const T se1 = conj_of(r1.se), ce1 = conj_of(r1.ce);
          N(P1n, P2n) = r1.c * x00 - se1 * x10;
          N(Q1n, P2n) = r1.s * x00 + ce1 * x10;
          N(P1n, Q2n) = r1.c * x01 - se1 * x11;
          N(Q1n, Q2n) = r1.s * x01 + ce1 * x11;
        }
        // V J2 on rows P1, Q1, columns the indices at positions P2, Q2: each thread owns its
        // block of V, no barrier needed.
        const int p2 = circle_index(P2, round, m), q2 = circle_index(Q2, round, m);
        T& v00 = v[P1 + p2 * ld];
        T& v01 = v[P1 + q2 * ld];
        T& v10 = v[Q1 + p2 * ld];
        T& v11 = v[Q1 + q2 * ld];
        const T y00 = r2.c * v00 - r2.se * v01, y01 = r2.s * v00 + r2.ce * v01;
        const T y10 = r2.c * v10 - r2.se * v11, y11 = r2.s * v10 + r2.ce * v11;
        v00 = y00, v01 = y01, v10 = y10, v11 = y11;
      }
      __syncthreads();  // the round's writes are complete before the next reads them
      T* t = cur;
      cur = next;
      next = t;
    }
  }

  if (!converged) return fill_nan(n, a, w, info_all, n + 1);
  // Eigenvalues ascending (ties in index order); the eigenvectors' columns go with them.
  for (int i = tid; i < n; i += nthreads) eig[i] = real_part(cur[i + i * ld]);
  __syncthreads();
  for (int i = tid; i < n; i += nthreads) {
    int r = 0;
    for (int j = 0; j < n; ++j) r += eig[j] < eig[i] || (eig[j] == eig[i] && j < i);
    rank[i] = r;
    w[r] = ldexp(eig[i], exponent);
  }
  __syncthreads();
  for (int idx = tid; idx < n * n; idx += nthreads) {
    const int i = idx % n, j = idx / n;
    a[i + static_cast<int64_t>(rank[j]) * n] = v[i + j * ld];
  }
  if (tid == 0) info_all[blockIdx.x] = 0;
}

// n <= kSyevjTinyMaxN: a thread per matrix, the matrix (both triangles) and its eigenvectors
// in registers, through the stage both ways (kernel_util.cuh tiny_load). syevj_small_kernel's
// method, conventions and stopping test, with the pairs in cyclic-by-row order: each rotation
// J = [[c, s], [-s e, c e]] (jacobi.cuh rotation_for) on columns (p, q), then J^H on rows (p, q),
// its (p, q) entry set to zero; V J on V's columns.
template <typename T, int N>
__global__ void __launch_bounds__(kTinyThreads)
    syevj_tiny_kernel(int64_t count, bool lower, T* a_all, typename real_of<T>::type* w_all,
                      int* info_all) {
  using R = typename real_of<T>::type;
  constexpr int kSize = N * N;
  const TinyThread<T> me = tiny_begin(count, a_all, kSize);
  T a[N][N], v[N][N];
  R largest = 0;
  bool finite = true;
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = j; i < N; ++i) {  // the stored triangle, read as the lower one
      T x = me.active ? hermitian_lower_entry<N>(me.mine, lower, i, j) : T(i == j);
      if (i == j) x = T(real_part(x));
      const R size = abs1(x);
      finite = finite && isfinite(size);
      largest = size > largest ? size : largest;
      a[i][j] = x;
      a[j][i] = conj_of(x);
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i][j] = T(i == j ? 1 : 0);
  }
  // Scaled by a power of two (exact) so that every |entry| < 1, as syevj_small_kernel.
  const int exponent = finite ? scale_exponent(largest) : 0;
  const R scale = ldexp(R(1), -exponent);
  R norm2 = 0;
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      a[i][j] = a[i][j] * scale;
      norm2 += abs2(a[i][j]);
    }
  }
  const R eps = cuda::std::numeric_limits<R>::epsilon();
  const R tolerance2 = eps * eps * norm2;
  bool converged = false;
  for (int sweep = 0; finite; ++sweep) {
    R off2 = 0;
#pragma unroll
    for (int j = 0; j < N; ++j) {
#pragma unroll
      for (int i = 0; i < N; ++i) off2 += i != j ? abs2(a[i][j]) : R(0);
    }
    converged = off2 <= tolerance2;
    if (converged || sweep == kMaxSweeps) break;
#pragma unroll
    for (int p = 0; p < N - 1; ++p) {
#pragma unroll
      for (int q = p + 1; q < N; ++q) {
        const R app = real_part(a[p][p]), aqq = real_part(a[q][q]);
        const Rotation<T, R> r = rotation_for(app, aqq, a[p][q]);
        const T se_h = conj_of(r.se), ce_h = conj_of(r.ce);
#pragma unroll
        for (int i = 0; i < N; ++i) {  // A J, V J: columns p, q
          const T xp = a[i][p], xq = a[i][q];
          a[i][p] = r.c * xp - r.se * xq;
          a[i][q] = r.s * xp + r.ce * xq;
          const T vp = v[i][p], vq = v[i][q];
          v[i][p] = r.c * vp - r.se * vq;
          v[i][q] = r.s * vp + r.ce * vq;
        }
#pragma unroll
        for (int j = 0; j < N; ++j) {  // J^H (A J): rows p, q
          const T yp = a[p][j], yq = a[q][j];
          a[p][j] = r.c * yp - se_h * yq;
          a[q][j] = r.s * yp + ce_h * yq;
        }
        a[p][p] = T(app - r.shift);
        a[q][q] = T(aqq + r.shift);
        a[p][q] = T(0);
        a[q][p] = T(0);
      }
    }
  }
  const int info = !finite ? 0 : converged ? 0 : N + 1;
  if (me.active) {
    R* w = w_all + me.item() * N;
    if (finite && converged) {
      // Eigenvalues ascending (ties in index order); the eigenvectors' columns go with them.
      R eig[N];
#pragma unroll
      for (int i = 0; i < N; ++i) eig[i] = real_part(a[i][i]);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        int rank = 0;
#pragma unroll
        for (int k = 0; k < N; ++k) rank += eig[k] < eig[j] || (eig[k] == eig[j] && k < j);
        w[rank] = ldexp(eig[j], exponent);
#pragma unroll
        for (int r = 0; r < N; ++r) {  // column j to column rank, every index a constant
          if (r == rank) {
#pragma unroll
            for (int i = 0; i < N; ++i) me.mine[i + r * N] = v[i][j];
          }
        }
      }
    } else {  // NaN or Inf in the triangle read, or no convergence: NaN, as syevj_small_kernel
      const R nan = cuda::std::numeric_limits<R>::quiet_NaN();
#pragma unroll
      for (int i = 0; i < N; ++i) w[i] = nan;
#pragma unroll
      for (int e = 0; e < kSize; ++e) me.mine[e] = T(nan);
    }
    info_all[me.item()] = info;
  }
  tiny_store(a_all, me.stage, me.block, kSize);
}

}  // namespace

template <typename T, typename R>
cudaError_t syevj_small_batched(cudaStream_t stream, int64_t count, int64_t n, bool lower, T* a,
                                R* w, int* info) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > kSyevjKernelMaxN || count > INT32_MAX) return cudaErrorInvalidValue;
  if (n <= limits::kSyevjTinyMaxN) {
    return with_tiny_n(n, [&](auto order) {
      constexpr int N = decltype(order)::value;
      syevj_tiny_kernel<D, N><<<tiny_blocks(count), kTinyThreads,
                                tiny_stage_bytes(N * N, sizeof(D)), stream>>>(
          count, lower, reinterpret_cast<D*>(a), w, info);
      return cudaGetLastError();
    });
  }
  const int64_t m = n + (n & 1), pairs = m / 2, ld = kJacobiLd[pairs];
  const size_t smem = 3 * static_cast<size_t>(m * ld) * sizeof(D) +
                      static_cast<size_t>(m) * (sizeof(R) + sizeof(int));
  if (cudaError_t err = allow_shared(syevj_small_kernel<D>, smem); err != cudaSuccess) return err;
  const int64_t per_warp = 32 / pairs, warps = (pairs + per_warp - 1) / per_warp;
  syevj_small_kernel<D><<<static_cast<unsigned>(count), static_cast<unsigned>(32 * warps), smem,
                          stream>>>(static_cast<int>(n), static_cast<int>(ld), lower,
                                    reinterpret_cast<D*>(a), w, info);
  return cudaGetLastError();
}

template cudaError_t syevj_small_batched<float, float>(cudaStream_t, int64_t, int64_t, bool,
                                                       float*, float*, int*);
template cudaError_t syevj_small_batched<double, double>(cudaStream_t, int64_t, int64_t, bool,
                                                         double*, double*, int*);
template cudaError_t syevj_small_batched<cuComplex, float>(cudaStream_t, int64_t, int64_t, bool,
                                                           cuComplex*, float*, int*);
template cudaError_t syevj_small_batched<cuDoubleComplex, double>(cudaStream_t, int64_t, int64_t,
                                                                  bool, cuDoubleComplex*,
                                                                  double*, int*);

}  // namespace jcm
