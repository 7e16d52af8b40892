// Device helpers for the matmul handler: the bias + activation epilogue, for the paths where
// cuBLASLt cannot fuse it (the cublasGemmEx fallback, and inner dimension 0).
#pragma once

#include <cuda_runtime_api.h>
#include <library_types.h>

#include <cstdint>

namespace jcm {

// What the epilogue applies after the product; the codes are the FFI attribute's values.
enum class Activation : int32_t { kNone = 0, kRelu = 1, kGelu = 2 };

// out[r, c] = act(out[r, c] + bias[c]) for a row-major rows x cols `out` of `dtype`; `bias`
// (cols elements of the same dtype) may be null. Complex dtypes take no activation. GELU is the
// tanh approximation (as cuBLASLt's epilogue and jax.nn.gelu(approximate=True)).
cudaError_t bias_activation(cudaStream_t stream, cudaDataType dtype, void* out, const void* bias,
                            int64_t rows, int64_t cols, Activation activation);

}  // namespace jcm
