// Checks and small steps every solver handler shares: attribute parsing, operand shape checks,
// and in-place preparation of results.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/batch_kernels.h"
#include "core/dispatch.h"
#include "core/driver.h"
#include "core/status.h"

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

// A square matrix batch, checked: the eigendecompositions' operand.
inline ffi::ErrorOr<MatrixBatch> square_batch(ffi::AnyBuffer a, const char* op) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), op, "a"));
  if (mb.rows != mb.cols) return invalid_argument(std::string(op) + ": a must be square");
  return mb;
}

// The one-launch small-matrix kernels' operand checks (getrf_small, getrs_small, potrf_small,
// potrs_small). The factored matrices: square, n <= max_n.
inline ffi::ErrorOr<MatrixBatch> small_square_batch(ffi::AnyBuffer a, int64_t max_n,
                                                    const char* op, const char* operand) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), op, operand));
  if (mb.rows != mb.cols || mb.rows > max_n) {
    return invalid_argument(std::string(op) + ": " + operand + " must be square with n <= " +
                            std::to_string(max_n) + ", got " + std::to_string(mb.rows) + " x " +
                            std::to_string(mb.cols));
  }
  return mb;
}

// ... a factorization's result: a's shape and dtype, not a itself (the kernels read a whole
// matrix into shared memory while other blocks write theirs).
inline ffi::Error check_small_result(ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer>& out,
                                     const char* op, const char* result) {
  if (out->element_type() != a.element_type()) {
    return invalid_argument(std::string(op) + ": " + result + " must have the dtype of a");
  }
  if (out->untyped_data() == a.untyped_data() && a.size_bytes() > 0) {
    return invalid_argument(std::string(op) + ": " + result + " must not alias a");
  }
  return check_dims(out->dimensions(), batch_shape(a.dimensions(), 0, {}), op, result);
}

// ... a solve's right-hand sides: b and x (n, nrhs) per factor, nrhs <= max_rhs, of the
// factor's dtype; returns b's batch split.
inline ffi::ErrorOr<MatrixBatch> small_rhs_batch(ffi::AnyBuffer factor, MatrixBatch mf,
                                                 ffi::AnyBuffer b,
                                                 ffi::Result<ffi::AnyBuffer>& x,
                                                 int64_t max_rhs, const char* op) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(b.dimensions(), op, "b"));
  if (mb.batch != mf.batch || mb.rows != mf.rows || mb.cols > max_rhs) {
    return invalid_argument(std::string(op) + ": b must have shape batch + (n, nrhs) with " +
                            "nrhs <= " + std::to_string(max_rhs));
  }
  if (b.element_type() != factor.element_type() || x->element_type() != factor.element_type()) {
    return invalid_argument(std::string(op) + ": the factor, b and x must have the same dtype");
  }
  JCM_RETURN_IF_ERROR(check_dims(x->dimensions(), batch_shape(b.dimensions(), 0, {}), op, "x"));
  return mb;
}

// Copies an operand into the result it is solved in place in, unless XLA aliased the two.
inline ffi::Error copy_if_not_aliased(cudaStream_t stream, void* dst, const void* src,
                                      size_t bytes) {
  if (dst == src || bytes == 0) return ffi::Error::Success();
  JCM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  return ffi::Error::Success();
}

}  // namespace jcm
