// _jcm_limits: the extension's limits (core/limits.h) and settings (core/settings.h) for Python.
// No CUDA: it imports where the CUDA module _jcm_ffi cannot (a machine without the CUDA
// libraries), so Python's strategy code reads the one definition everywhere.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <optional>
#include <string>

#include "core/limits.h"
#include "core/settings.h"

namespace nb = nanobind;

namespace {

using jcm::Strategy;
using jcm::limits::Routine;

std::optional<Routine> routine_of(const std::string& name) {
  for (const auto& l : jcm::limits::kRoutines) {
    if (name == l.name) return l.routine;
  }
  return std::nullopt;
}

std::optional<Strategy> strategy_of(const std::string& name) {
  for (int i = 0; i < jcm::kStrategyCount; ++i) {
    if (name == jcm::kStrategyNames[i]) return static_cast<Strategy>(i);
  }
  return std::nullopt;
}

Routine checked_routine(const std::string& name) {
  auto r = routine_of(name);
  if (!r) throw nb::value_error(("unknown routine " + name).c_str());
  return *r;
}

nb::dict strategies() {
  nb::dict out;
  for (int i = 0; i < jcm::kStrategyCount; ++i) {
    nb::dict s;
    s["value"] = i;
    s["lanes"] = jcm::strategy_uses_lanes(static_cast<Strategy>(i));
    out[jcm::kStrategyNames[i]] = s;
  }
  return out;
}

nb::dict routines() {
  nb::dict out;
  for (const auto& l : jcm::limits::kRoutines) {
    nb::list names;
    for (int i = 0; i < jcm::kStrategyCount; ++i) {
      const Strategy s = static_cast<Strategy>(i);
      if ((s != Strategy::kBatched || l.batched[0]) && (s != Strategy::kBlocked || l.blocked[0])) {
        names.append(jcm::kStrategyNames[i]);
      }
    }
    nb::dict d;
    d["strategies"] = nb::tuple(names);
    d["batched"] = l.batched;
    d["batched_max_n"] = l.batched_max_n;
    d["batched_square_only"] = l.batched_square_only;
    d["batched_max_nrhs"] = l.batched_max_nrhs;
    d["blocked"] = l.blocked;
    d["blocked_square_only"] = l.blocked_square_only;
    d["blocked_oblong_only"] = l.blocked_oblong_only;
    d["lower_only"] = l.lower_only;
    d["small_max_n"] = l.small_max_n;
    d["small_max_nrhs"] = l.small_max_nrhs;
    d["small_writes_nan"] = l.small_writes_nan;
    nb::list int_sized;
    for (int i = 0; i < jcm::kStrategyCount; ++i) {
      if (jcm::limits::int_sizes(l.routine, static_cast<Strategy>(i))) {
        int_sized.append(jcm::kStrategyNames[i]);
      }
    }
    d["int_sizes"] = nb::tuple(int_sized);
    out[l.name] = d;
  }
  return out;
}

nb::dict constants() {
  namespace L = jcm::limits;
  nb::dict out;
  out["max_lanes"] = L::kMaxLanesPerDevice;
  out["getrf_small_max_n"] = L::kGetrfSmallMaxN;
  out["getrs_small_max_nrhs"] = L::kGetrsSmallMaxRhs;
  out["lu_tiny_max_n"] = L::kLuTinyMaxN;
  out["lu_tiny_max_nrhs"] = L::kLuTinyMaxRhs;
  out["lu_block"] = L::kLuBlock;
  out["lu_max_block"] = L::kLuMaxBlock;
  out["cholesky_small_max_n"] = L::kCholeskySmallMaxN;
  out["cholesky_small_max_nrhs"] = L::kCholeskySmallMaxRhs;
  out["cholesky_tiny_max_n"] = L::kCholeskyTinyMaxN;
  out["cholesky_tiny_max_nrhs"] = L::kCholeskyTinyMaxRhs;
  out["cholesky_block"] = L::kCholeskyBlock;
  out["qr_kernel_max_n"] = L::kQrKernelMaxN;
  out["ldl_kernel_max_n"] = L::kLdlKernelMaxN;
  out["ldl_warp_max_n"] = L::kLdlWarpMaxN;
  out["ldl_small_block_max_n"] = L::kLdlSmallBlockMaxN;
  out["ldl_max_block"] = L::kLdlMaxBlock;
  out["ldl_solve_max_block"] = L::kLdlSolveMaxBlock;
  out["syevj_kernel_max_n"] = L::kSyevjKernelMaxN;
  out["syevj_tiny_max_n"] = L::kSyevjTinyMaxN;
  out["gesvdj_kernel_max_n"] = L::kGesvdjKernelMaxN;
  out["gesvdj_tiny_max_n"] = L::kGesvdjTinyMaxN;
  out["geev_tiny_max_n"] = L::kGeevTinyMaxN;
  out["qr_tiny_max_n"] = L::kQrTinyMaxN;
  out["oblong_min_aspect"] = L::kOblongMinAspect;
  out["ldl_solve_rhs_per_block"] = L::kLdlSolveRhsPerBlock;
  out["matmul_max_algorithm"] = L::kMatmulMaxAlgorithm;
  out["int_max"] = L::kIntMax;
  out["max_grid_x"] = L::kMaxGridX;
  out["max_grid_y"] = L::kMaxGridY;
  return out;
}

nb::dict knobs() {
  nb::dict out;
  for (const jcm::Knob* k : jcm::kKnobs) {
    nb::dict d;
    d["default"] = k->fallback;
    d["min"] = k->lo;
    d["max"] = k->hi;
    d["meaning"] = k->meaning;
    out[k->name] = d;
  }
  return out;
}

}  // namespace

NB_MODULE(_jcm_limits, m) {
  m.doc() = "The limits of jax_cusolver_ms's CUDA extension (ffi/core/limits.h), without CUDA.";
  m.def("strategies", &strategies,
        "{name: {'value': the FFI attribute's value, 'lanes': whether it runs on lanes}}, in "
        "the order of the values.");
  m.def("routines", &routines,
        "{routine: {'strategies': names it can run, 'batched' / 'blocked': what they run ('' "
        "for none), 'batched_max_n' (0: any), 'batched_square_only', 'batched_max_nrhs' (0: "
        "any), 'blocked_square_only', 'blocked_oblong_only', 'lower_only', 'small_max_n' (0: "
        "no small kernel), 'small_max_nrhs' (0: any), 'small_writes_nan', 'int_sizes': the "
        "strategies that pass its sizes on as int}}.");
  m.def("constants", &constants, "{name: value} of every kernel limit and block size.");
  m.def("knobs", &knobs,
        "{JCM_* environment variable: {'default', 'min', 'max', 'meaning'}}: the settings the "
        "extension reads.");
  m.def(
      "infeasible",
      [](const std::string& routine, const std::string& strategy, int64_t m, int64_t n,
         int64_t nrhs, bool lower, bool left, int64_t batch) -> std::optional<std::string> {
        auto s = strategy_of(strategy);
        if (!s) throw nb::value_error(("unknown strategy " + strategy).c_str());
        const char* why = jcm::limits::infeasible(checked_routine(routine), *s,
                                                  {m, n, nrhs, lower, left, batch});
        if (why == nullptr) return std::nullopt;
        return std::string(why);
      },
      nb::arg("routine"), nb::arg("strategy"), nb::arg("m"), nb::arg("n"), nb::arg("nrhs") = 0,
      nb::arg("lower") = true, nb::arg("left") = true, nb::arg("batch") = 1,
      "Why `strategy` cannot run `routine` on `batch` m x n matrices (ormqr: C) through its FFI "
      "target, or None where it can.");
  m.def(
      "small_kernel",
      [](const std::string& routine, int64_t m, int64_t n, int64_t nrhs, int64_t batch) {
        return jcm::limits::small_kernel(checked_routine(routine),
                                         {m, n, nrhs, true, true, batch});
      },
      nb::arg("routine"), nb::arg("m"), nb::arg("n"), nb::arg("nrhs") = 0, nb::arg("batch") = 1,
      "Whether the batched strategy of `routine` runs its one-launch small-matrix kernel here.");
}
