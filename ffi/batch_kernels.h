// Device helpers for the batched strategies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace jcm {

// ptrs[i] = base + i * stride_bytes, for i < count; the pointer arrays cuBLAS batched APIs take.
cudaError_t fill_pointer_array(cudaStream_t stream, void** ptrs, void* base, int64_t stride_bytes,
                               int64_t count);

}  // namespace jcm
