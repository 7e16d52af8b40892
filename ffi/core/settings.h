// The JCM_* environment variables the extension reads, and the one function that reads them. Each
// is read once per process, on first use. No CUDA types: _jcm_limits lists them (knobs()).
#pragma once

#include <cstdint>
#include <cstdlib>

#include "core/limits.h"

namespace jcm {

// One integer setting: `name` when set to a value in [lo, hi], else `fallback`.
struct Knob {
  const char* name;
  int64_t fallback, lo, hi;
  const char* meaning;
};

inline constexpr Knob kLuBlockKnob{"JCM_LU_BLOCK", limits::kLuBlock, 8, limits::kLuMaxBlock,
                                   "panel width of the blocked LU (strategy blocked, getrf)"};
inline constexpr Knob kCholeskyBlockKnob{
    "JCM_CHOLESKY_BLOCK", limits::kCholeskyBlock, limits::kCholeskyMinBlock,
    limits::kCholeskyMaxBlock, "block size of the blocked Cholesky (strategy blocked, potrf)"};

inline constexpr const Knob* kKnobs[] = {&kLuBlockKnob, &kCholeskyBlockKnob};

// The value of an environment variable `name` in [lo, hi], else `fallback`: the one place the
// extension reads its environment (callers keep the result in a function-local static).
inline int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* env = std::getenv(name);
  if (env == nullptr) return fallback;
  const int64_t value = std::atoll(env);
  return value >= lo && value <= hi ? value : fallback;
}

inline int64_t read_knob(const Knob& knob) {
  return env_int(knob.name, knob.fallback, knob.lo, knob.hi);
}

// The blocked LU's panel width and the blocked Cholesky's block size.
inline int64_t lu_block() {
  static const int64_t block = read_knob(kLuBlockKnob);
  return block;
}
inline int64_t cholesky_block() {
  static const int64_t block = read_knob(kCholeskyBlockKnob);
  return block;
}

}  // namespace jcm
