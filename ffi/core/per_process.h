// Process-wide state that survives os.fork(): a forked child gets a fresh, empty object. The
// parent's may hold mutexes locked by threads that do not exist in the child, and streams,
// handles and events of a CUDA context the child cannot use, so the child leaks it untouched.
#pragma once

#include <pthread.h>

#include <atomic>

namespace jcm {

// The process's T, created on first use; replaced by a new T in a forked child.
template <typename T>
T& per_process() {
  static std::atomic<T*> current{nullptr};
  static const bool registered = [] {
    current.store(new T(), std::memory_order_release);
    // Runs in the child only, single-threaded. Failure to register leaves fork unprotected, which
    // is no worse than without it, so its status is not an error.
    pthread_atfork(nullptr, nullptr, [] { current.store(new T(), std::memory_order_release); });
    return true;
  }();
  (void)registered;
  return *current.load(std::memory_order_acquire);
}

}  // namespace jcm
