#include "batch_kernels.h"

namespace jcm {

namespace {

__global__ void fill_pointer_array_kernel(void** ptrs, char* base, int64_t stride_bytes,
                                          int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    ptrs[i] = base + i * stride_bytes;
  }
}

}  // namespace

cudaError_t fill_pointer_array(cudaStream_t stream, void** ptrs, void* base, int64_t stride_bytes,
                               int64_t count) {
  if (count <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  int blocks = static_cast<int>(std::min<int64_t>((count + kThreads - 1) / kThreads, 1024));
  fill_pointer_array_kernel<<<blocks, kThreads, 0, stream>>>(ptrs, static_cast<char*>(base),
                                                              stride_bytes, count);
  return cudaGetLastError();
}

}  // namespace jcm
