#include "core/status.h"

#include <exception>
#include <mutex>
#include <new>

#include "core/per_process.h"

namespace jcm {

const char* cusolver_status_name(cusolverStatus_t status) {
  switch (status) {
#define JCM_CASE(s) \
  case s:           \
    return #s;
    JCM_CASE(CUSOLVER_STATUS_SUCCESS)
    JCM_CASE(CUSOLVER_STATUS_NOT_INITIALIZED)
    JCM_CASE(CUSOLVER_STATUS_ALLOC_FAILED)
    JCM_CASE(CUSOLVER_STATUS_INVALID_VALUE)
    JCM_CASE(CUSOLVER_STATUS_ARCH_MISMATCH)
    JCM_CASE(CUSOLVER_STATUS_MAPPING_ERROR)
    JCM_CASE(CUSOLVER_STATUS_EXECUTION_FAILED)
    JCM_CASE(CUSOLVER_STATUS_INTERNAL_ERROR)
    JCM_CASE(CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED)
    JCM_CASE(CUSOLVER_STATUS_NOT_SUPPORTED)
    JCM_CASE(CUSOLVER_STATUS_ZERO_PIVOT)
    JCM_CASE(CUSOLVER_STATUS_INVALID_LICENSE)
    JCM_CASE(CUSOLVER_STATUS_IRS_PARAMS_NOT_INITIALIZED)
    JCM_CASE(CUSOLVER_STATUS_IRS_PARAMS_INVALID)
    JCM_CASE(CUSOLVER_STATUS_IRS_INTERNAL_ERROR)
    JCM_CASE(CUSOLVER_STATUS_IRS_NOT_SUPPORTED)
    JCM_CASE(CUSOLVER_STATUS_IRS_OUT_OF_RANGE)
    JCM_CASE(CUSOLVER_STATUS_INVALID_WORKSPACE)
#undef JCM_CASE
    default:
      return "CUSOLVER_STATUS_<unknown>";
  }
}

const char* cublas_status_name(cublasStatus_t status) {
  return cublasGetStatusName(status);
}

ffi::Error check_failure(std::string_view what, std::string_view status, bool injected,
                         const char* file, int line) {
  std::string message(what);
  message += " failed: ";
  message += status;
  if (injected) message += " (injected)";
  message += where(file, line);
  return ffi::Error::Internal(std::move(message));
}

ffi::Error current_exception_error(const char* op) noexcept {
  try {
    try {
      throw;
    } catch (const std::bad_alloc& e) {
      return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                        std::string(op) + ": out of host memory (" + e.what() + ")");
    } catch (const std::exception& e) {
      return ffi::Error::Internal(std::string(op) + ": unexpected exception: " + e.what());
    } catch (...) {
      return ffi::Error::Internal(std::string(op) + ": unexpected exception of unknown type");
    }
  } catch (...) {
    // Building the message failed (out of memory): a message short enough to need no allocation.
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "out of memory");
  }
}

std::atomic<bool> g_failure_injection_armed{false};

namespace {

// Per process (per_process.h): a forked child starts disarmed, never waiting on a lock its
// parent's threads held.
struct InjectedFailures {
  InjectedFailures() { g_failure_injection_armed.store(false, std::memory_order_relaxed); }
  std::mutex mu;
  std::string name;
  int remaining = 0;
};

InjectedFailures& injected_failures() { return per_process<InjectedFailures>(); }

}  // namespace

void inject_failure(std::string name, int count) {
  InjectedFailures& f = injected_failures();
  std::lock_guard<std::mutex> lock(f.mu);
  f.name = std::move(name);
  f.remaining = count > 0 ? count : 0;
  g_failure_injection_armed.store(f.remaining > 0, std::memory_order_relaxed);
}

bool take_injected_failure(std::string_view what) {
  InjectedFailures& f = injected_failures();
  std::lock_guard<std::mutex> lock(f.mu);
  if (f.remaining <= 0 || what.find(f.name) == std::string_view::npos) return false;
  if (--f.remaining == 0) g_failure_injection_armed.store(false, std::memory_order_relaxed);
  return true;
}

}  // namespace jcm
