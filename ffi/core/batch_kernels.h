// Device helpers for the batched strategies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace jcm {

// ptrs[i] = base + i * stride_bytes, for i < count; the pointer arrays cuBLAS batched APIs take.
cudaError_t fill_pointer_array(cudaStream_t stream, void** ptrs, void* base, int64_t stride_bytes,
                               int64_t count);

// info[i] = block_info[i] + offset where info[i] == 0 and block_info[i] > 0, for i < count: a
// blocked factorization's per-block failures (1-based within the block) as LAPACK's info (the
// first failing column of the whole matrix; later blocks do not overwrite it).
cudaError_t merge_block_info(cudaStream_t stream, int* info, const int* block_info, int offset,
                             int64_t count);

}  // namespace jcm
