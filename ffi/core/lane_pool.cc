#include "core/lane_pool.h"

#include <algorithm>
#include <map>

namespace jcm {

namespace {

// Keeps the calling thread's current device intact: XLA's launch thread relies on it.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device) {
      changed_ = cudaSetDevice(device) == cudaSuccess;
    }
  }
  ~ScopedDevice() {
    if (changed_) cudaSetDevice(previous_);
  }

 private:
  int previous_ = -1;
  bool changed_ = false;
};

}  // namespace

ffi::ErrorOr<std::unique_ptr<Lane>> Lane::Create(int device) {
  ScopedDevice scoped(device);
  std::unique_ptr<Lane> lane(new Lane(device));
  auto init = [&]() -> ffi::Error {
    JCM_CUDA(cudaStreamCreateWithFlags(&lane->stream_, cudaStreamNonBlocking));
    JCM_CUDA(cudaEventCreateWithFlags(&lane->fork_, cudaEventDisableTiming));
    JCM_CUDA(cudaEventCreateWithFlags(&lane->join_, cudaEventDisableTiming));
    JCM_CUSOLVER("cusolverDnCreate", cusolverDnCreate(&lane->solver_));
    JCM_CUSOLVER("cusolverDnCreateParams", cusolverDnCreateParams(&lane->params_));
    JCM_CUBLAS("cublasCreate", cublasCreate(&lane->blas_));
    return lane->bind(lane->stream_);
  };
  JCM_RETURN_IF_ERROR(init());
  lane->worker_ = std::thread([l = lane.get()] { l->worker_loop(); });
  return lane;
}

Lane::~Lane() {
  if (worker_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  // Teardown errors are ignored: at process exit the driver may already be shutting down.
  ScopedDevice scoped(device_);
  if (blas_) cublasDestroy(blas_);
  if (params_) cusolverDnDestroyParams(params_);
  if (solver_) cusolverDnDestroy(solver_);
  if (join_) cudaEventDestroy(join_);
  if (fork_) cudaEventDestroy(fork_);
  if (stream_) cudaStreamDestroy(stream_);
}

ffi::Error Lane::bind(cudaStream_t stream) {
  JCM_CUSOLVER("cusolverDnSetStream", cusolverDnSetStream(solver_, stream));
  JCM_CUBLAS("cublasSetStream", cublasSetStream(blas_, stream));
  return ffi::Error::Success();
}

void* Lane::host_workspace(size_t bytes) {
  if (host_workspace_.size() < bytes) host_workspace_.resize(bytes);
  return host_workspace_.empty() ? nullptr : host_workspace_.data();
}

void Lane::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = std::move(task);
  }
  cv_.notify_one();
}

void Lane::worker_loop() {
  // Worker threads are ours, not XLA's: they must select the device themselves.
  cudaSetDevice(device_);
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || task_; });
      if (stop_ && !task_) return;
      task = std::move(task_);
      task_ = nullptr;
    }
    task();
  }
}

LaneLease::~LaneLease() {
  if (!lanes_.empty()) pool_->Release(lanes_);
}

namespace {

struct PoolRegistry {
  std::mutex mu;
  std::map<int, std::unique_ptr<LanePool>> pools;
  ~PoolRegistry() { pools.clear(); }
};

PoolRegistry& registry() {
  // Constructed on first use, i.e. after the CUDA runtime initialised, so it is destroyed before
  // the runtime's own exit handlers run.
  static PoolRegistry* r = new PoolRegistry();
  return *r;
}

}  // namespace

ffi::ErrorOr<LanePool*> LanePool::ForDevice(int device) {
  PoolRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& pool = r.pools[device];
  if (!pool) pool.reset(new LanePool(device));
  return pool.get();
}

void LanePool::ShutdownAll() {
  PoolRegistry& r = registry();
  std::map<int, std::unique_ptr<LanePool>> pools;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    pools.swap(r.pools);
  }
  // Lanes join their workers in ~Lane. A call still in flight keeps its pool's lanes leased, so
  // shutdown must only run when no XLA execution is active (interpreter exit).
  pools.clear();
}

int LanePool::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(lanes_.size());
}

ffi::ErrorOr<LaneLease> LanePool::Acquire(int want) {
  want = std::clamp(want, 1, kMaxLanesPerDevice);
  std::unique_lock<std::mutex> lock(mu_);
  // Grow while this call would otherwise get fewer lanes than it asked for.
  while (static_cast<int>(idle_.size()) < want &&
         static_cast<int>(lanes_.size()) < kMaxLanesPerDevice) {
    auto lane = Lane::Create(device_);
    if (lane.has_error()) {
      if (!idle_.empty()) break;  // run with what we have rather than fail
      return ErrorReturn{lane.error()};
    }
    idle_.push_back(lane.value().get());
    lanes_.push_back(std::move(lane.value()));
  }
  cv_.wait(lock, [this] { return !idle_.empty(); });
  int take = std::min<int>(want, static_cast<int>(idle_.size()));
  std::vector<Lane*> leased(idle_.end() - take, idle_.end());
  idle_.resize(idle_.size() - take);
  return LaneLease(this, std::move(leased));
}

void LanePool::Release(const std::vector<Lane*>& lanes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.insert(idle_.end(), lanes.begin(), lanes.end());
  }
  cv_.notify_all();
}

}  // namespace jcm
