// Checks and small steps every solver handler shares: attribute parsing, operand shape checks,
// and in-place preparation of results.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "driver.h"
#include "status.h"

// Every solver handler binds XLA's stream, the scratch allocator and the device ordinal first.
#define JCM_SOLVER_CTX                               \
  xla::ffi::Ffi::Bind()                              \
      .Ctx<xla::ffi::PlatformStream<cudaStream_t>>() \
      .Ctx<xla::ffi::ScratchAllocator>()             \
      .Ctx<xla::ffi::DeviceOrdinal>()

namespace jcm {

inline ffi::ErrorOr<Strategy> parse_strategy(int32_t strategy, int32_t lanes, const char* op) {
  if (strategy < 0 || strategy > static_cast<int32_t>(Strategy::kBatched)) {
    return invalid_argument(std::string(op) + ": unknown strategy " +
                                       std::to_string(strategy));
  }
  if (lanes < 1) {
    return invalid_argument(std::string(op) + ": lanes must be >= 1, got " +
                                       std::to_string(lanes));
  }
  return static_cast<Strategy>(strategy);
}

// The leading dims of `dims` without its last `drop`, followed by `tail`.
inline std::vector<int64_t> batch_shape(ffi::AnyBuffer::Dimensions dims, size_t drop,
                                        std::initializer_list<int64_t> tail) {
  std::vector<int64_t> out(dims.begin(), dims.end() - drop);
  out.insert(out.end(), tail);
  return out;
}

inline ffi::Error check_dims(ffi::AnyBuffer::Dimensions dims, const std::vector<int64_t>& expect,
                             const char* op, const char* operand) {
  if (dims.size() == expect.size() && std::equal(dims.begin(), dims.end(), expect.begin())) {
    return ffi::Error::Success();
  }
  return invalid_argument(std::string(op) + ": " + operand +
                                     " has a shape inconsistent with the other operands");
}

// Copies an operand into the result it is solved in place in, unless XLA aliased the two.
inline ffi::Error copy_if_not_aliased(cudaStream_t stream, void* dst, const void* src,
                                      size_t bytes) {
  if (dst == src || bytes == 0) return ffi::Error::Success();
  JCM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  return ffi::Error::Success();
}

}  // namespace jcm
