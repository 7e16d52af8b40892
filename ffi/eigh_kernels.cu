#include "eigh_kernels.h"

#include "kernel_util.cuh"

#include <cuda/std/limits>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

namespace jcm {

namespace {

using namespace kernel;

// The most threads a launch takes: one per pair of 2 x 2 blocks, (kSyevjKernelMaxN / 2)^2.
constexpr int kJacobiThreads = (kSyevjKernelMaxN / 2) * (kSyevjKernelMaxN / 2);
// Sweeps before giving up (info = n + 1). Cyclic Jacobi converges quadratically: n <= 32 takes
// about 6-10 to reach machine epsilon from a random matrix.
constexpr int kMaxSweeps = 40;

// `op` over the block (any size, a multiple of 32, up to kJacobiThreads), on every thread.
// Starts and ends with a barrier.
template <typename R, typename Op>
__device__ R block_reduce(R v, Op op) {
  __shared__ R warp_part[kJacobiThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  __syncthreads();  // the previous call's readers are done with the shared slots
  if (threadIdx.x % 32 == 0) warp_part[threadIdx.x / 32] = v;
  __syncthreads();
  v = warp_part[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) v = op(v, warp_part[w]);
  __syncthreads();
  return v;
}

// The rotation's arithmetic: in float the hardware's approximate reciprocal square root and
// division (about 2 ulp: the rotation stays orthogonal to working precision, which is all Jacobi
// needs, and the round's critical path is a chain of them); in double the correctly rounded ones.
__device__ inline float rsqrt_of(float x) { return rsqrtf(x); }
__device__ inline double rsqrt_of(double x) { return rsqrt(x); }
__device__ inline float quotient(float x, float y) { return __fdividef(x, y); }
__device__ inline double quotient(double x, double y) { return x / y; }

// g = |g| conj(e), e of modulus 1 (the sign, for real g); |g| = 0 gives e = 1.
template <typename R>
__device__ inline void polar(R g, R* size, R* e) {
  *size = fabs(g);
  *e = g < R(0) ? R(-1) : R(1);
}
template <typename R>
__device__ inline void polar(cuda::std::complex<R> g, R* size, cuda::std::complex<R>* e) {
  const R size2 = abs2(g);
  const R r = size2 > R(0) ? rsqrt_of(size2) : R(0);
  *size = size2 * r;
  *e = size2 > R(0) ? cuda::std::conj(g) * r : cuda::std::complex<R>(1);
}

// The plane rotation J = [[c, s], [-s e, c e]] on columns (p, q), p < q, for which J^H A J has
// a zero (p, q) entry: e makes the pair's off-diagonal g = A(p, q) real (g e = |g|), then
// Rutishauser's rotation zeroes it: t = tan(theta), the smaller root of t^2 + 2 tau t - 1 with
// tau = d / 2|g|, d = A(q,q) - A(p,p), here t = 2|g| sgn(d) / (|d| + sqrt(d^2 + 4|g|^2)) (no
// overflow, one division); the diagonal becomes A(p,p) - t|g|, A(q,q) + t|g|. An entry below
// negligible_of (the matrix is scaled below 1) is dropped, not rotated: its square would
// underflow. se = s e, ce = c e.
template <typename T, typename R>
struct Rotation {
  R c, s, shift;  // shift = t |g|
  T se, ce;
};

// 4 sqrt(smallest normal): 4 |g|^2 stays normal above it.
__device__ inline constexpr float negligible_of(float) { return 4.3368087e-19f; }
__device__ inline constexpr double negligible_of(double) { return 5.9666725849601654e-154; }

template <typename T, typename R>
__device__ inline Rotation<T, R> rotation_for(R app, R aqq, T g) {
  const R negligible = negligible_of(R(0));
  R size;
  T e;
  polar(g, &size, &e);
  if (!(size >= negligible)) return {R(1), R(0), R(0), T(0), T(1)};
  const R d = aqq - app, h = d * d + 4 * size * size;
  const R t = quotient(d < R(0) ? -2 * size : 2 * size, fabs(d) + h * rsqrt_of(h));
  const R c = rsqrt_of(R(1) + t * t), s = t * c;
  return {c, s, t * size, s * e, c * e};
}

// The index at position `pos` of round `round` in the round-robin (circle) order of m indices:
// position 0 stays, the others turn, so that over m - 1 rounds every two indices meet once.
__device__ inline int circle_index(int pos, int round, int m) {
  const int turned = pos - 1 + round;  // < 2 (m - 1)
  return pos == 0 ? 0 : 1 + (turned >= m - 1 ? turned - (m - 1) : turned);
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
// the other, so one barrier a round suffices) and the eigenvectors, m x m each (m = n rounded up
// to even: an odd n gets a zero row and column that no rotation touches), leading dimension m + 1.
// A round: the m / 2 disjoint pairs of the round-robin order rotate at once; thread (kp, kq)
// computes the rotations of pairs kp and kq (redundantly: no barrier between) and writes block
// (kp, kq) of J^H A J, and block (kp, kq) of V J.
template <typename T>
__global__ void __launch_bounds__(kJacobiThreads)
    syevj_small_kernel(int n, bool lower, T* a_all, typename real_of<T>::type* w_all,
                       int* info_all) {
  using R = typename real_of<T>::type;
  const int m = n + (n & 1), ld = m + 1, pairs = m / 2;
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
  int exponent = 0;
  if (largest > R(0)) frexp(largest, &exponent);
  R norm2 = 0;
  for (int idx = tid; idx < m * m; idx += nthreads) {
    const int i = idx % m, j = idx / m;
    T& x = cur[i + j * ld];
    x = x * ldexp(R(1), -exponent);
    norm2 += abs2(x);
  }
  norm2 = block_reduce(norm2, [](R x, R y) { return x + y; });
  const R eps = cuda::std::numeric_limits<R>::epsilon();
  const R tolerance2 = eps * eps * norm2;

  const bool works = tid < pairs * pairs;
  const int kp = tid % pairs, kq = tid / pairs;
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
      if (works) {
        int p1 = circle_index(kp, round, m), q1 = circle_index(m - 1 - kp, round, m);
        int p2 = circle_index(kq, round, m), q2 = circle_index(m - 1 - kq, round, m);
        if (p1 > q1) p1 ^= q1, q1 ^= p1, p1 ^= q1;
        if (p2 > q2) p2 ^= q2, q2 ^= p2, p2 ^= q2;
        auto A = [&](int i, int j) -> T { return cur[i + j * ld]; };
        auto N = [&](int i, int j) -> T& { return next[i + j * ld]; };
        const Rotation<T, R> r2 =
            rotation_for(real_part(A(p2, p2)), real_part(A(q2, q2)), A(p2, q2));
        if (kp == kq) {
          N(p1, p1) = T(real_part(A(p1, p1)) - r2.shift);
          N(q1, q1) = T(real_part(A(q1, q1)) + r2.shift);
          N(p1, q1) = T(0);
          N(q1, p1) = T(0);
        } else {
          const Rotation<T, R> r1 =
              rotation_for(real_part(A(p1, p1)), real_part(A(q1, q1)), A(p1, q1));
          // X = B J2 (columns), then J1^H X (rows).
          const T x00 = r2.c * A(p1, p2) - r2.se * A(p1, q2);
          const T x01 = r2.s * A(p1, p2) + r2.ce * A(p1, q2);
          const T x10 = r2.c * A(q1, p2) - r2.se * A(q1, q2);
          const T x11 = r2.s * A(q1, p2) + r2.ce * A(q1, q2);
          const T se1 = conj_of(r1.se), ce1 = conj_of(r1.ce);
          N(p1, p2) = r1.c * x00 - se1 * x10;
          N(q1, p2) = r1.s * x00 + ce1 * x10;
          N(p1, q2) = r1.c * x01 - se1 * x11;
          N(q1, q2) = r1.s * x01 + ce1 * x11;
        }
        // V J2 on rows p1, q1: each thread owns its block of V, no barrier needed.
        T& v00 = v[p1 + p2 * ld];
        T& v01 = v[p1 + q2 * ld];
        T& v10 = v[q1 + p2 * ld];
        T& v11 = v[q1 + q2 * ld];
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

}  // namespace

template <typename T, typename R>
cudaError_t syevj_small_batched(cudaStream_t stream, int64_t count, int64_t n, bool lower, T* a,
                                R* w, int* info) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > kSyevjKernelMaxN || count > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t m = n + (n & 1), pairs = m / 2;
  const size_t smem = 3 * static_cast<size_t>(m * (m + 1)) * sizeof(D) +
                      static_cast<size_t>(m) * (sizeof(R) + sizeof(int));
  if (cudaError_t err = allow_shared(syevj_small_kernel<D>, smem); err != cudaSuccess) return err;
  const int threads = static_cast<int>(std::max<int64_t>(32, (pairs * pairs + 31) / 32 * 32));
  syevj_small_kernel<D><<<static_cast<unsigned>(count), threads, smem, stream>>>(
      static_cast<int>(n), lower, reinterpret_cast<D*>(a), w, info);
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
