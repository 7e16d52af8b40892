#include "qr/qr_kernels.h"

#include "core/kernel_util.cuh"

#include <climits>
#include <cmath>
#include <cstdint>

namespace jcm {

using limits::kQrKernelMaxN;

namespace {

using namespace kernel;

// A(c:m, c+1:n) := H A(c:m, c+1:n) with H = I - t v v^H, v = (1, A(c+1:m, c)) (LAPACK ?larf
// from the left). Each warp takes whole columns j: u = v^H A(c:m, j), then A(c:m, j) -= (t u) v,
// so no column waits for another. Ends with a barrier.
template <typename T>
__device__ void apply_reflector_left(T* a, int lda, int m, int n, int c, T t) {
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * lda]; };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = c + 1 + warp; j < n; j += kWarps) {
    T s = T(0);
    for (int i = c + 1 + lane; i < m; i += 32) s += conj_of(A(i, c)) * A(i, j);
    s = warp_sum(s);
    if (lane == 0) s += A(c, j);
    const T ts = shfl_idx(t * s, 0);
    if (lane == 0) A(c, j) -= ts;
    for (int i = c + 1 + lane; i < m; i += 32) A(i, j) -= A(i, c) * ts;
  }
  __syncthreads();
}

// LAPACK ?larfg for a column whose head is alpha and whose tail (below it) has norm xnorm: the
// reflector's tau, the factor that scales the tail into v (1 / (alpha - beta)) and the column's
// new head (beta). H = I (tau 0, the head kept) where the tail is zero and alpha real, and for
// real T where the column has one row (complex ?larfg still makes alpha real there).
template <typename T>
struct Reflector {
  T tau, scale, head;
};
template <typename T>
__device__ inline Reflector<T> larfg(T alpha, typename real_of<T>::type xnorm, bool one_row) {
  using R = typename real_of<T>::type;
  const R alphr = real_part(alpha), alphi = imag_part(alpha);
  if ((xnorm == R(0) && alphi == R(0)) || (!is_complex_v<T> && one_row)) {
    return {T(0), T(0), alpha};
  }
  const R beta = -copysign(hypot(hypot(alphr, alphi), xnorm), alphr);
  T tau;
  if constexpr (is_complex_v<T>) {
    tau = T((beta - alphr) / beta, -alphi / beta);
  } else {
    tau = T((beta - alphr) / beta);
  }
  return {tau, T(1) / (alpha - T(beta)), T(beta)};
}

// One block per matrix (column-major m x n), LAPACK ?geqr2: column c gets its reflector from
// ?larfg (larfg above: beta = -sign(re alpha) |(alpha, x)|, tau = (beta - alpha) / beta, v = x /
// (alpha - beta)), then H(c)^H is applied to the columns right of it. ld_shared > 0: the matrix is
// worked on in shared memory (MatrixPlace).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    geqr2_kernel(int m, int n, int ld_shared, T* a_all, T* tau_all) {
  using R = typename real_of<T>::type;
  T* step = reinterpret_cast<T*>(dynamic_shared());  // the step's scale and tau
  const int k = min(m, n);
  T* a_global = a_all + static_cast<int64_t>(blockIdx.x) * m * n;
  T* tau = tau_all + static_cast<int64_t>(blockIdx.x) * k;
  T* a = ld_shared ? step + 2 : a_global;
  const int lda = ld_shared ? ld_shared : m;
  if (ld_shared) copy_matrix(a, lda, a_global, m, m, n);
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * lda]; };
  const int tid = threadIdx.x;
  for (int c = 0; c < k; ++c) {
    double partial = 0;
    for (int i = c + 1 + tid; i < m; i += blockDim.x) partial += abs2(A(i, c));
    const double sum_sq = block_reduce(partial, [](double x, double y) { return x + y; });
    if (tid == 0) {
      const Reflector<T> h = larfg(A(c, c), static_cast<R>(sqrt(sum_sq)), m - c <= 1);
      A(c, c) = h.head;
      tau[c] = h.tau;
      step[0] = h.scale;
      step[1] = h.tau;
    }
    __syncthreads();
    const T scale = step[0], t = step[1];
    if (t == T(0)) continue;  // H = I: nothing to scale or apply (uniform: a shared read)
    for (int i = c + 1 + tid; i < m; i += blockDim.x) A(i, c) *= scale;
    __syncthreads();
    apply_reflector_left(a, lda, m, n, c, conj_of(t));
  }
  if (ld_shared) {
    __syncthreads();
    copy_matrix(a_global, m, a, lda, m, n);
  }
}

// One block per matrix, LAPACK ?org2r / ?ung2r: columns k.. start as the unit matrix's, then
// H(c) for c = k-1 .. 0 is applied to the columns right of c, and column c becomes H(c) e_c.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    org2r_kernel(int m, int n, int k, int ld_shared, T* a_all, const T* tau_all) {
  T* a_global = a_all + static_cast<int64_t>(blockIdx.x) * m * n;
  const T* tau = tau_all + static_cast<int64_t>(blockIdx.x) * k;
  T* a = ld_shared ? reinterpret_cast<T*>(dynamic_shared()) : a_global;
  const int lda = ld_shared ? ld_shared : m;
  if (ld_shared) copy_matrix(a, lda, a_global, m, m, k);  // the reflectors
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * lda]; };
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int j = k + warp; j < n; j += kWarps) {
    for (int i = lane; i < m; i += 32) A(i, j) = i == j ? T(1) : T(0);
  }
  __syncthreads();
  for (int c = k - 1; c >= 0; --c) {
    const T t = tau[c];
    if (c < n - 1) apply_reflector_left(a, lda, m, n, c, t);
    for (int i = tid; i < m; i += blockDim.x) {
      if (i < c) {
        A(i, c) = T(0);
      } else if (i == c) {
        A(c, c) = T(1) - t;
      } else {
        A(i, c) *= -t;
      }
    }
    __syncthreads();
  }
  if (ld_shared) copy_matrix(a_global, m, a, lda, m, n);
}

// One block per product, LAPACK ?orm2r / ?unm2r: H(i) (tau conjugated for the adjoint) applied
// in turn to C(i:m, :) from the left or C(:, i:n) from the right, in the order that makes op(Q).
// Each warp owns whole columns (left) or rows (right) of C: its dot product with v, then its
// update, with no barrier between.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    orm2r_kernel(bool left, bool adjoint, int m, int n, int k, int lda, int ld_shared,
                 const T* a_all, const T* tau_all, T* c_all) {
  const T* a = a_all + static_cast<int64_t>(blockIdx.x) * lda * k;
  const T* tau = tau_all + static_cast<int64_t>(blockIdx.x) * k;
  T* c_global = c_all + static_cast<int64_t>(blockIdx.x) * m * n;
  T* c = ld_shared ? reinterpret_cast<T*>(dynamic_shared()) : c_global;
  const int ldc = ld_shared ? ld_shared : m;
  if (ld_shared) copy_matrix(c, ldc, c_global, m, m, n);
  auto A = [&](int i, int j) -> const T& { return a[i + static_cast<int64_t>(j) * lda]; };
  auto C = [&](int i, int j) -> T& { return c[i + static_cast<int64_t>(j) * ldc]; };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool forward = left == adjoint;  // Q^H C and C Q apply H(1) first
  for (int step = 0; step < k; ++step) {
    const int i = forward ? step : k - 1 - step;
    const T t = adjoint ? conj_of(tau[i]) : tau[i];
    auto v = [&](int r) -> T { return r == i ? T(1) : A(r, i); };  // v_r for r >= i
    if (left) {  // C(i:m, j) -= (t v^H C(i:m, j)) v
      for (int j = warp; j < n; j += kWarps) {
        T s = T(0);
        for (int r = i + lane; r < m; r += 32) s += conj_of(v(r)) * C(r, j);
        const T ts = shfl_idx(t * warp_sum(s), 0);
        for (int r = i + lane; r < m; r += 32) C(r, j) -= v(r) * ts;
      }
    } else {  // C(r, i:n) -= (t C(r, i:n) v) v^H
      for (int r = warp; r < m; r += kWarps) {
        T s = T(0);
        for (int j = i + lane; j < n; j += 32) s += C(r, j) * v(j);
        const T ts = shfl_idx(t * warp_sum(s), 0);
        for (int j = i + lane; j < n; j += 32) C(r, j) -= ts * conj_of(v(j));
      }
    }
    __syncthreads();
  }
  if (ld_shared) copy_matrix(c_global, m, c, ldc, m, n);
}

// apply_reflector_left on a thread's registers: A(c:N, c+1:N) -= (t v^H A(c:N, c+1:N)) v with
// v = (1, A(c+1:N, c)). c must be a constant once unrolled (a register index).
template <typename T, int N>
__device__ inline void apply_reflector_left_tiny(T (&a)[N][N], int c, T t) {
#pragma unroll
  for (int j = c + 1; j < N; ++j) {
    T s = a[c][j];
#pragma unroll
    for (int i = c + 1; i < N; ++i) s += conj_of(a[i][c]) * a[i][j];
    const T ts = t * s;
    a[c][j] -= ts;
#pragma unroll
    for (int i = c + 1; i < N; ++i) a[i][j] -= a[i][c] * ts;
  }
}

// Square n <= kQrTinyMaxN (geqr2_batched): a thread per matrix, its entries in registers
// (a[i][j] = A(i, j)), through the stage both ways (kernel_util.cuh tiny_load); tau written
// directly. geqr2_kernel's ?larfg and reflector steps, the column's sum of squares in double as
// there. Every index is a constant, so nothing goes to local memory.
template <typename T, int N>
__global__ void __launch_bounds__(kTinyThreads)
    geqr2_tiny_kernel(int64_t count, T* a_all, T* tau_all) {
  using R = typename real_of<T>::type;
  const TinyThread<T> me = tiny_begin(count, a_all, N * N);
  T a[N][N];
  tiny_get(me, a, T(0));
  T tau[N];
#pragma unroll
  for (int c = 0; c < N; ++c) {
    double sum_sq = 0;
#pragma unroll
    for (int i = c + 1; i < N; ++i) sum_sq += abs2(a[i][c]);
    const Reflector<T> h = larfg(a[c][c], static_cast<R>(sqrt(sum_sq)), c == N - 1);
    a[c][c] = h.head;
    tau[c] = h.tau;
    if (h.tau != T(0)) {
#pragma unroll
      for (int i = c + 1; i < N; ++i) a[i][c] *= h.scale;
      apply_reflector_left_tiny(a, c, conj_of(h.tau));  // H(c)^H, as geqr2_kernel
    }
  }
  tiny_put(me, a);
  if (me.active) {
#pragma unroll
    for (int c = 0; c < N; ++c) tau_all[me.item() * N + c] = tau[c];
  }
  tiny_store(a_all, me.stage, me.block, N * N);
}

// Square n <= kQrTinyMaxN, k <= n reflectors (org2r_batched): a thread per matrix, as
// geqr2_tiny_kernel; org2r_kernel's steps. A step c >= k is predicated off, so that every index
// stays a constant.
template <typename T, int N>
__global__ void __launch_bounds__(kTinyThreads)
    org2r_tiny_kernel(int64_t count, int k, T* a_all, const T* tau_all) {
  const TinyThread<T> me = tiny_begin(count, a_all, N * N);
  T a[N][N], tau[N];
#pragma unroll
  for (int j = 0; j < N; ++j) {
    tau[j] = me.active && j < k ? tau_all[me.item() * k + j] : T(0);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      // Columns k.. start as the unit matrix's.
      a[i][j] = j >= k ? T(i == j ? 1 : 0) : me.active ? me.mine[i + j * N] : T(0);
    }
  }
#pragma unroll
  for (int c = N - 1; c >= 0; --c) {
    if (c >= k) continue;
    const T t = tau[c];
    apply_reflector_left_tiny(a, c, t);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      a[i][c] = i < c ? T(0) : i == c ? T(1) - t : a[i][c] * (-t);
    }
  }
  tiny_put(me, a);
  tiny_store(a_all, me.stage, me.block, N * N);
}

}  // namespace

template <typename T>
cudaError_t geqr2_batched(cudaStream_t stream, int64_t count, int64_t m, int64_t n, T* a,
                          T* tau) {
  using D = typename device_type<T>::type;
  if (count <= 0 || m <= 0 || n <= 0) return cudaSuccess;
  if (n > kQrKernelMaxN || m > INT32_MAX / n || count > INT32_MAX) return cudaErrorInvalidValue;
  if (m == n && n <= limits::kQrTinyMaxN) {
    return with_tiny_n(n, [&](auto order) {
      constexpr int N = decltype(order)::value;
      geqr2_tiny_kernel<D, N><<<tiny_blocks(count), kTinyThreads,
                                tiny_stage_bytes(N * N, sizeof(D)), stream>>>(
          count, reinterpret_cast<D*>(a), reinterpret_cast<D*>(tau));
      return cudaGetLastError();
    });
  }
  const MatrixPlace place = place_matrix(m, n, sizeof(D), 2 * sizeof(D));
  if (cudaError_t err = allow_shared(geqr2_kernel<D>, place.smem_bytes); err != cudaSuccess) {
    return err;
  }
  geqr2_kernel<D><<<static_cast<unsigned>(count), kThreads, place.smem_bytes, stream>>>(
      static_cast<int>(m), static_cast<int>(n), place.ld_shared, reinterpret_cast<D*>(a),
      reinterpret_cast<D*>(tau));
  return cudaGetLastError();
}

template <typename T>
cudaError_t org2r_batched(cudaStream_t stream, int64_t count, int64_t m, int64_t n, int64_t k,
                          T* a, const T* tau) {
  using D = typename device_type<T>::type;
  if (count <= 0 || m <= 0 || n <= 0) return cudaSuccess;
  if (n > kQrKernelMaxN || m > INT32_MAX / n || count > INT32_MAX || k > n || n > m) {
    return cudaErrorInvalidValue;
  }
  if (m == n && n <= limits::kQrTinyMaxN) {
    return with_tiny_n(n, [&](auto order) {
      constexpr int N = decltype(order)::value;
      org2r_tiny_kernel<D, N><<<tiny_blocks(count), kTinyThreads,
                                tiny_stage_bytes(N * N, sizeof(D)), stream>>>(
          count, static_cast<int>(k), reinterpret_cast<D*>(a), reinterpret_cast<const D*>(tau));
      return cudaGetLastError();
    });
  }
  const MatrixPlace place = place_matrix(m, n, sizeof(D), 0);
  if (cudaError_t err = allow_shared(org2r_kernel<D>, place.smem_bytes); err != cudaSuccess) {
    return err;
  }
  org2r_kernel<D><<<static_cast<unsigned>(count), kThreads, place.smem_bytes, stream>>>(
      static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), place.ld_shared,
      reinterpret_cast<D*>(a), reinterpret_cast<const D*>(tau));
  return cudaGetLastError();
}

template <typename T>
cudaError_t orm2r_batched(cudaStream_t stream, int64_t count, bool left, bool adjoint, int64_t m,
                          int64_t n, int64_t k, const T* a, const T* tau, T* c) {
  using D = typename device_type<T>::type;
  if (count <= 0 || m <= 0 || n <= 0 || k <= 0) return cudaSuccess;
  const int64_t lda = left ? m : n, other = left ? n : m;
  if (other > kQrKernelMaxN || k > lda || m > INT32_MAX / n || lda > INT32_MAX / k ||
      count > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  const MatrixPlace place = place_matrix(m, n, sizeof(D), 0);
  if (cudaError_t err = allow_shared(orm2r_kernel<D>, place.smem_bytes); err != cudaSuccess) {
    return err;
  }
  orm2r_kernel<D><<<static_cast<unsigned>(count), kThreads, place.smem_bytes, stream>>>(
      left, adjoint, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
      static_cast<int>(lda), place.ld_shared, reinterpret_cast<const D*>(a),
      reinterpret_cast<const D*>(tau), reinterpret_cast<D*>(c));
  return cudaGetLastError();
}

#define JCM_QR_KERNELS(T)                                                                     \
  template cudaError_t geqr2_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, T*, T*);    \
  template cudaError_t org2r_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, int64_t, T*, \
                                        const T*);                                           \
  template cudaError_t orm2r_batched<T>(cudaStream_t, int64_t, bool, bool, int64_t, int64_t,  \
                                        int64_t, const T*, const T*, T*);
JCM_QR_KERNELS(float)
JCM_QR_KERNELS(double)
JCM_QR_KERNELS(cuComplex)
JCM_QR_KERNELS(cuDoubleComplex)
#undef JCM_QR_KERNELS

}  // namespace jcm
