// One error vocabulary: every CUDA / cuSOLVER / cuBLAS status becomes an ffi::Error that names the
// routine and where it was called. Handlers never throw, abort or exit.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <string>

#include "xla/ffi/api/ffi.h"

namespace jcm {

namespace ffi = xla::ffi;

const char* cusolver_status_name(cusolverStatus_t status);
const char* cublas_status_name(cublasStatus_t status);

// What the error macros return: converts to ffi::Error and to any ffi::ErrorOr<T>, so one macro
// serves handlers and helpers alike.
struct ErrorReturn {
  ffi::Error error;
  operator ffi::Error() && { return std::move(error); }  // NOLINT
  template <typename T>
  operator ffi::ErrorOr<T>() && {  // NOLINT
    return ffi::Unexpected<ffi::Error>(std::move(error));
  }
};

inline ErrorReturn invalid_argument(std::string message) {
  return {ffi::Error::InvalidArgument(std::move(message))};
}

inline std::string where(const char* file, int line) {
  return std::string(" (") + file + ":" + std::to_string(line) + ")";
}

inline ffi::Error check_cuda(cudaError_t status, const std::string& what, const char* file,
                             int line) {
  if (status == cudaSuccess) return ffi::Error::Success();
  return ffi::Error::Internal(what + " failed: " + cudaGetErrorName(status) + ": " +
                              cudaGetErrorString(status) + where(file, line));
}

inline ffi::Error check_cusolver(cusolverStatus_t status, const std::string& what,
                                 const char* file, int line) {
  if (status == CUSOLVER_STATUS_SUCCESS) return ffi::Error::Success();
  return ffi::Error::Internal(what + " failed: " + cusolver_status_name(status) +
                              where(file, line));
}

inline ffi::Error check_cublas(cublasStatus_t status, const std::string& what, const char* file,
                               int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return ffi::Error::Success();
  return ffi::Error::Internal(what + " failed: " + cublas_status_name(status) +
                              where(file, line));
}

}  // namespace jcm

#define JCM_RETURN_IF_ERROR(expr)             \
  do {                                        \
    ::xla::ffi::Error jcm_err_ = (expr);      \
    if (jcm_err_.failure()) return ::jcm::ErrorReturn{std::move(jcm_err_)}; \
  } while (0)

#define JCM_CONCAT_INNER_(a, b) a##b
#define JCM_CONCAT_(a, b) JCM_CONCAT_INNER_(a, b)

// JCM_ASSIGN_OR_RETURN(auto x, expr_returning_ErrorOr);
#define JCM_ASSIGN_OR_RETURN(lhs, expr) \
  JCM_ASSIGN_OR_RETURN_IMPL_(JCM_CONCAT_(jcm_or_, __LINE__), lhs, expr)
#define JCM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (tmp.has_error()) return ::jcm::ErrorReturn{std::move(tmp.error())}; \
  lhs = std::move(tmp.value())

// The routine name is the library's own (e.g. "cusolverDnSgetrf"), so errors say what failed.
#define JCM_CUDA(expr) \
  JCM_RETURN_IF_ERROR(::jcm::check_cuda((expr), #expr, __FILE__, __LINE__))
#define JCM_CUSOLVER(name, expr) \
  JCM_RETURN_IF_ERROR(::jcm::check_cusolver((expr), (name), __FILE__, __LINE__))
#define JCM_CUBLAS(name, expr) \
  JCM_RETURN_IF_ERROR(::jcm::check_cublas((expr), (name), __FILE__, __LINE__))
