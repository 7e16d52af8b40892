// Checks and small steps every solver handler shares: attribute parsing, operand shape checks,
// and in-place preparation of results.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "batch_kernels.h"
#include "driver.h"
#include "status.h"

// Every solver handler binds XLA's stream, the scratch allocator and the device ordinal first.
#define JCM_SOLVER_CTX                               \
  xla::ffi::Ffi::Bind()                              \
      .Ctx<xla::ffi::PlatformStream<cudaStream_t>>() \
      .Ctx<xla::ffi::ScratchAllocator>()             \
      .Ctx<xla::ffi::DeviceOrdinal>()

// ... and ends with the strategy attributes every solver handler takes last (call_config).
#define JCM_STRATEGY_ATTRS .Attr<int32_t>("strategy").Attr<int32_t>("lanes")

namespace jcm {

inline ffi::ErrorOr<Strategy> parse_strategy(int32_t strategy, int32_t lanes, const char* op) {
  if (strategy < 0 || strategy > static_cast<int32_t>(Strategy::kBlocked)) {
    return invalid_argument(std::string(op) + ": unknown strategy " +
                                       std::to_string(strategy));
  }
  if (lanes < 1) {
    return invalid_argument(std::string(op) + ": lanes must be >= 1, got " +
                                       std::to_string(lanes));
  }
  return static_cast<Strategy>(strategy);
}

// The call's configuration from its attributes: XLA's stream and device, a checked strategy.
inline ffi::ErrorOr<CallConfig> call_config(cudaStream_t stream, int32_t device,
                                            int32_t strategy, int32_t lanes, const char* op) {
  JCM_ASSIGN_OR_RETURN(Strategy s, parse_strategy(strategy, lanes, op));
  return CallConfig{stream, device, s, lanes};
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

// `info` holds one int per matrix of the (batch..., rows, cols) operand `matrices`.
inline ffi::Error check_info(ffi::AnyBuffer::Dimensions info, ffi::AnyBuffer::Dimensions matrices,
                             const char* op) {
  return check_dims(info, batch_shape(matrices, 2, {}), op, "info");
}

// ptrs[i] = base + i * stride (in elements), for i < count: the pointer arrays batched APIs take.
template <typename T>
ffi::Error fill_pointers(cudaStream_t stream, T** ptrs, T* base, int64_t stride, int64_t count) {
  JCM_CUDA(fill_pointer_array(stream, reinterpret_cast<void**>(ptrs), base, stride * sizeof(T),
                              count));
  return ffi::Error::Success();
}

// Copies an operand into the result it is solved in place in, unless XLA aliased the two.
inline ffi::Error copy_if_not_aliased(cudaStream_t stream, void* dst, const void* src,
                                      size_t bytes) {
  if (dst == src || bytes == 0) return ffi::Error::Success();
  JCM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  return ffi::Error::Success();
}

}  // namespace jcm
