// Typed interface to cuSOLVER/cuBLAS: solver_api<T> maps an element type to its S/D/C/Z routines,
// and routine_name<T>() rebuilds the library's own name for error messages. No FFI types here.
#pragma once

#include <cuComplex.h>
#include <cublas_v2.h>
#include <cusolverDn.h>

#include <string>

namespace jcm {

template <typename T>
struct solver_api;

// One block per element type; adding a routine adds one line to the macro.
#define JCM_SOLVER_API(T, L)                                          \
  template <>                                                         \
  struct solver_api<T> {                                              \
    static constexpr char kLetter = #L[0];                            \
    static constexpr auto getrf_buffer_size = cusolverDn##L##getrf_bufferSize; \
    static constexpr auto getrf = cusolverDn##L##getrf;               \
    static constexpr auto getrs = cusolverDn##L##getrs;               \
    static constexpr auto getrf_batched = cublas##L##getrfBatched;    \
    static constexpr auto getrs_batched = cublas##L##getrsBatched;    \
  };

JCM_SOLVER_API(float, S)
JCM_SOLVER_API(double, D)
JCM_SOLVER_API(cuComplex, C)
JCM_SOLVER_API(cuDoubleComplex, Z)
#undef JCM_SOLVER_API

// routine_name<float>("cusolverDn", "getrf") == "cusolverDnSgetrf".
template <typename T>
std::string routine_name(const char* library, const char* routine) {
  return std::string(library) + solver_api<T>::kLetter + routine;
}

}  // namespace jcm
