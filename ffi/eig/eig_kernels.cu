#include "eig/eig_kernels.h"

#include "core/jacobi.cuh"
#include "core/kernel_util.cuh"

#include <cuda/std/complex>
#include <cuda/std/limits>

#include <cmath>
#include <cstdint>

namespace jcm {

using limits::kGeevTinyMaxN;

namespace {

using namespace kernel;

// QR iterations over all of a matrix's eigenvalues before it counts as failed: ?lahqr's
// 30 max(10, n).
constexpr int kMaxIterations = 300;
// Every kExceptionalShift iterations without a deflation the shift is ?lahqr's exceptional
// one (3/4 of the last subdiagonal entry's real part, off the corner entry): it breaks a cycle
// the Wilkinson shift can fall into.
constexpr int kExceptionalShift = 10;

template <typename R>
using Cx = cuda::std::complex<R>;

// G = [[c, s], [-conj(s), c]], c real, with G [x; y] = [r; 0].
template <typename R>
struct Givens {
  R c;
  Cx<R> s;
};
template <typename R>
__device__ inline Givens<R> givens(Cx<R> x, Cx<R> y) {
  const R ax = cuda::std::abs(x), ay = cuda::std::abs(y);
  if (ay == R(0)) return {R(1), Cx<R>(0)};
  if (ax == R(0)) return {R(0), cuda::std::conj(y) / ay};
  const R r = hypot(ax, ay);
  return {ax / r, (x / ax) * cuda::std::conj(y) / r};
}

// Rows p, p + 1 of h times G (from the left), every column.
template <typename R, int N>
__device__ inline void rotate_rows(Cx<R> (&h)[N][N], int p, Givens<R> g) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const Cx<R> x = h[p][k], y = h[p + 1][k];
    h[p][k] = g.c * x + g.s * y;
    h[p + 1][k] = -cuda::std::conj(g.s) * x + g.c * y;
  }
}

// Columns p, p + 1 of h times G^H (from the right), every row.
template <typename R, int N>
__device__ inline void rotate_columns(Cx<R> (&h)[N][N], int p, Givens<R> g) {
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const Cx<R> x = h[k][p], y = h[k][p + 1];
    h[k][p] = g.c * x + cuda::std::conj(g.s) * y;
    h[k][p + 1] = -g.s * x + g.c * y;
  }
}

// The eigenvalue of [[a, b], [c, d]] nearer d.
template <typename R>
__device__ inline Cx<R> wilkinson_shift(Cx<R> a, Cx<R> b, Cx<R> c, Cx<R> d) {
  const Cx<R> p = (a - d) * R(0.5), bc = b * c;
  Cx<R> root = cuda::std::sqrt(p * p + bc);
  if ((cuda::std::conj(p) * root).real() < R(0)) root = -root;  // |p + root| the larger
  const Cx<R> denominator = p + root;
  return denominator == Cx<R>(0) ? d : d - bc / denominator;
}

// h -> Q^H h Q upper triangular (the Schur form), Q accumulated into q where kVectors. Every
// rotation acts on whole rows and columns: the deflated parts keep their exact zeros, and the
// triangle above the active block is the Schur form's. Returns whether it converged.
template <typename R, int N, bool kVectors>
__device__ inline bool schur_form(Cx<R> (&h)[N][N], Cx<R> (&q)[N][N]) {
  // Hessenberg form: column j's entries below the subdiagonal, bottom up.
#pragma unroll
  for (int j = 0; j + 2 < N; ++j) {
#pragma unroll
    for (int i = N - 1; i >= j + 2; --i) {
      const Givens<R> g = givens(h[i - 1][j], h[i][j]);
      rotate_rows(h, i - 1, g);
      rotate_columns(h, i - 1, g);
      if (kVectors) rotate_columns(q, i - 1, g);
      h[i][j] = Cx<R>(0);
    }
  }
  const R eps = cuda::std::numeric_limits<R>::epsilon();
  const R tiny = cuda::std::numeric_limits<R>::min();
  int hi = N - 1, since_deflation = 0;
  for (int iteration = 0; hi > 0; ++iteration) {
    if (iteration == kMaxIterations) return false;
    // The active block [lo, hi]: after the last negligible subdiagonal entry at or above hi.
    int lo = 0;
#pragma unroll
    for (int k = 1; k < N; ++k) {
      if (k <= hi &&
          abs1(h[k][k - 1]) <= fmax(eps * (abs1(h[k - 1][k - 1]) + abs1(h[k][k])), tiny)) {
        h[k][k - 1] = Cx<R>(0);
        lo = k;
      }
    }
    if (lo == hi) {
      --hi;
      since_deflation = 0;
      continue;
    }
    ++since_deflation;
    Cx<R> shift;
#pragma unroll
    for (int k = 1; k < N; ++k) {
      if (k == hi) {
        shift = since_deflation % kExceptionalShift == 0
                    ? h[k][k] + Cx<R>(R(0.75) * fabs(h[k][k - 1].real()))
                    : wilkinson_shift(h[k - 1][k - 1], h[k - 1][k], h[k][k - 1], h[k][k]);
      }
    }
    // One implicit single-shift QR step on the block: the first rotation from its first column
    // of h - shift I, then the bulge chased down the subdiagonal.
#pragma unroll
    for (int k = 0; k + 1 < N; ++k) {
      if (k >= lo && k < hi) {
        const int left = k > 0 ? k - 1 : 0;
        const bool first = k == lo;
        const Givens<R> g = givens(first ? h[k][k] - shift : h[k][left],
                                   first ? h[k + 1][k] : h[k + 1][left]);
        rotate_rows(h, k, g);
        rotate_columns(h, k, g);
        if (kVectors) rotate_columns(q, k, g);
        if (!first) h[k + 1][left] = Cx<R>(0);
      }
    }
  }
  return true;
}

// The unit-norm eigenvector Q x of the Schur form t's k-th eigenvalue, x from back
// substitution with x_k = 1 (?trevc); a divisor below `smallest` is taken as `smallest`, so
// that a repeated eigenvalue gives a vector, not Inf. Largest-magnitude component made real and
// positive, as ?geev.
template <typename R, int N>
__device__ inline void schur_eigenvector(const Cx<R> (&t)[N][N], const Cx<R> (&q)[N][N],
                                                  int k, R smallest, Cx<R> (&v)[N]) {
  Cx<R> x[N];
#pragma unroll
  for (int i = N - 1; i >= 0; --i) {
    if (i == k) x[i] = Cx<R>(1);
    if (i >= k) continue;
    Cx<R> sum(0);
#pragma unroll
    for (int j = i + 1; j < N; ++j) {
      if (j <= k) sum += t[i][j] * x[j];
    }
    Cx<R> divisor = t[i][i] - t[k][k];
    if (abs1(divisor) < smallest) divisor = Cx<R>(smallest);
    x[i] = -sum / divisor;
  }
  R largest = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    v[i] = Cx<R>(0);
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (j <= k) v[i] += q[i][j] * x[j];
    }
    largest = fmax(largest, abs1(v[i]));
  }
  // Scaled to a largest |re| + |im| of one first: x can grow to ~ (N / eps)^(N - 1).
  R norm2 = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    v[i] /= largest;
    norm2 += abs2(v[i]);
  }
  int top = 0;
  R top2 = -1;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (abs2(v[i]) > top2) top = i, top2 = abs2(v[i]);
  }
  Cx<R> phase;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (i == top) phase = cuda::std::conj(v[i]) / (sqrt(top2) * sqrt(norm2));
  }
#pragma unroll
  for (int i = 0; i < N; ++i) {
    v[i] *= phase;
    if (i == top) v[i] = Cx<R>(v[i].real());
  }
}

// One matrix's eigenvalues into w[0, N) and, where kVectors, its right eigenvectors into the
// column-major N x N v (for real T a pair's real and imaginary parts in its two columns); NaN in
// all of them for a matrix holding NaN or Inf or not converged. Returns geev's info.
template <typename T, int N, bool kVectors, typename R = typename real_of<T>::type>
__device__ inline int geev_tiny(const T (&a)[N][N], Cx<R>* w, T* v) {
  Cx<R> h[N][N], q[N][N];
  R largest = 0;
  bool all_finite = true;
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      h[i][j] = Cx<R>(a[i][j]);
      q[i][j] = Cx<R>(i == j ? 1 : 0);
      all_finite = all_finite && isfinite(abs1(h[i][j]));
      largest = fmax(largest, abs1(h[i][j]));
    }
  }
  // Scaled by a power of two (exact) to a largest |re| + |im| in [1/2, 1): no product below
  // overflows or loses all its digits.
  const int exponent = all_finite ? scale_exponent(largest) : 0;
#pragma unroll
  for (int j = 0; j < N; ++j) {
#pragma unroll
    for (int i = 0; i < N; ++i) h[i][j] = Cx<R>(ldexp(h[i][j].real(), -exponent),
                                                  ldexp(h[i][j].imag(), -exponent));
  }
  const bool converged = all_finite && schur_form<R, N, kVectors>(h, q);
  if (!converged) {
    const R nan = cuda::std::numeric_limits<R>::quiet_NaN();
#pragma unroll
    for (int i = 0; i < N; ++i) w[i] = Cx<R>(nan, nan);
    if (kVectors) {
#pragma unroll
      for (int e = 0; e < N * N; ++e) v[e] = T(nan);
    }
    return all_finite ? 1 : 0;
  }
  const R eps = cuda::std::numeric_limits<R>::epsilon();
  R t_largest = 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (j >= i) t_largest = fmax(t_largest, abs1(h[i][j]));
    }
  }
  const R smallest = fmax(eps * t_largest, cuda::std::numeric_limits<R>::min());
  auto unscaled = [&](Cx<R> x) {
    return Cx<R>(ldexp(x.real(), exponent), ldexp(x.imag(), exponent));
  };
  if constexpr (kernel::is_complex_v<T>) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      w[k] = unscaled(h[k][k]);
      if (kVectors) {
        Cx<R> x[N];
        schur_eigenvector(h, q, k, smallest, x);
#pragma unroll
        for (int i = 0; i < N; ++i) v[i + k * N] = x[i];
      }
    }
  } else {
    // Real A: complex arithmetic leaves a real eigenvalue an imaginary part of rounding size and
    // a conjugate pair not quite conjugate. Non-real: an imaginary part beyond `real_bound`. Those
    // are paired greedily, each with the one nearest its conjugate, and a pair stands only where
    // that distance is below both imaginary parts (two real eigenvalues whose imaginary parts
    // passed the bound lie far from each other's conjugate); one left unpaired is real. A pair is
    // given its mean.
    const R real_bound = 4 * N * eps * t_largest;
    bool real[N];
    int partner[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      real[k] = fabs(h[k][k].imag()) <= real_bound;
      partner[k] = -1;
    }
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (real[k] || partner[k] >= 0) continue;
      int best = -1;
      R best_distance = cuda::std::numeric_limits<R>::infinity(), best_imag = 0;
#pragma unroll
      for (int j = k + 1; j < N; ++j) {
        const R distance = abs1(h[k][k] - cuda::std::conj(h[j][j]));
        if (!real[j] && partner[j] < 0 && distance < best_distance) {
          best = j;
          best_distance = distance;
          best_imag = fabs(h[j][j].imag());
        }
      }
      if (best < 0 || best_distance >= fmin(fabs(h[k][k].imag()), best_imag)) {
        real[k] = true;
        continue;
      }
#pragma unroll
      for (int j = k + 1; j < N; ++j) {
        if (j == best) partner[j] = k;
      }
      partner[k] = best;
    }
    // In Schur order, a pair at its first member's place.
    int place = 0;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      if (!real[k] && partner[k] < k) continue;  // a pair's second member
      const Cx<R> mine = h[k][k];
      Cx<R> x[N];
      if (kVectors) schur_eigenvector(h, q, k, smallest, x);
      if (real[k]) {
        w[place] = unscaled(Cx<R>(mine.real()));
        if (kVectors) {
#pragma unroll
          for (int i = 0; i < N; ++i) v[i + place * N] = x[i].real();
        }
        place += 1;
        continue;
      }
      Cx<R> other;
#pragma unroll
      for (int j = 0; j < N; ++j) {
        if (j == partner[k]) other = h[j][j];
      }
      const R re = (mine.real() + other.real()) / 2;
      const R im = (fabs(mine.imag()) + fabs(other.imag())) / 2;
      w[place] = unscaled(Cx<R>(re, im));
      w[place + 1] = unscaled(Cx<R>(re, -im));
      if (kVectors) {
        // The vector of the member above the real axis: the conjugate of the one below's.
        const bool below = mine.imag() < R(0);
#pragma unroll
        for (int i = 0; i < N; ++i) {
          v[i + place * N] = x[i].real();
          v[i + (place + 1) * N] = below ? -x[i].imag() : x[i].imag();
        }
      }
      place += 2;
    }
  }
  return 0;
}

// A thread per matrix, through the stage both ways (kernel_util.cuh tiny_load): the matrix in,
// the eigenvectors out, each coalesced; the eigenvalues straight to w.
template <typename T, int N, bool kVectors, typename R = typename real_of<T>::type>
__global__ void __launch_bounds__(kTinyThreads)
    geev_tiny_kernel(int64_t count, const T* a_all, Cx<R>* w_all, T* vr_all, int* info_all) {
  const TinyThread<T> me = tiny_begin(count, a_all, N * N);
  if (me.active) {
    T a[N][N];
    tiny_get(me, a, T(0));
    info_all[me.item()] = geev_tiny<T, N, kVectors>(a, w_all + me.item() * N, me.mine);
  }
  if (kVectors) tiny_store(vr_all, me.stage, me.block, N * N);
}

}  // namespace

template <typename T, typename C>
cudaError_t geev_tiny_batched(cudaStream_t stream, int64_t count, int64_t n, const T* a, C* w,
                              T* vr, int* info) {
  using D = typename device_type<T>::type;
  using R = typename real_of<D>::type;
  if (count <= 0 || n <= 0) return cudaSuccess;
  if (n > kGeevTinyMaxN) return cudaErrorInvalidValue;
  return with_tiny_n(n, [&](auto order) {
    constexpr int N = decltype(order)::value;
    const D* a_d = reinterpret_cast<const D*>(a);
    Cx<R>* w_d = reinterpret_cast<Cx<R>*>(w);
    const size_t stage = tiny_stage_bytes(N * N, sizeof(D));
    if (vr != nullptr) {
      geev_tiny_kernel<D, N, true><<<tiny_blocks(count), kTinyThreads, stage, stream>>>(
          count, a_d, w_d, reinterpret_cast<D*>(vr), info);
    } else {
      geev_tiny_kernel<D, N, false><<<tiny_blocks(count), kTinyThreads, stage, stream>>>(
          count, a_d, w_d, nullptr, info);
    }
    return cudaGetLastError();
  });
}

template cudaError_t geev_tiny_batched<float, cuComplex>(cudaStream_t, int64_t, int64_t,
                                                         const float*, cuComplex*, float*, int*);
template cudaError_t geev_tiny_batched<double, cuDoubleComplex>(cudaStream_t, int64_t, int64_t,
                                                                const double*, cuDoubleComplex*,
                                                                double*, int*);
template cudaError_t geev_tiny_batched<cuComplex, cuComplex>(cudaStream_t, int64_t, int64_t,
                                                             const cuComplex*, cuComplex*,
                                                             cuComplex*, int*);
template cudaError_t geev_tiny_batched<cuDoubleComplex, cuDoubleComplex>(
    cudaStream_t, int64_t, int64_t, const cuDoubleComplex*, cuDoubleComplex*, cuDoubleComplex*,
    int*);

}  // namespace jcm
