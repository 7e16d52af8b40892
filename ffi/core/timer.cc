// Device-side timing for the benchmarks: an identity custom call that records a CUDA event on
// XLA's stream. Placed on the inputs and on the outputs of a jitted call, the data dependencies
// order it around the work; the host reads the elapsed time between two stamps afterwards.
#include <cuda_runtime_api.h>

#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/handler_util.h"
#include "core/handlers.h"
#include "core/lane_pool.h"
#include "core/per_process.h"
#include "core/status.h"
#include "core/timer.h"

namespace jcm {

namespace {

// Most slots with an event at once, over all devices. Slots come from a counter (two per timed
// function), so without a bound a long benchmark session would hold an event per slot ever used.
constexpr size_t kMaxSlots = 4096;

// slot -> (device, event), least recently stamped evicted past kMaxSlots. Events are never
// destroyed while the process runs: an evicted one is kept on its device's free list and reused,
// so timer_elapsed_ms, which reads an event outside the lock, never reads a destroyed one (at
// worst one re-recorded for a newer slot, after more than kMaxSlots newer stamps). At most
// kMaxSlots events per device exist.
struct TimerEvents {
  struct Slot {
    int device;
    cudaEvent_t event;
    std::list<int64_t>::iterator age;  // its place in `order`
  };
  std::mutex mu;
  std::list<int64_t> order;  // slots, most recently stamped first
  std::unordered_map<int64_t, Slot> slots;
  std::unordered_map<int, std::vector<cudaEvent_t>> free;  // device -> reusable events
};

// The event of `slot` on `device`, taken from the free list or created. Called under t.mu.
ffi::ErrorOr<cudaEvent_t> slot_event(TimerEvents& t, int64_t slot, int device) {
  auto it = t.slots.find(slot);
  if (it != t.slots.end()) {
    t.order.splice(t.order.begin(), t.order, it->second.age);
    if (it->second.device == device) return it->second.event;
    // The slot is stamped on another device now: its event goes back to its own device's list.
    t.free[it->second.device].push_back(it->second.event);
    t.order.erase(it->second.age);
    t.slots.erase(it);
  } else if (t.slots.size() >= kMaxSlots) {
    auto oldest = t.slots.find(t.order.back());
    if (oldest != t.slots.end()) {
      t.free[oldest->second.device].push_back(oldest->second.event);
      t.slots.erase(oldest);
    }
    t.order.pop_back();
  }
  cudaEvent_t event = nullptr;
  std::vector<cudaEvent_t>& free = t.free[device];
  if (!free.empty()) {
    event = free.back();
    free.pop_back();
  } else {
    ScopedDevice scoped(device);
    JCM_RETURN_IF_ERROR(scoped.status());
    JCM_CUDA(cudaEventCreate(&event));
  }
  t.order.push_front(slot);
  t.slots.emplace(slot, TimerEvents::Slot{device, event, t.order.begin()});
  return event;
}

}  // namespace

ffi::Error timer_stamp_handler(cudaStream_t stream, int32_t device, ffi::RemainingArgs args,
                               ffi::RemainingRets rets, int64_t slot) {
  if (args.size() != rets.size()) {
    return invalid_argument("timer_stamp: needs as many results as operands");
  }
  for (size_t i = 0; i < args.size(); ++i) {
    JCM_ASSIGN_OR_RETURN(ffi::AnyBuffer in, args.get<ffi::AnyBuffer>(i));
    JCM_ASSIGN_OR_RETURN(ffi::Result<ffi::AnyBuffer> out, rets.get<ffi::AnyBuffer>(i));
    JCM_RETURN_IF_ERROR(
        copy_if_not_aliased(stream, out->untyped_data(), in.untyped_data(), in.size_bytes()));
  }
  cudaEvent_t event;
  {
    TimerEvents& t = per_process<TimerEvents>();
    std::lock_guard<std::mutex> lock(t.mu);
    JCM_ASSIGN_OR_RETURN(event, slot_event(t, slot, device));
  }
  JCM_CUDA(cudaEventRecord(event, stream));
  return ffi::Error::Success();
}

size_t timer_event_count(int device) {
  TimerEvents& t = per_process<TimerEvents>();
  std::lock_guard<std::mutex> lock(t.mu);
  size_t n = 0;
  for (const auto& entry : t.slots) n += entry.second.device == device;
  auto it = t.free.find(device);
  return n + (it == t.free.end() ? 0 : it->second.size());
}

std::optional<float> timer_elapsed_ms(int64_t start_slot, int64_t end_slot) {
  TimerEvents& t = per_process<TimerEvents>();
  TimerEvents::Slot start, end;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    auto a = t.slots.find(start_slot), b = t.slots.find(end_slot);
    if (a == t.slots.end() || b == t.slots.end()) return std::nullopt;
    start = a->second;
    end = b->second;
  }
  // A failure of any step means no measurement (nullopt), which is what the caller handles.
  ScopedDevice scoped(end.device);
  float ms = 0;
  bool ok = scoped.status().success() && cudaEventSynchronize(end.event) == cudaSuccess &&
            cudaEventElapsedTime(&ms, start.event, end.event) == cudaSuccess;
  if (!ok) return std::nullopt;
  return ms;
}

}  // namespace jcm

JCM_HANDLER(jcm_timer_stamp, timer_stamp_handler,
            xla::ffi::Ffi::Bind()
                .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                .Ctx<xla::ffi::DeviceOrdinal>()
                .RemainingArgs()  // operands, passed through
                .RemainingRets()  // the same, aliased
                .Attr<int64_t>("slot"));
