// run_looped: the one driver every solver op goes through. It owns the lanes, the fork/join with
// XLA's stream, the hoisted workspace and error collection; an op only says how to query its
// workspace and how to run one batch item (and, optionally, a chunk through a batched API).
//
// An op ("traits") provides:
//   static constexpr const char* kName;
//   int64_t batch() const;
//   std::string workspace_key() const;      // identifies the call shape for the query cache
//   ffi::ErrorOr<Workspace> query_workspace(const LaneContext&) const;
//   ffi::Error run_item(const LaneContext&, int64_t item, const Workspace&, void* work) const;
//   bool has_batched() const;               // a native batched API applies to this call
//   ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const;  // may query
//   ffi::Error run_batched(const LaneContext&, int64_t begin, int64_t end, void* work) const;
//   ffi::Error prologue(cudaStream_t xla_stream) const;   // on XLA's stream, before the fork
// and, optionally:
//   static constexpr bool kInputsOnHostSync = true;
//     the routine reads its inputs outside its stream (e.g. a blocking copy on the legacy default
//     stream, which XLA's and the lanes' non-blocking streams do not order with): each lane waits
//     on the host until its stream has the inputs before its first per-item call (the native
//     batched APIs are left to run asynchronously).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/lane_pool.h"
#include "core/status.h"

namespace jcm {

// Values of the `strategy` attribute. "auto" never reaches C++: Python resolves it at lowering.
enum class Strategy : int32_t {
  kLooped = 0,      // one cuSOLVER call per item, spread over lanes (own stream + thread each)
  kSequential = 1,  // one cuSOLVER call per item, all on XLA's stream from the calling thread
  kBatched = 2,     // a native batched API; with lanes > 1 each lane takes a chunk of the batch
  // A blocked algorithm over the whole batch on XLA's stream, built from batched APIs and this
  // project's panel kernels (getrf, potrf, sytrf). An op without one runs as kLooped (Python
  // never asks for that).
  kBlocked = 3,
};

// A blocked algorithm's block size: `fallback`, or the environment variable `name` when set to a
// value in [lo, hi] (to measure others; read once per process by the caller's static).
inline int64_t block_size_from_env(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* env = std::getenv(name);
  if (env == nullptr) return fallback;
  const int64_t value = std::atoll(env);
  return value >= lo && value <= hi ? value : fallback;
}

// A kernel's threads per block from the environment variable `name` (a multiple of 32 up to
// 1024, to measure others), else 0: the caller's own choice. Read once per process by the
// caller's static.
inline int threads_from_env(const char* name) {
  const int64_t value = block_size_from_env(name, 0, 32, 1024);
  return static_cast<int>(value % 32 == 0 ? value : 0);
}

struct Workspace {
  size_t device_bytes = 0;
  size_t host_bytes = 0;
};

// What an op sees while running on a lane (or inline on XLA's stream).
struct LaneContext {
  cudaStream_t stream;
  cusolverDnHandle_t solver;
  cusolverDnParams_t params;
  cublasHandle_t blas;
  Lane* lane;  // for host workspace
};

struct CallConfig {
  cudaStream_t xla_stream;
  int device;
  Strategy strategy;
  int lanes;
};

inline constexpr size_t kWorkspaceAlign = 256;
inline size_t align_up(size_t bytes) {
  return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// Workspace queries are cached per op and call shape: a query can cost as much as a small solve.
class WorkspaceCache {
 public:
  static std::optional<Workspace> lookup(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu());
    auto it = map().find(key);
    if (it == map().end()) return std::nullopt;
    return it->second;
  }
  static void store(const std::string& key, Workspace ws) {
    std::lock_guard<std::mutex> lock(mu());
    map()[key] = ws;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::unordered_map<std::string, Workspace>& map() {
    static auto* m = new std::unordered_map<std::string, Workspace>();
    return *m;
  }
};

// One device allocation from XLA's scratch allocator, carved into 256-byte aligned slots.
inline ffi::ErrorOr<std::byte*> allocate_scratch(ffi::ScratchAllocator& scratch, size_t bytes,
                                                 const char* op) {
  if (bytes == 0) return static_cast<std::byte*>(nullptr);
  auto ptr = scratch.Allocate(bytes + kWorkspaceAlign, 16);
  if (!ptr.has_value()) {
    return ErrorReturn{ffi::Error(ffi::ErrorCode::kResourceExhausted,
                      std::string("Unable to allocate ") + std::to_string(bytes) +
                          " bytes of workspace for " + op)};
  }
  auto addr = reinterpret_cast<uintptr_t>(*ptr);
  addr = (addr + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
  return reinterpret_cast<std::byte*>(addr);
}

namespace detail {

// Counts down as lane tasks finish enqueuing their work (the GPU work itself is joined by events).
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}
  void count_down() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ == 0) cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_;
};

template <typename Op>
ffi::ErrorOr<Workspace> cached_workspace(const Op& op, const LaneContext& ctx) {
  std::string key = std::string(Op::kName) + ":" + op.workspace_key();
  if (auto hit = WorkspaceCache::lookup(key)) return *hit;
  JCM_ASSIGN_OR_RETURN(Workspace ws, op.query_workspace(ctx));
  WorkspaceCache::store(key, ws);
  return ws;
}

}  // namespace detail

namespace detail {

// Runs `body(ctx)` on the calling thread with `lane`'s handles bound to XLA's stream, then binds
// them back to the lane's own stream (also after an error).
template <typename Body>
ffi::Error on_xla_stream(Lane& lane, cudaStream_t xla_stream, Body&& body) {
  JCM_RETURN_IF_ERROR(lane.bind(xla_stream));
  ffi::Error err = body(LaneContext{xla_stream, lane.solver(), lane.params(), lane.blas(), &lane});
  ffi::Error rebind = lane.bind(lane.stream());
  JCM_RETURN_IF_ERROR(err);
  return rebind;
}

}  // namespace detail

// Runs `body(ctx)` on the calling thread with one lane's handles bound to XLA's stream: for an
// algorithm that is one sequence of library calls over the whole batch (Strategy::kBlocked).
template <typename Body>
ffi::Error run_inline(const CallConfig& call, Body&& body) {
  JCM_ASSIGN_OR_RETURN(LanePool * pool, LanePool::ForDevice(call.device));
  JCM_ASSIGN_OR_RETURN(LaneLease lease, pool->Acquire(1));
  return detail::on_xla_stream(lease[0], call.xla_stream, body);
}

template <typename Op, typename = void>
struct inputs_need_host_sync : std::false_type {};
template <typename Op>
struct inputs_need_host_sync<Op, std::void_t<decltype(Op::kInputsOnHostSync)>>
    : std::bool_constant<Op::kInputsOnHostSync> {};

template <typename Op>
ffi::Error run_looped(const CallConfig& call, ffi::ScratchAllocator& scratch, const Op& op) {
  JCM_RETURN_IF_ERROR(op.prologue(call.xla_stream));
  const int64_t batch = op.batch();
  if (batch == 0) return ffi::Error::Success();

  const bool batched = call.strategy == Strategy::kBatched && op.has_batched();
  int want = call.strategy == Strategy::kSequential ? 1 : std::max(call.lanes, 1);
  want = static_cast<int>(std::min<int64_t>(want, batch));

  JCM_ASSIGN_OR_RETURN(LanePool * pool, LanePool::ForDevice(call.device));
  JCM_ASSIGN_OR_RETURN(LaneLease lease, pool->Acquire(want));
  const int nlanes = lease.size();
  const bool inline_on_xla = nlanes == 1;

  auto context_for = [&](int i) {
    Lane& lane = lease[i];
    return LaneContext{inline_on_xla ? call.xla_stream : lane.stream(), lane.solver(),
                       lane.params(), lane.blas(), &lane};
  };

  // Work units: items (looped) or equal chunks of the batch (batched).
  Workspace ws;
  size_t slot_bytes = 0;
  int64_t chunk = batch;
  if (batched) {
    chunk = (batch + nlanes - 1) / nlanes;
    JCM_ASSIGN_OR_RETURN(size_t chunk_bytes, op.batched_workspace(context_for(0), chunk));
    slot_bytes = align_up(chunk_bytes);
  } else {
    JCM_ASSIGN_OR_RETURN(ws, detail::cached_workspace(op, context_for(0)));
    slot_bytes = align_up(ws.device_bytes);
  }
  JCM_ASSIGN_OR_RETURN(std::byte * work,
                       allocate_scratch(scratch, slot_bytes * nlanes, Op::kName));

  auto run_unit = [&](const LaneContext& ctx, int lane_index,
                      std::atomic<int64_t>& next) -> ffi::Error {
    void* slot = work ? work + slot_bytes * lane_index : nullptr;
    if (batched) {
      int64_t begin = lane_index * chunk, end = std::min(batch, begin + chunk);
      if (begin >= end) return ffi::Error::Success();
      return op.run_batched(ctx, begin, end, slot);
    }
    if constexpr (inputs_need_host_sync<Op>::value) {
      JCM_CUDA(cudaStreamSynchronize(ctx.stream));
    }
    if (ws.host_bytes) ctx.lane->host_workspace(ws.host_bytes);
    // Dynamic assignment: routines that block the host finish at different times.
    for (int64_t i = next.fetch_add(1); i < batch; i = next.fetch_add(1)) {
      JCM_RETURN_IF_ERROR(op.run_item(ctx, i, ws, slot));
    }
    return ffi::Error::Success();
  };

  std::atomic<int64_t> next{0};
  if (inline_on_xla) {
    // One lane: no fork/join and no thread hop; the lane's handles run on XLA's stream.
    return detail::on_xla_stream(lease[0], call.xla_stream, [&](const LaneContext& ctx) {
      return run_unit(ctx, 0, next);
    });
  }

  // Fork: every lane waits for what XLA enqueued before this call (the inputs).
  cudaEvent_t fork = lease[0].fork_event();
  JCM_CUDA(cudaEventRecord(fork, call.xla_stream));
  std::vector<ffi::Error> errors(nlanes);
  detail::Latch latch(nlanes);
  for (int i = 0; i < nlanes; ++i) {
    Lane& lane = lease[i];
    lane.post([&, i] {
      auto body = [&]() -> ffi::Error {
        JCM_CUDA(cudaStreamWaitEvent(lane.stream(), fork, 0));
        ffi::Error unit_err = run_unit(context_for(i), i, next);
        // Always record the join, so XLA never waits on a stale event, even after an error.
        JCM_CUDA(cudaEventRecord(lane.join_event(), lane.stream()));
        return unit_err;
      };
      errors[i] = body();
      latch.count_down();
    });
  }
  latch.wait();

  // Join: XLA's stream (and so the scratch allocation's reuse) waits for every lane.
  for (int i = 0; i < nlanes; ++i) {
    JCM_CUDA(cudaStreamWaitEvent(call.xla_stream, lease[i].join_event(), 0));
  }
  for (auto& err : errors) JCM_RETURN_IF_ERROR(err);
  return ffi::Error::Success();
}

}  // namespace jcm
