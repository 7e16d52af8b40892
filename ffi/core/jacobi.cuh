// The plane rotations of the Jacobi kernels (eigh_kernels.cu: two-sided, on a Hermitian matrix;
// svd_kernels.cu: one-sided, on the columns of a general one) and their round-robin order.
#pragma once

#include "core/kernel_util.cuh"

namespace jcm {
namespace kernel {

// The rotation's reciprocal square roots: in float the hardware's approximation (about 2 ulp:
// the rotation stays orthogonal to working precision, which is all Jacobi needs, and the round's
// critical path is a chain of them); in double the correctly rounded one.
__device__ inline float rsqrt_of(float x) { return rsqrtf(x); }
__device__ inline double rsqrt_of(double x) { return rsqrt(x); }

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
// tau = d / 2|g|, d = A(q,q) - A(p,p); the diagonal becomes A(p,p) - t|g|, A(q,q) + t|g|. With
// r = 1 / sqrt(d^2 + 4|g|^2): cos 2 theta = |d| r, so c^2 = (1 + |d| r) / 2 (>= 1/2: no
// cancellation), s = sin 2 theta / 2c = |g| r / c, t = s / c, each sign(d): two reciprocal square
// roots and no division (float64's is a long software sequence, like its sqrt). An entry below
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
  const R d = aqq - app, r = rsqrt_of(d * d + 4 * size * size);
  const R c2 = R(0.5) + R(0.5) * (fabs(d) * r);
  const R rc = rsqrt_of(c2);  // 1 / c
  const R c = c2 * rc, s_size = size * r * rc, s = d < R(0) ? -s_size : s_size;
  return {c, s, size * s * rc, s * e, c * e};
}

// The exponent of the power of two that scales a matrix whose largest |entry| (or a bound of
// it) is `largest` below 1, exactly: x * 2^-exponent. 0 for a zero matrix.
template <typename R>
__device__ inline int scale_exponent(R largest) {
  int exponent = 0;
  if (largest > R(0)) frexp(largest, &exponent);
  return exponent;
}

// The index at position `pos` of round `round` in the round-robin (circle) order of m indices:
// position 0 stays, the others turn, so that over m - 1 rounds every two indices meet once.
__device__ inline int circle_index(int pos, int round, int m) {
  const int turned = pos - 1 + round;  // < 2 (m - 1)
  return pos == 0 ? 0 : 1 + (turned >= m - 1 ? turned - (m - 1) : turned);
}

}  // namespace kernel
}  // namespace jcm
