// LanePool: per-device, process-wide pool of lanes. A lane is what one batch item needs to run
// concurrently with the others: a non-blocking stream, cuSOLVER/cuBLAS handles bound to it,
// cuSOLVER params, events, a growable host workspace and a persistent worker thread. The thread
// matters because most cuSOLVER routines block the calling host thread until they finish
// (measured on the H100): streams issued from one thread overlap almost nothing.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/limits.h"
#include "core/status.h"

namespace jcm {

// Most lanes a device pool may grow to (limits::kMaxLanesPerDevice); what one call uses is its
// `lanes` attribute.
using limits::kMaxLanesPerDevice;

// Selects `device` on the calling thread for the object's lifetime, then restores the previous
// one: XLA's launch thread relies on its current device.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device);
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;
  // Whether `device` could be selected.
  ffi::Error status() const;

 private:
  int previous_ = -1;
  bool changed_ = false;
  cudaError_t status_ = cudaSuccess;
  const char* failed_call_ = "";
};

class Lane {
 public:
  static ffi::ErrorOr<std::unique_ptr<Lane>> Create(int device);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudaEvent_t fork_event() const { return fork_; }
  cudaEvent_t join_event() const { return join_; }
  cusolverDnHandle_t solver() const { return solver_; }
  cusolverDnParams_t params() const { return params_; }
  cublasHandle_t blas() const { return blas_; }

  // Host workspace for routines that want one (Xsyevd, Xgeev, ...): grows as calls need it, and
  // is released when the lane is returned after a run of small calls (return_to_pool). May throw
  // std::bad_alloc: lane tasks and handlers turn it into an error.
  void* host_workspace(size_t bytes);
  size_t host_workspace_bytes() const { return host_bytes_.load(std::memory_order_relaxed); }

  // Rebinds both handles to `stream` (XLA's, for the inline path) or back to the lane's own.
  ffi::Error bind(cudaStream_t stream);

  // Whether the worker thread selected the lane's device: checked by each task, on that thread.
  ffi::Error worker_status() const;

  // Runs `task` on this lane's worker thread. A task reports its own errors; one that throws is
  // dropped (the thread survives) so tasks must catch what they need to report.
  void post(std::function<void()> task);

 private:
  friend class LanePool;
  explicit Lane(int device) : device_(device) {}
  void worker_loop();
  // On the way back to the pool: handles back on the lane's own stream and the host workspace
  // policy applied. False if the handles could not be rebound (the pool then drops the lane).
  bool return_to_pool();

  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t join_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  cusolverDnParams_t params_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  // False from the start of a bind to any other stream until a bind back to stream_ succeeds.
  bool on_own_stream_ = false;

  std::unique_ptr<std::byte[]> host_workspace_;
  std::atomic<size_t> host_bytes_{0};  // read by resource counts while the lane runs
  size_t host_peak_ = 0;               // most asked for in the current window of leases
  int leases_in_window_ = 0;

  cudaError_t worker_device_status_ = cudaSuccess;  // written and read on the worker thread
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> task_;
  bool stop_ = false;
  std::thread worker_;
};

class LanePool;

// Exclusive use of some lanes for the duration of one call; returns them on destruction.
class LaneLease {
 public:
  LaneLease(LanePool* pool, std::vector<Lane*> lanes) : pool_(pool), lanes_(std::move(lanes)) {}
  LaneLease(LaneLease&& other) noexcept : pool_(other.pool_), lanes_(std::move(other.lanes_)) {
    other.lanes_.clear();
  }
  LaneLease(const LaneLease&) = delete;
  ~LaneLease();

  int size() const { return static_cast<int>(lanes_.size()); }
  Lane& operator[](int i) const { return *lanes_[i]; }

 private:
  LanePool* pool_;
  std::vector<Lane*> lanes_;
};

class LanePool {
 public:
  // The pool of `device`, created on first use and reused by every later call. Pools are never
  // freed: a call still in flight at shutdown keeps pointing at its pool.
  static ffi::ErrorOr<LanePool*> ForDevice(int device);

  // Closes every pool (later calls fail with an error saying so), waits a bounded time for
  // leased lanes to come back, and destroys the idle ones. A lane still leased after the wait is
  // left alone (leaked), never freed under a running call. Safe to call again (it then destroys
  // lanes that came back since); never blocks past the wait.
  static void ShutdownAll() noexcept;

  struct Counts {
    int lanes = 0;
    int leased = 0;
    size_t host_workspace_bytes = 0;
    bool shut_down = false;
  };
  // What the pool of `device` holds now (zeros if it has none); creates nothing.
  static Counts CountsFor(int device);

  // Leases between 1 and `want` lanes. Grows the pool up to kMaxLanesPerDevice; when every lane
  // is leased by concurrent calls (or creating another fails), waits for at least one to come
  // back. Fails if the pool has no lane and cannot create one, or is shut down.
  ffi::ErrorOr<LaneLease> Acquire(int want);

 private:
  friend class LaneLease;
  explicit LanePool(int device);
  void Release(const std::vector<Lane*>& lanes) noexcept;
  // Closes the pool, waits until `deadline` for leased lanes, and hands over the idle ones.
  std::vector<std::unique_ptr<Lane>> Close(std::chrono::steady_clock::time_point deadline);

  int device_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Both reserved to kMaxLanesPerDevice: adding a lane never reallocates (never throws midway).
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<Lane*> idle_;
  bool closed_ = false;
};

// The error of a call after shutdown.
ffi::Error lanes_shut_down_error();

}  // namespace jcm
