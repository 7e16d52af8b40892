// Device helpers shared by the batched kernels (ldl_kernels.cu, qr_kernels.cu): the device
// type of each solver dtype, warp shuffles for every dtype, and the block shape.
#pragma once

#include <cuComplex.h>
#include <cuda/std/complex>

namespace jcm {
namespace kernel {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// cuComplex / cuDoubleComplex share their layout with cuda::std::complex, which has the
// arithmetic operators the kernels are written with.
template <typename T>
struct device_type {
  using type = T;
};
template <>
struct device_type<cuComplex> {
  using type = cuda::std::complex<float>;
};
template <>
struct device_type<cuDoubleComplex> {
  using type = cuda::std::complex<double>;
};

template <typename T>
struct real_of {
  using type = T;
};
template <typename R>
struct real_of<cuda::std::complex<R>> {
  using type = R;
};

template <typename T>
inline constexpr bool is_complex_v = false;
template <typename R>
inline constexpr bool is_complex_v<cuda::std::complex<R>> = true;

__device__ inline float shfl_down(float v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}
__device__ inline double shfl_down(double v, int offset) {
  return __shfl_down_sync(0xffffffffu, v, offset);
}
template <typename R>
__device__ inline cuda::std::complex<R> shfl_down(cuda::std::complex<R> v, int offset) {
  return {shfl_down(v.real(), offset), shfl_down(v.imag(), offset)};
}

// The sum over a warp, on lane 0 (every lane must call).
template <typename V>
__device__ inline V warp_sum(V v) {
  for (int offset = 16; offset > 0; offset /= 2) v += shfl_down(v, offset);
  return v;
}

__device__ inline float conj_of(float x) { return x; }
__device__ inline double conj_of(double x) { return x; }
template <typename R>
__device__ inline cuda::std::complex<R> conj_of(cuda::std::complex<R> x) {
  return cuda::std::conj(x);
}

// |x|^2, re(x), im(x) for real and complex x.
__device__ inline float abs2(float x) { return x * x; }
__device__ inline double abs2(double x) { return x * x; }
template <typename R>
__device__ inline R abs2(cuda::std::complex<R> x) {
  return x.real() * x.real() + x.imag() * x.imag();
}
__device__ inline float real_part(float x) { return x; }
__device__ inline double real_part(double x) { return x; }
template <typename R>
__device__ inline R real_part(cuda::std::complex<R> x) {
  return x.real();
}
__device__ inline float imag_part(float) { return 0.0f; }
__device__ inline double imag_part(double) { return 0.0; }
template <typename R>
__device__ inline R imag_part(cuda::std::complex<R> x) {
  return x.imag();
}

}  // namespace kernel
}  // namespace jcm
