#include "core/batch_kernels.h"

#include "core/kernel_util.cuh"

#include <algorithm>

namespace jcm {

namespace {

__global__ void fill_pointer_array_kernel(void** ptrs, char* base, int64_t stride_bytes,
                                          int64_t count) {
  kernel::grid_stride(count, [&](int64_t i) { ptrs[i] = base + i * stride_bytes; });
}

__global__ void merge_block_info_kernel(int* info, const int* block_info, int offset,
                                        int64_t count) {
  kernel::grid_stride(count, [&](int64_t i) {
    if (info[i] == 0 && block_info[i] > 0) info[i] = block_info[i] + offset;
  });
}

constexpr int kThreads = 256;

unsigned blocks_for(int64_t count) { return kernel::grid_stride_blocks(count, kThreads, 1024); }

}  // namespace

cudaError_t merge_block_info(cudaStream_t stream, int* info, const int* block_info, int offset,
                             int64_t count) {
  if (count <= 0) return cudaSuccess;
  merge_block_info_kernel<<<blocks_for(count), kThreads, 0, stream>>>(info, block_info, offset,
                                                                       count);
  return cudaGetLastError();
}

cudaError_t fill_pointer_array(cudaStream_t stream, void** ptrs, void* base, int64_t stride_bytes,
                               int64_t count) {
  if (count <= 0) return cudaSuccess;
  fill_pointer_array_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      ptrs, static_cast<char*>(base), stride_bytes, count);
  return cudaGetLastError();
}

}  // namespace jcm
