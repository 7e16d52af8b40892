// Device-side timing for the benchmarks: an identity custom call that records a CUDA event on
// XLA's stream. Placed on the inputs and on the outputs of a jitted call, the data dependencies
// order it around the work; the host reads the elapsed time between two stamps afterwards.
#include <cuda_runtime_api.h>

#include <mutex>
#include <unordered_map>

#include "core/handler_util.h"
#include "core/handlers.h"
#include "core/status.h"
#include "core/timer.h"

namespace jcm {

namespace {

struct TimerEvents {
  std::mutex mu;
  std::unordered_map<int64_t, std::pair<int, cudaEvent_t>> events;  // slot -> (device, event)
};

TimerEvents& timer_events() {
  static auto* t = new TimerEvents();
  return *t;
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
    TimerEvents& t = timer_events();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.events.find(slot);
    if (it == t.events.end()) {
      JCM_CUDA(cudaEventCreate(&event));
      t.events[slot] = {device, event};
    } else {
      event = it->second.second;
    }
  }
  JCM_CUDA(cudaEventRecord(event, stream));
  return ffi::Error::Success();
}

std::optional<float> timer_elapsed_ms(int64_t start_slot, int64_t end_slot) {
  TimerEvents& t = timer_events();
  std::pair<int, cudaEvent_t> start, end;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    auto a = t.events.find(start_slot), b = t.events.find(end_slot);
    if (a == t.events.end() || b == t.events.end()) return std::nullopt;
    start = a->second;
    end = b->second;
  }
  int previous = 0;
  cudaGetDevice(&previous);
  cudaSetDevice(end.first);
  float ms = 0;
  bool ok = cudaEventSynchronize(end.second) == cudaSuccess &&
            cudaEventElapsedTime(&ms, start.second, end.second) == cudaSuccess;
  cudaSetDevice(previous);
  if (!ok) return std::nullopt;
  return ms;
}

}  // namespace jcm

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_timer_stamp, jcm::timer_stamp_handler,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Ctx<xla::ffi::DeviceOrdinal>()
                                  .RemainingArgs()  // operands, passed through
                                  .RemainingRets()  // the same, aliased
                                  .Attr<int64_t>("slot"));
