#include "core/lane_pool.h"

#include <algorithm>
#include <array>
#include <map>
#include <new>
#include <string>
#include <system_error>

#include "core/per_process.h"

namespace jcm {

ScopedDevice::ScopedDevice(int device) {
  status_ = cudaGetDevice(&previous_);
  failed_call_ = "cudaGetDevice";
  if (status_ == cudaSuccess && previous_ != device) {
    status_ = cudaSetDevice(device);
    failed_call_ = "cudaSetDevice";
    changed_ = status_ == cudaSuccess;
  }
}

ScopedDevice::~ScopedDevice() {
  // Restoring can only fail if the runtime is gone, and then nothing else runs on this thread.
  if (changed_) cudaSetDevice(previous_);
}

ffi::Error ScopedDevice::status() const {
  return check_cuda(status_, failed_call_, __FILE__, __LINE__);
}

ffi::ErrorOr<std::unique_ptr<Lane>> Lane::Create(int device) {
  ScopedDevice scoped(device);
  JCM_RETURN_IF_ERROR(scoped.status());
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
  try {
    lane->worker_ = std::thread([l = lane.get()] { l->worker_loop(); });
  } catch (const std::system_error& e) {
    // ~Lane destroys the handles; no thread to join.
    return ErrorReturn{ffi::Error(ffi::ErrorCode::kResourceExhausted,
                                  std::string("jax_cusolver_ms: could not start a lane's worker "
                                              "thread: ") + e.what())};
  }
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
  // Teardown errors are ignored: at process exit the driver may already be shutting down, and
  // there is no caller left to report them to.
  ScopedDevice scoped(device_);
  if (blas_) cublasDestroy(blas_);
  if (params_) cusolverDnDestroyParams(params_);
  if (solver_) cusolverDnDestroy(solver_);
  if (join_) cudaEventDestroy(join_);
  if (fork_) cudaEventDestroy(fork_);
  if (stream_) cudaStreamDestroy(stream_);
}

ffi::Error Lane::bind(cudaStream_t stream) {
  on_own_stream_ = false;
  JCM_CUSOLVER("cusolverDnSetStream", cusolverDnSetStream(solver_, stream));
  JCM_CUBLAS("cublasSetStream", cublasSetStream(blas_, stream));
  on_own_stream_ = stream == stream_;
  return ffi::Error::Success();
}

ffi::Error Lane::worker_status() const {
  return check_cuda(worker_device_status_, "cudaSetDevice (lane worker thread)", __FILE__,
                    __LINE__);
}

void* Lane::host_workspace(size_t bytes) {
  host_peak_ = std::max(host_peak_, bytes);
  if (host_bytes_.load(std::memory_order_relaxed) < bytes) {
    // The old contents are not needed (a workspace holds nothing between routine calls): free
    // first, so the old and new buffers are never both held.
    host_workspace_.reset();
    host_bytes_.store(0, std::memory_order_relaxed);
    host_workspace_.reset(new std::byte[bytes]);
    host_bytes_.store(bytes, std::memory_order_relaxed);
  }
  return host_workspace_.get();
}

bool Lane::return_to_pool() {
  // Host workspace: over a window of kHostWindow leases, a buffer more than kHostSlack times
  // (and kHostMinRelease bytes) larger than the most any of them asked for is released; the
  // next call that needs one allocates what it needs. One large call thus does not pin its
  // memory for the process, while a mix of sizes in steady use keeps its largest.
  constexpr int kHostWindow = 64;
  constexpr size_t kHostSlack = 4;
  constexpr size_t kHostMinRelease = size_t{1} << 20;
  if (++leases_in_window_ >= kHostWindow) {
    const size_t held = host_bytes_.load(std::memory_order_relaxed);
    if (held > kHostSlack * host_peak_ && held - host_peak_ > kHostMinRelease) {
      host_workspace_.reset();
      host_bytes_.store(0, std::memory_order_relaxed);
    }
    host_peak_ = 0;
    leases_in_window_ = 0;
  }
  // A call whose rebind failed left the handles on another stream: retry before any reuse.
  if (!on_own_stream_) return bind(stream_).success();
  return true;
}

void Lane::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = std::move(task);
  }
  cv_.notify_one();
}

void Lane::worker_loop() {
  // Worker threads are ours, not XLA's: they must select the device themselves. A failure is
  // reported by every task (worker_status).
  worker_device_status_ = cudaSetDevice(device_);
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || task_; });
      if (stop_ && !task_) return;
      task = std::move(task_);
      task_ = nullptr;
    }
    try {
      task();
    } catch (...) {
      // Tasks catch and report their own errors (run_looped's do); this only keeps an exception
      // from terminating the process.
    }
  }
}

LaneLease::~LaneLease() {
  if (!lanes_.empty()) pool_->Release(lanes_);
}

namespace {

// Pools are never freed (see ForDevice); a forked child gets a fresh registry (per_process.h).
struct PoolRegistry {
  std::mutex mu;
  std::map<int, std::unique_ptr<LanePool>> pools;
  bool shut_down = false;
};

// How long shutdown waits, over all pools, for calls in flight to return their lanes: long
// enough for a running routine to finish, short enough not to hang interpreter exit.
constexpr std::chrono::seconds kShutdownWait{5};

}  // namespace

ffi::Error lanes_shut_down_error() {
  return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                    "jax_cusolver_ms: lanes are shut down (interpreter exit)");
}

LanePool::LanePool(int device) : device_(device) {
  lanes_.reserve(kMaxLanesPerDevice);
  idle_.reserve(kMaxLanesPerDevice);
}

ffi::ErrorOr<LanePool*> LanePool::ForDevice(int device) {
  PoolRegistry& r = per_process<PoolRegistry>();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.shut_down) return ErrorReturn{lanes_shut_down_error()};
  auto& pool = r.pools[device];
  if (!pool) pool.reset(new LanePool(device));
  return pool.get();
}

void LanePool::ShutdownAll() noexcept {
  try {
    PoolRegistry& r = per_process<PoolRegistry>();
    std::vector<LanePool*> pools;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      r.shut_down = true;
      for (auto& entry : r.pools) pools.push_back(entry.second.get());
    }
    const auto deadline = std::chrono::steady_clock::now() + kShutdownWait;
    // Destroyed outside the pool's lock: ~Lane joins the worker thread.
    for (LanePool* pool : pools) pool->Close(deadline).clear();
  } catch (...) {
    // Only allocation can throw here; shutting down less is better than failing at exit.
  }
}

std::vector<std::unique_ptr<Lane>> LanePool::Close(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  closed_ = true;
  cv_.notify_all();  // callers waiting in Acquire fail now
  cv_.wait_until(lock, deadline, [this] { return idle_.size() == lanes_.size(); });
  std::vector<std::unique_ptr<Lane>> idle;
  idle.reserve(idle_.size());
  for (auto& lane : lanes_) {
    if (std::find(idle_.begin(), idle_.end(), lane.get()) != idle_.end()) {
      idle.push_back(std::move(lane));
    }
  }
  // Lanes still leased stay in lanes_: the pool is never freed, so their call can return them.
  lanes_.erase(std::remove(lanes_.begin(), lanes_.end(), nullptr), lanes_.end());
  idle_.clear();
  return idle;
}

LanePool::Counts LanePool::CountsFor(int device) {
  PoolRegistry& r = per_process<PoolRegistry>();
  Counts counts;
  LanePool* pool = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    counts.shut_down = r.shut_down;
    auto it = r.pools.find(device);
    if (it != r.pools.end()) pool = it->second.get();
  }
  if (pool == nullptr) return counts;
  std::lock_guard<std::mutex> lock(pool->mu_);
  counts.lanes = static_cast<int>(pool->lanes_.size());
  counts.leased = static_cast<int>(pool->lanes_.size() - pool->idle_.size());
  for (const auto& lane : pool->lanes_) counts.host_workspace_bytes += lane->host_workspace_bytes();
  return counts;
}

ffi::ErrorOr<LaneLease> LanePool::Acquire(int want) {
  want = std::clamp(want, 1, kMaxLanesPerDevice);
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return ErrorReturn{lanes_shut_down_error()};
  // Grow while this call would otherwise get fewer lanes than it asked for.
  while (static_cast<int>(idle_.size()) < want &&
         static_cast<int>(lanes_.size()) < kMaxLanesPerDevice) {
    auto lane = Lane::Create(device_);
    if (lane.has_error()) {
      // With lanes in the pool (idle, or leased and coming back), run on those rather than fail.
      if (!lanes_.empty()) break;
      return ErrorReturn{lane.error()};
    }
    idle_.push_back(lane.value().get());
    lanes_.push_back(std::move(lane.value()));
  }
  cv_.wait(lock, [this] { return closed_ || !idle_.empty(); });
  if (closed_) return ErrorReturn{lanes_shut_down_error()};
  int take = std::min<int>(want, static_cast<int>(idle_.size()));
  std::vector<Lane*> leased(idle_.end() - take, idle_.end());
  idle_.resize(idle_.size() - take);
  return LaneLease(this, std::move(leased));
}

void LanePool::Release(const std::vector<Lane*>& lanes) noexcept {
  // Lanes whose handles could not be rebound to their own stream leave the pool, leaked rather
  // than destroyed: their handles may still have work queued on a stream we no longer track.
  std::array<Lane*, kMaxLanesPerDevice> dropped{};
  size_t ndropped = 0;
  for (Lane* lane : lanes) {
    if (!lane->return_to_pool() && ndropped < dropped.size()) dropped[ndropped++] = lane;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Lane* lane : lanes) {
      if (std::find(dropped.begin(), dropped.begin() + ndropped, lane) ==
          dropped.begin() + ndropped) {
        idle_.push_back(lane);  // within the reserved capacity: no allocation
        continue;
      }
      for (auto& owned : lanes_) {
        if (owned.get() == lane) (void)owned.release();
      }
    }
    lanes_.erase(std::remove(lanes_.begin(), lanes_.end(), nullptr), lanes_.end());
  }
  cv_.notify_all();
}

}  // namespace jcm
