// LanePool: per-device, process-wide pool of lanes. A lane is what one batch item needs to run
// concurrently with the others: a non-blocking stream, cuSOLVER/cuBLAS handles bound to it,
// cuSOLVER params, events, a growable host workspace and a persistent worker thread. The thread
// matters because most cuSOLVER routines block the calling host thread until they finish
// (measured on the H100): streams issued from one thread overlap almost nothing.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cusolverDn.h>

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

class Lane {
 public:
  static ffi::ErrorOr<std::unique_ptr<Lane>> Create(int device);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  cudaStream_t stream() const { return stream_; }
  cudaEvent_t fork_event() const { return fork_; }
  cudaEvent_t join_event() const { return join_; }
  cusolverDnHandle_t solver() const { return solver_; }
  cusolverDnParams_t params() const { return params_; }
  cublasHandle_t blas() const { return blas_; }

  // Host workspace for routines that want one (Xsyevd, Xgeev, ...); grows, never shrinks.
  void* host_workspace(size_t bytes);

  // Rebinds both handles to `stream` (XLA's, for the inline path) or back to the lane's own.
  ffi::Error bind(cudaStream_t stream);

  // Runs `task` on this lane's worker thread. `done` is called on that thread afterwards.
  void post(std::function<void()> task);

 private:
  explicit Lane(int device) : device_(device) {}
  void worker_loop();

  int device_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t join_ = nullptr;
  cusolverDnHandle_t solver_ = nullptr;
  cusolverDnParams_t params_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::vector<std::byte> host_workspace_;

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
  // The pool of `device`, created on first use and reused by every later call.
  static ffi::ErrorOr<LanePool*> ForDevice(int device);
  // Joins every worker and destroys every handle; safe to call twice (Python atexit + static
  // destruction both call it).
  static void ShutdownAll();

  // Leases between 1 and `want` lanes. Grows the pool up to kMaxLanesPerDevice; when every lane
  // is leased by concurrent calls, waits for at least one to come back.
  ffi::ErrorOr<LaneLease> Acquire(int want);

  int size();

 private:
  friend class LaneLease;
  explicit LanePool(int device) : device_(device) {}
  void Release(const std::vector<Lane*>& lanes);

  int device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<Lane*> idle_;
};

}  // namespace jcm
