#include "qr_kernels.h"

#include "kernel_util.cuh"

#include <climits>
#include <cmath>
#include <cstdint>

namespace jcm {

namespace {

using namespace kernel;

// The sum of one double per thread, on every thread of the block. Starts and ends with a barrier.
__device__ double block_sum(double v) {
  __shared__ double warp_total[kWarps];
  v = warp_sum(v);
  __syncthreads();  // the previous call's readers are done with the shared slots
  if (threadIdx.x % 32 == 0) warp_total[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < kWarps; ++w) total += warp_total[w];
  __syncthreads();
  return total;
}

// u[j] = sum over i >= c of conj(v_i) A(i, j) for j in (c, n), with v_c = 1 and v_i = A(i, c)
// below: one warp per column. Then A(i, j) -= t v_i u[j] for i >= c, j > c (LAPACK ?larf from
// the left with H = I - t v v^H). Both phases end with a barrier.
template <typename T>
__device__ void apply_reflector_left(T* a, int m, int n, int c, T t, T* u) {
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * m]; };
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  for (int j = c + 1 + warp; j < n; j += kWarps) {
    T s = T(0);
    for (int i = c + 1 + lane; i < m; i += 32) s += conj_of(A(i, c)) * A(i, j);
    s = warp_sum(s);
    if (lane == 0) u[j] = s + A(c, j);
  }
  __syncthreads();
  const int rows = m - c, cols = n - c - 1;
  const int64_t total = static_cast<int64_t>(rows) * cols;
  for (int64_t e = tid; e < total; e += blockDim.x) {
    const int i = c + static_cast<int>(e % rows), j = c + 1 + static_cast<int>(e / rows);
    const T v = i == c ? T(1) : A(i, c);
    A(i, j) -= t * v * u[j];
  }
  __syncthreads();
}

// One block per matrix (column-major m x n), LAPACK ?geqr2: column c gets its reflector from
// ?larfg (beta = -sign(re alpha) |(alpha, x)|, tau = (beta - alpha) / beta, v = x / (alpha -
// beta)), then H(c)^H is applied to the columns right of it.
template <typename T>
__global__ void __launch_bounds__(kThreads) geqr2_kernel(int m, int n, T* a_all, T* tau_all) {
  using R = typename real_of<T>::type;
  extern __shared__ unsigned char shared_raw[];
  T* u = reinterpret_cast<T*>(shared_raw);  // n dot products, then the step's scale and tau
  const int k = min(m, n);
  T* a = a_all + static_cast<int64_t>(blockIdx.x) * m * n;
  T* tau = tau_all + static_cast<int64_t>(blockIdx.x) * k;
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * m]; };
  const int tid = threadIdx.x;
  for (int c = 0; c < k; ++c) {
    double partial = 0;
    for (int i = c + 1 + tid; i < m; i += blockDim.x) partial += abs2(A(i, c));
    const double sum_sq = block_sum(partial);
    if (tid == 0) {
      const T alpha = A(c, c);
      const R alphr = real_part(alpha), alphi = imag_part(alpha);
      const R xnorm = static_cast<R>(sqrt(sum_sq));
      T t = T(0), scale = T(0);
      // Real ?larfg returns H = I for a single row; complex ?larfg still makes alpha real.
      const bool identity = (xnorm == R(0) && alphi == R(0)) || (!is_complex_v<T> && m - c <= 1);
      if (!identity) {
        const R beta = -copysign(hypot(hypot(alphr, alphi), xnorm), alphr);
        if constexpr (is_complex_v<T>) {
          t = T((beta - alphr) / beta, -alphi / beta);
        } else {
          t = T((beta - alphr) / beta);
        }
        scale = T(1) / (alpha - T(beta));
        A(c, c) = T(beta);
      }
      tau[c] = t;
      u[n] = scale;
      u[n + 1] = t;
    }
    __syncthreads();
    const T scale = u[n], t = u[n + 1];
    if (t == T(0)) continue;  // H = I: nothing to scale or apply (uniform: a shared read)
    for (int i = c + 1 + tid; i < m; i += blockDim.x) A(i, c) *= scale;
    __syncthreads();
    apply_reflector_left(a, m, n, c, conj_of(t), u);
  }
}

// One block per matrix, LAPACK ?org2r / ?ung2r: columns k.. start as the unit matrix's, then
// H(c) for c = k-1 .. 0 is applied to the columns right of c, and column c becomes H(c) e_c.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    org2r_kernel(int m, int n, int k, T* a_all, const T* tau_all) {
  extern __shared__ unsigned char shared_raw[];
  T* u = reinterpret_cast<T*>(shared_raw);
  T* a = a_all + static_cast<int64_t>(blockIdx.x) * m * n;
  const T* tau = tau_all + static_cast<int64_t>(blockIdx.x) * k;
  auto A = [&](int i, int j) -> T& { return a[i + static_cast<int64_t>(j) * m]; };
  const int tid = threadIdx.x;
  const int64_t unit = static_cast<int64_t>(m) * (n - k);
  for (int64_t e = tid; e < unit; e += blockDim.x) {
    const int i = static_cast<int>(e % m), j = k + static_cast<int>(e / m);
    A(i, j) = i == j ? T(1) : T(0);
  }
  __syncthreads();
  for (int c = k - 1; c >= 0; --c) {
    const T t = tau[c];
    if (c < n - 1) apply_reflector_left(a, m, n, c, t, u);
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
}

// One block per product, LAPACK ?orm2r / ?unm2r: H(i) (tau conjugated for the adjoint) applied
// in turn to C(i:m, :) from the left or C(:, i:n) from the right, in the order that makes op(Q).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    orm2r_kernel(bool left, bool adjoint, int m, int n, int k, int lda, const T* a_all,
                 const T* tau_all, T* c_all) {
  extern __shared__ unsigned char shared_raw[];
  T* u = reinterpret_cast<T*>(shared_raw);  // one entry per column (left) or row (right) of C
  const T* a = a_all + static_cast<int64_t>(blockIdx.x) * lda * k;
  const T* tau = tau_all + static_cast<int64_t>(blockIdx.x) * k;
  T* c = c_all + static_cast<int64_t>(blockIdx.x) * m * n;
  auto A = [&](int i, int j) -> const T& { return a[i + static_cast<int64_t>(j) * lda]; };
  auto C = [&](int i, int j) -> T& { return c[i + static_cast<int64_t>(j) * m]; };
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const bool forward = left == adjoint;  // Q^H C and C Q apply H(1) first
  for (int step = 0; step < k; ++step) {
    const int i = forward ? step : k - 1 - step;
    const T t = adjoint ? conj_of(tau[i]) : tau[i];
    auto v = [&](int r) -> T { return r == i ? T(1) : A(r, i); };  // v_r for r >= i
    if (left) {  // C(i:m, :) -= t v (v^H C(i:m, :))
      for (int j = warp; j < n; j += kWarps) {
        T s = T(0);
        for (int r = i + lane; r < m; r += 32) s += conj_of(v(r)) * C(r, j);
        s = warp_sum(s);
        if (lane == 0) u[j] = s;
      }
      __syncthreads();
      const int rows = m - i;
      const int64_t total = static_cast<int64_t>(rows) * n;
      for (int64_t e = tid; e < total; e += blockDim.x) {
        const int r = i + static_cast<int>(e % rows), j = static_cast<int>(e / rows);
        C(r, j) -= t * v(r) * u[j];
      }
    } else {  // C(:, i:n) -= t (C(:, i:n) v) v^H
      for (int r = warp; r < m; r += kWarps) {
        T s = T(0);
        for (int j = i + lane; j < n; j += 32) s += C(r, j) * v(j);
        s = warp_sum(s);
        if (lane == 0) u[r] = s;
      }
      __syncthreads();
      const int cols = n - i;
      const int64_t total = static_cast<int64_t>(m) * cols;
      for (int64_t e = tid; e < total; e += blockDim.x) {
        const int r = static_cast<int>(e % m), j = i + static_cast<int>(e / m);
        C(r, j) -= t * u[r] * conj_of(v(j));
      }
    }
    __syncthreads();
  }
}

}  // namespace

template <typename T>
cudaError_t geqr2_batched(cudaStream_t stream, int64_t count, int64_t m, int64_t n, T* a,
                          T* tau) {
  using D = typename device_type<T>::type;
  if (count <= 0 || m <= 0 || n <= 0) return cudaSuccess;
  if (n > kQrKernelMaxN || m > INT32_MAX / n || count > INT32_MAX) return cudaErrorInvalidValue;
  geqr2_kernel<D><<<static_cast<unsigned>(count), kThreads, (n + 2) * sizeof(D), stream>>>(
      static_cast<int>(m), static_cast<int>(n), reinterpret_cast<D*>(a),
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
  org2r_kernel<D><<<static_cast<unsigned>(count), kThreads, n * sizeof(D), stream>>>(
      static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), reinterpret_cast<D*>(a),
      reinterpret_cast<const D*>(tau));
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
  orm2r_kernel<D><<<static_cast<unsigned>(count), kThreads, other * sizeof(D), stream>>>(
      left, adjoint, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
      static_cast<int>(lda), reinterpret_cast<const D*>(a), reinterpret_cast<const D*>(tau),
      reinterpret_cast<D*>(c));
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
