#include <cuComplex.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "core/kernel_util.cuh"
#include "matmul/matmul_kernels.h"

namespace jcm {

namespace {

// Real types compute in float (half, bfloat16, float) or double; the result is rounded once.
template <typename T>
struct compute_type {
  using type = float;
};
template <>
struct compute_type<double> {
  using type = double;
};

template <typename Acc>
__device__ Acc activate(Acc v, Activation activation) {
  switch (activation) {
    case Activation::kRelu:
      return v > Acc(0) || v != v ? v : Acc(0);  // NaN propagates, as jax.nn.relu
    case Activation::kGelu: {
      const Acc k = Acc(0.7978845608028654);  // sqrt(2 / pi)
      return Acc(0.5) * v * (Acc(1) + tanh(k * (v + Acc(0.044715) * v * v * v)));
    }
    default:
      return v;
  }
}

template <typename T>
__global__ void real_epilogue_kernel(T* out, const T* bias, int64_t rows, int64_t cols,
                                     Activation activation) {
  using Acc = typename compute_type<T>::type;
  kernel::grid_stride(rows * cols, [&](int64_t i) {
    Acc v = static_cast<Acc>(out[i]);
    if (bias != nullptr) v += static_cast<Acc>(bias[i % cols]);
    out[i] = static_cast<T>(activate(v, activation));
  });
}

// Complex results only take a bias (activations are real functions).
template <typename T>
__global__ void complex_bias_kernel(T* out, const T* bias, int64_t rows, int64_t cols) {
  kernel::grid_stride(rows * cols, [&](int64_t i) {
    out[i].x += bias[i % cols].x;
    out[i].y += bias[i % cols].y;
  });
}

template <typename Kernel, typename... Args>
cudaError_t launch(cudaStream_t stream, int64_t total, Kernel kernel, Args... args) {
  constexpr int kThreads = 256;
  kernel<<<kernel::grid_stride_blocks(total, kThreads, 4096), kThreads, 0, stream>>>(args...);
  return cudaGetLastError();
}

}  // namespace

cudaError_t bias_activation(cudaStream_t stream, cudaDataType dtype, void* out, const void* bias,
                            int64_t rows, int64_t cols, Activation activation) {
  const int64_t total = rows * cols;
  if (total <= 0) return cudaSuccess;
  switch (dtype) {
#define JCM_REAL(CODE, T)                                                                    \
  case CODE:                                                                                 \
    return launch(stream, total, real_epilogue_kernel<T>, static_cast<T*>(out),              \
                  static_cast<const T*>(bias), rows, cols, activation);
    JCM_REAL(CUDA_R_16F, __half)
    JCM_REAL(CUDA_R_16BF, __nv_bfloat16)
    JCM_REAL(CUDA_R_32F, float)
    JCM_REAL(CUDA_R_64F, double)
#undef JCM_REAL
#define JCM_COMPLEX(CODE, T)                                                                 \
  case CODE:                                                                                 \
    if (activation != Activation::kNone) return cudaErrorInvalidValue;                       \
    if (bias == nullptr) return cudaSuccess;                                                 \
    return launch(stream, total, complex_bias_kernel<T>, static_cast<T*>(out),               \
                  static_cast<const T*>(bias), rows, cols);
    JCM_COMPLEX(CUDA_C_32F, cuComplex)
    JCM_COMPLEX(CUDA_C_64F, cuDoubleComplex)
#undef JCM_COMPLEX
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace jcm
