// run_looped: the one driver every solver op goes through. It owns the lanes, the fork/join with
// XLA's stream, the hoisted workspace and error collection; an op only says how to query its
// workspace and how to run one batch item (and, optionally, a chunk through a batched path or the
// whole batch through a blocked algorithm). The strategy reaching it is feasible: call_config
// (handler_util.h) has checked it against core/limits.h and refused it otherwise.
//
// An op ("traits") provides:
//   static constexpr const char* kName;
//   InPlace<T> io;                          // the matrices worked on in place, and info
//   std::string workspace_key() const;      // identifies the call shape for the query cache
//   ffi::ErrorOr<Workspace> query_workspace(const LaneContext&) const;
//   ffi::Error run_item(const LaneContext&, int64_t item, const Workspace&, void* work) const;
// and, where the routine has them (core/limits.h says which):
//   ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const;  // may query
//   ffi::Error run_batched(const LaneContext&, int64_t begin, int64_t end, void* work) const;
// and, next to it, the blocked algorithm (found by argument-dependent lookup):
//   ffi::Error run_blocked(const CallConfig&, ffi::ScratchAllocator&, const Op&);
// and, optionally:
//   static constexpr bool kZeroInfo = true;
//     some path leaves info unwritten (a batched kernel that reports nothing): the prologue
//     zeroes it (otherwise only for an empty call, which runs nothing).
//   static constexpr bool kInputsOnHostSync = true;
//     the routine reads its inputs outside its stream (e.g. a blocking copy on the legacy default
//     stream, which XLA's and the lanes' non-blocking streams do not order with): each lane waits
//     on the host until its stream has the inputs before its first per-item call (the batched
//     paths are left to run asynchronously). Xsytrs did so on the H100 (cuSOLVER 12.0.4: illegal
//     addresses unless every launch was synchronous); the other 64-bit API routines with a host
//     workspace (Xsyevd, Xgeev, Xgesvd) are treated alike (they block the host anyway).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/batch_kernels.h"
#include "core/lane_pool.h"
#include "core/limits.h"
#include "core/per_process.h"
#include "core/solver_api.h"
#include "core/status.h"

namespace jcm {

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

// Workspace queries are cached per device, op and call shape: a query can cost as much as a small
// solve. Least recently used entries are evicted past kCapacity (call shapes are unbounded).
class WorkspaceCache {
 public:
  static constexpr size_t kCapacity = 4096;

  static std::optional<Workspace> lookup(const std::string& key) {
    State& s = per_process<State>();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return std::nullopt;
    s.order.splice(s.order.begin(), s.order, it->second.age);
    return it->second.ws;
  }
  static void store(int device, const std::string& key, Workspace ws) {
    State& s = per_process<State>();
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it != s.map.end()) {
      it->second.ws = ws;
      return;
    }
    if (s.map.size() >= kCapacity) {
      s.map.erase(s.order.back());
      s.order.pop_back();
    }
    s.order.push_front(key);
    s.map.emplace(key, Entry{device, ws, s.order.begin()});
  }
  // Entries of `device` (resource counts).
  static size_t entries(int device) {
    State& s = per_process<State>();
    std::lock_guard<std::mutex> lock(s.mu);
    size_t n = 0;
    for (const auto& entry : s.map) n += entry.second.device == device;
    return n;
  }

 private:
  struct Entry {
    int device;
    Workspace ws;
    std::list<std::string>::iterator age;  // its place in `order`
  };
  struct State {
    std::mutex mu;
    std::list<std::string> order;  // keys, most recently used first
    std::unordered_map<std::string, Entry> map;
  };
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

// Copies an operand into the result it is solved in place in, unless XLA aliased the two.
inline ffi::Error copy_if_not_aliased(cudaStream_t stream, void* dst, const void* src,
                                      size_t bytes) {
  if (dst == src || bytes == 0) return ffi::Error::Success();
  JCM_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  return ffi::Error::Success();
}

// What every routine's traits share: `items` matrices, the operand `in` (`bytes` long) that the
// routine works on in place in the result `data`, and one info per matrix; `empty` where a
// dimension is zero (nothing to compute).
template <typename T>
struct InPlace {
  int64_t items;
  const void* in;
  T* data;
  size_t bytes;
  int* info;
  bool empty;

  // On XLA's stream before anything runs: the operand copied into place, and info zeroed where
  // no path will write it.
  ffi::Error prepare(cudaStream_t stream, bool zero_info) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, data, in, bytes));
    if (zero_info) JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }
};

// ptrs[i] = base + i * stride (in elements), for i < count: the pointer arrays batched APIs take.
template <typename T>
ffi::Error fill_pointers(cudaStream_t stream, T** ptrs, T* base, int64_t stride, int64_t count) {
  JCM_CUDA(fill_pointer_array(stream, reinterpret_cast<void**>(ptrs), base, stride * sizeof(T),
                              count));
  return ffi::Error::Success();
}

// The workspace of a legacy-API routine: its _bufferSize call `query(args..., &lwork)` (cuSOLVER's
// `routine` for T, e.g. "potrf_bufferSize", in errors) gives lwork elements of T; at least one
// (LAPACK's contract). lwork_of reads it back.
template <typename T, typename Query, typename... Args>
ffi::ErrorOr<Workspace> lwork_workspace(const std::string& routine, Query query, Args... args) {
  int lwork = 0;
  JCM_CUSOLVER(routine_name<T>("cusolverDn", routine.c_str()), query(args..., &lwork));
  return Workspace{static_cast<size_t>(std::max(lwork, 1)) * sizeof(T), 0};
}
template <typename T>
int lwork_of(const Workspace& ws) {
  return static_cast<int>(ws.device_bytes / sizeof(T));
}

template <typename Op, typename = void>
struct zero_info : std::false_type {};
template <typename Op>
struct zero_info<Op, std::void_t<decltype(Op::kZeroInfo)>> : std::bool_constant<Op::kZeroInfo> {};

// The items to compute (none for an empty call) after the prologue on XLA's stream.
template <typename Op>
ffi::ErrorOr<int64_t> prepare_items(const Op& op, cudaStream_t xla_stream) {
  JCM_RETURN_IF_ERROR(op.io.prepare(xla_stream, op.io.empty || zero_info<Op>::value));
  return op.io.empty ? 0 : op.io.items;
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
  const int device = ctx.lane->device();
  std::string key = std::to_string(device);
  key += ':';
  key += Op::kName;
  key += ':';
  key += op.workspace_key();
  if (auto hit = WorkspaceCache::lookup(key)) return *hit;
  JCM_ASSIGN_OR_RETURN(Workspace ws, op.query_workspace(ctx));
  WorkspaceCache::store(device, key, ws);
  return ws;
}

// Records `lane`'s join event on its stream when it goes out of scope, whatever ran before it (a
// failed wait on the fork, a failed item, an exception): XLA's stream waits on that event. Sets
// `joined` if the record succeeded, else reports the failure in `error` unless it already holds
// one.
class JoinOnExit {
 public:
  JoinOnExit(Lane& lane, bool& joined, ffi::Error& error)
      : lane_(lane), joined_(joined), error_(error) {}
  JoinOnExit(const JoinOnExit&) = delete;
  ~JoinOnExit() {
    ffi::Error err = catch_exceptions("cudaEventRecord (join)", [&] {
      return check_cuda(cudaEventRecord(lane_.join_event(), lane_.stream()),
                        "cudaEventRecord (join)", __FILE__, __LINE__);
    });
    joined_ = err.success();
    if (err.failure() && error_.success()) error_ = std::move(err);
  }

 private:
  Lane& lane_;
  bool& joined_;
  ffi::Error& error_;
};

}  // namespace detail

namespace detail {

// Runs `body(ctx)` on the calling thread with `lane`'s handles bound to XLA's stream, then binds
// them back to the lane's own stream, also after an error or a partial bind. Should that rebind
// fail, the lane is rebound again when returned to its pool (and dropped from it if that fails
// too), so its handles never stay on XLA's stream into another call.
template <typename Body>
ffi::Error on_xla_stream(Lane& lane, cudaStream_t xla_stream, Body&& body) {
  ffi::Error err = lane.bind(xla_stream);
  if (err.success()) {
    err = body(LaneContext{xla_stream, lane.solver(), lane.params(), lane.blas(), &lane});
  }
  ffi::Error rebind = lane.bind(lane.stream());
  return err.failure() ? std::move(err) : std::move(rebind);
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

template <typename Op, typename = void>
struct has_batched_path : std::false_type {};
template <typename Op>
struct has_batched_path<Op, std::void_t<decltype(&Op::run_batched)>> : std::true_type {};

template <typename Op, typename = void>
struct has_blocked_path : std::false_type {};
template <typename Op>
struct has_blocked_path<Op, std::void_t<decltype(run_blocked(std::declval<const CallConfig&>(),
                                                             std::declval<ffi::ScratchAllocator&>(),
                                                             std::declval<const Op&>()))>>
    : std::true_type {};

// A strategy the op has no path for: call_config refuses it first, so this is a safety net.
inline ffi::Error no_path(const char* op, Strategy strategy) {
  return invalid_argument(std::string(op) + ": no " +
                          kStrategyNames[static_cast<int>(strategy)] + " path");
}

template <typename Op>
ffi::Error run_looped(const CallConfig& call, ffi::ScratchAllocator& scratch, const Op& op) {
  const bool batched = call.strategy == Strategy::kBatched;
  if constexpr (!has_batched_path<Op>::value) {
    if (batched) return no_path(Op::kName, call.strategy);
  }
  JCM_ASSIGN_OR_RETURN(const int64_t batch, prepare_items(op, call.xla_stream));
  if (batch == 0) return ffi::Error::Success();

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
  if constexpr (has_batched_path<Op>::value) {
    if (batched) {
      chunk = (batch + nlanes - 1) / nlanes;
      JCM_ASSIGN_OR_RETURN(size_t chunk_bytes, op.batched_workspace(context_for(0), chunk));
      slot_bytes = align_up(chunk_bytes);
    }
  }
  if (!batched) {
    JCM_ASSIGN_OR_RETURN(ws, detail::cached_workspace(op, context_for(0)));
    slot_bytes = align_up(ws.device_bytes);
  }
  JCM_ASSIGN_OR_RETURN(std::byte * work,
                       allocate_scratch(scratch, slot_bytes * nlanes, Op::kName));

  auto run_unit = [&](const LaneContext& ctx, int lane_index,
                      std::atomic<int64_t>& next) -> ffi::Error {
    void* slot = work ? work + slot_bytes * lane_index : nullptr;
    if constexpr (has_batched_path<Op>::value) {
      if (batched) {
        int64_t begin = lane_index * chunk, end = std::min(batch, begin + chunk);
        if (begin >= end) return ffi::Error::Success();
        return op.run_batched(ctx, begin, end, slot);
      }
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
  struct LaneOutcome {
    ffi::Error error;
    bool joined = false;  // its join event was recorded after all its work
  };
  std::vector<LaneOutcome> outcomes(nlanes);
  detail::Latch latch(nlanes);
  // On lane i's worker thread. Nothing escapes it: an exception would skip the latch and leave
  // this call waiting forever (and the stack it points into in use after return).
  auto lane_task = [&](int i) {
    Lane& lane = lease[i];
    LaneOutcome& out = outcomes[i];
    {
      detail::JoinOnExit join(lane, out.joined, out.error);
      out.error = catch_exceptions(Op::kName, [&]() -> ffi::Error {
        JCM_RETURN_IF_ERROR(lane.worker_status());
        JCM_CUDA(cudaStreamWaitEvent(lane.stream(), fork, 0));
        return run_unit(context_for(i), i, next);
      });
    }
    latch.count_down();
  };
  for (int i = 0; i < nlanes; ++i) {
    // A pointer and an int: std::function stores it inline, so posting neither allocates nor
    // throws once some lanes already run.
    lease[i].post([task = &lane_task, i] { (*task)(i); });
  }
  latch.wait();

  // Join: XLA's stream (and so the scratch allocation's reuse) waits for every lane. Every wait
  // is issued whatever failed; a lane whose join cannot be made on the stream is waited for on
  // the host instead, so no lane still writes scratch that XLA hands out again.
  ffi::Error join_error;
  for (int i = 0; i < nlanes; ++i) {
    Lane& lane = lease[i];
    ffi::Error err;
    if (outcomes[i].joined) {
      err = check_cuda(cudaStreamWaitEvent(call.xla_stream, lane.join_event(), 0),
                       "cudaStreamWaitEvent (join)", __FILE__, __LINE__);
    }
    if (!outcomes[i].joined || err.failure()) {
      ffi::Error sync = check_cuda(cudaStreamSynchronize(lane.stream()),
                                   "cudaStreamSynchronize (join on the host)", __FILE__, __LINE__);
      if (err.success()) err = std::move(sync);
    }
    if (err.failure() && join_error.success()) join_error = std::move(err);
  }
  for (auto& out : outcomes) JCM_RETURN_IF_ERROR(std::move(out.error));
  return join_error;
}

// A blocked algorithm over the whole batch on XLA's stream: after the prologue, `bytes(batch)` of
// scratch and, with one lane's handles bound to XLA's stream and info zeroed (the blocks merge
// their failures into it), body(ctx, batch, work).
template <typename Op, typename Bytes, typename Body>
ffi::Error run_blocked_inline(const CallConfig& call, ffi::ScratchAllocator& scratch, const Op& op,
                              Bytes&& bytes, Body&& body) {
  JCM_ASSIGN_OR_RETURN(const int64_t batch, prepare_items(op, call.xla_stream));
  if (batch == 0) return ffi::Error::Success();
  JCM_ASSIGN_OR_RETURN(std::byte * work, allocate_scratch(scratch, bytes(batch), Op::kName));
  return run_inline(call, [&](const LaneContext& ctx) -> ffi::Error {
    JCM_CUDA(cudaMemsetAsync(op.io.info, 0, batch * sizeof(int), ctx.stream));
    return body(ctx, batch, work);
  });
}

// Runs `op` by the call's strategy: its blocked algorithm, or run_looped (the lanes, XLA's stream
// item by item, or its batched path).
template <typename Op>
ffi::Error run(const CallConfig& call, ffi::ScratchAllocator& scratch, const Op& op) {
  if (call.strategy == Strategy::kBlocked) {
    if constexpr (has_blocked_path<Op>::value) {
      return run_blocked(call, scratch, op);
    } else {
      return no_path(Op::kName, call.strategy);
    }
  }
  return run_looped(call, scratch, op);
}

}  // namespace jcm
