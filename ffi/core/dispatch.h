// The one dtype switch. Handlers call dispatch_solver_dtype(dtype, "op", [&](auto tag) {...})
// and use `typename decltype(tag)::type` as the element type.
#pragma once

#include <cuComplex.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace jcm {

template <typename T>
struct type_tag {
  using type = T;
};

inline std::string dtype_name(ffi::DataType dtype) {
  switch (dtype) {
    case ffi::DataType::F16: return "float16";
    case ffi::DataType::BF16: return "bfloat16";
    case ffi::DataType::F32: return "float32";
    case ffi::DataType::F64: return "float64";
    case ffi::DataType::C64: return "complex64";
    case ffi::DataType::C128: return "complex128";
    case ffi::DataType::S32: return "int32";
    case ffi::DataType::S64: return "int64";
    default: return "dtype#" + std::to_string(static_cast<int>(dtype));
  }
}

template <typename Fn>
ffi::Error dispatch_solver_dtype(ffi::DataType dtype, const char* op, Fn&& fn) {
  switch (dtype) {
    case ffi::DataType::F32: return fn(type_tag<float>{});
    case ffi::DataType::F64: return fn(type_tag<double>{});
    case ffi::DataType::C64: return fn(type_tag<cuComplex>{});
    case ffi::DataType::C128: return fn(type_tag<cuDoubleComplex>{});
    default:
      return invalid_argument(std::string("unsupported dtype ") + dtype_name(dtype) +
                                         " in " + op);
  }
}

// Splits (..., rows, cols) into (batch, rows, cols), refusing sizes cuSOLVER's int API can't take.
struct MatrixBatch {
  int64_t batch, rows, cols;
};

inline ffi::ErrorOr<MatrixBatch> split_matrix_batch(ffi::AnyBuffer::Dimensions dims,
                                                    const char* op, const char* operand) {
  if (dims.size() < 2) {
    return invalid_argument(std::string(op) + ": " + operand +
                                       " must have rank >= 2, got rank " +
                                       std::to_string(dims.size()));
  }
  MatrixBatch mb{1, dims[dims.size() - 2], dims[dims.size() - 1]};
  for (size_t i = 0; i + 2 < dims.size(); ++i) mb.batch *= dims[i];
  constexpr int64_t kIntMax = INT32_MAX;
  if (mb.rows > kIntMax || mb.cols > kIntMax || mb.batch > kIntMax) {
    return invalid_argument(std::string(op) + ": " + operand +
                                       " is too large for the 32-bit cuSOLVER API");
  }
  return mb;
}

}  // namespace jcm
