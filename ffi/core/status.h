// One error vocabulary: every CUDA / cuSOLVER / cuBLAS status becomes an ffi::Error that names the
// routine and where it was called. Handlers never throw, abort or exit.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <atomic>
#include <string>
#include <string_view>

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

// Failure injection for tests (inject_failure in module.cc): while armed, the next checks whose
// routine name contains the armed substring report a failure of their library. Unarmed, a check
// costs one relaxed atomic load more.
extern std::atomic<bool> g_failure_injection_armed;
// Arms `count` injected failures for routine names containing `name` (count 0 disarms).
void inject_failure(std::string name, int count);
// True (and one armed failure used up) if the check of `what` is to fail.
bool take_injected_failure(std::string_view what);

inline bool injected_failure(std::string_view what) {
  return g_failure_injection_armed.load(std::memory_order_relaxed) && take_injected_failure(what);
}

// The error of a failed check: "<what> failed: <status>[ (injected)] (file:line)". Out of line:
// only failures build strings.
ffi::Error check_failure(std::string_view what, std::string_view status, bool injected,
                         const char* file, int line);

inline ffi::Error check_cuda(cudaError_t status, std::string_view what, const char* file,
                             int line) {
  const bool injected = injected_failure(what);
  if (injected) status = cudaErrorUnknown;
  if (status == cudaSuccess) return ffi::Error::Success();
  return check_failure(what,
                       std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status),
                       injected, file, line);
}

inline ffi::Error check_cusolver(cusolverStatus_t status, std::string_view what,
                                 const char* file, int line) {
  const bool injected = injected_failure(what);
  if (injected) status = CUSOLVER_STATUS_INTERNAL_ERROR;
  if (status == CUSOLVER_STATUS_SUCCESS) return ffi::Error::Success();
  return check_failure(what, cusolver_status_name(status), injected, file, line);
}

inline ffi::Error check_cublas(cublasStatus_t status, std::string_view what, const char* file,
                               int line) {
  const bool injected = injected_failure(what);
  if (injected) status = CUBLAS_STATUS_INTERNAL_ERROR;
  if (status == CUBLAS_STATUS_SUCCESS) return ffi::Error::Success();
  return check_failure(what, cublas_status_name(status), injected, file, line);
}

// The error for an exception that reached a boundary it must not cross (an FFI handler into XLA,
// a lane task into its worker thread); call only inside a catch block. kResourceExhausted for
// std::bad_alloc, kInternal otherwise; the message names `op`.
ffi::Error current_exception_error(const char* op) noexcept;

// body(), with any exception it throws returned as current_exception_error(op).
template <typename Body>
ffi::Error catch_exceptions(const char* op, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    return current_exception_error(op);
  }
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
