// The Python extension: the registration table of FFI targets, plus a few host-side utilities.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <string>
#include <utility>

#include "core/driver.h"
#include "core/handlers.h"
#include "core/lane_pool.h"
#include "core/status.h"
#include "core/timer.h"

namespace nb = nanobind;

namespace {

template <typename Fn>
nb::capsule encapsulate(Fn* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn));
}

nb::dict library_versions() {
  nb::dict out;
  int v = 0;
  if (cusolverGetVersion(&v) == CUSOLVER_STATUS_SUCCESS) out["cusolver"] = v;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess) out["cudart"] = v;
  if (cudaDriverGetVersion(&v) == cudaSuccess) out["driver"] = v;
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS) {
    out["cublas"] = major * 10000 + minor * 100 + patch;
  }
  out["cublaslt"] = static_cast<int64_t>(cublasLtGetVersion());
  return out;
}

nb::dict resource_counts(int device) {
  const jcm::LanePool::Counts lanes = jcm::LanePool::CountsFor(device);
  nb::dict out;
  out["lanes"] = lanes.lanes;
  out["leased_lanes"] = lanes.leased;
  out["workspace_cache_entries"] = jcm::WorkspaceCache::entries(device);
  out["host_workspace_bytes"] = lanes.host_workspace_bytes;
  out["matmul_plans"] = jcm::matmul_plan_count(device);
  out["matmul_handles"] = jcm::matmul_handle_count(device);
  out["timer_events"] = jcm::timer_event_count(device);
  out["shut_down"] = lanes.shut_down;
  return out;
}

}  // namespace

NB_MODULE(_jcm_ffi, m) {
  m.def("registrations", []() {
    nb::dict targets;
#define JCM_REGISTER(name) targets[#name] = encapsulate(name);
    JCM_HANDLERS(JCM_REGISTER)
#undef JCM_REGISTER
    return targets;
  });
  // Without the GIL: calls still in flight on other threads may need it to finish and return
  // their lanes, which shutdown waits for.
  m.def(
      "shutdown", [] { jcm::LanePool::ShutdownAll(); }, nb::call_guard<nb::gil_scoped_release>(),
        "Closes the lane pools, waits a bounded time for calls in flight, and destroys the idle "
        "lanes' workers, streams and handles.");
  m.def("lane_count",
        [](int device) -> int { return jcm::LanePool::CountsFor(device).lanes; });
  m.def("resource_counts", &resource_counts, nb::arg("device"));
  m.def(
      "inject_failure",
      [](std::string name, int count) { jcm::inject_failure(std::move(name), count); },
      nb::arg("name"), nb::arg("count"));
  m.def("timer_elapsed_ms", &jcm::timer_elapsed_ms);
  m.def("library_versions", &library_versions);
  m.attr("max_lanes") = jcm::kMaxLanesPerDevice;
}
