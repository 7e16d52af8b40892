// Typed interface to cuSOLVER/cuBLAS: solver_api<T> maps an element type to its S/D/C/Z routines,
// and routine_name<T>() rebuilds the library's own name for error messages. No FFI types here.
#pragma once

#include <cuComplex.h>
#include <cublas_v2.h>
#include <cusolverDn.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

namespace jcm {

template <typename T>
struct solver_api;

// A routine and its workspace query: name (solver_api<T>::name) and name_buffer_size.
#define JCM_WITH_BUFFER_SIZE(name, routine)                       \
  static constexpr auto name##_buffer_size = routine##_bufferSize; \
  static constexpr auto name = routine;

// One block per element type; adding a routine adds one line to the macro. R is the real type of
// the same precision (eigenvalues, singular values), C the complex one (a general matrix's
// eigenvalues), DT the cudaDataType (the 64-bit generic API, cusolverDnX...). ORG/ORM name the
// orthogonal (real) or unitary (complex) Householder routines: orgqr/ungqr, ormqr/unmqr; EVJ the
// symmetric (real) or Hermitian (complex) Jacobi eigensolver: syevj/heevj; GVD the generalized
// divide-and-conquer one: sygvd/hegvd.
#define JCM_SOLVER_API(T, L, R, C, DT, ORG, ORM, EVJ, GVD)                    \
  template <>                                                                 \
  struct solver_api<T> {                                                      \
    using real = R;                                                           \
    using complex = C;                                                        \
    static constexpr cudaDataType kDataType = DT;                             \
    static constexpr char kLetter = #L[0];                                    \
    static constexpr const char* kOrgqr = #ORG;                               \
    static constexpr const char* kOrmqr = #ORM;                               \
    static constexpr const char* kSyevj = #EVJ;                               \
    static constexpr const char* kSygvd = #GVD;                               \
    JCM_WITH_BUFFER_SIZE(getrf, cusolverDn##L##getrf)                         \
    static constexpr auto getrs = cusolverDn##L##getrs;                       \
    static constexpr auto getrf_batched = cublas##L##getrfBatched;            \
    static constexpr auto getrs_batched = cublas##L##getrsBatched;            \
    JCM_WITH_BUFFER_SIZE(potrf, cusolverDn##L##potrf)                         \
    static constexpr auto potrs = cusolverDn##L##potrs;                       \
    static constexpr auto potrf_batched = cusolverDn##L##potrfBatched;        \
    static constexpr auto potrs_batched = cusolverDn##L##potrsBatched;        \
    JCM_WITH_BUFFER_SIZE(geqrf, cusolverDn##L##geqrf)                         \
    JCM_WITH_BUFFER_SIZE(orgqr, cusolverDn##L##ORG)                           \
    JCM_WITH_BUFFER_SIZE(ormqr, cusolverDn##L##ORM)                           \
    JCM_WITH_BUFFER_SIZE(sytrf, cusolverDn##L##sytrf)                         \
    JCM_WITH_BUFFER_SIZE(syevj, cusolverDn##L##EVJ)                           \
    JCM_WITH_BUFFER_SIZE(sygvd, cusolverDn##L##GVD)                           \
    JCM_WITH_BUFFER_SIZE(gesvdj, cusolverDn##L##gesvdj)                       \
    static constexpr auto trsm = cublas##L##trsm;                             \
    static constexpr auto trsm_batched = cublas##L##trsmBatched;              \
    static constexpr auto gemm_strided_batched = cublas##L##gemmStridedBatched; \
  };

JCM_SOLVER_API(float, S, float, cuComplex, CUDA_R_32F, orgqr, ormqr, syevj, sygvd)
JCM_SOLVER_API(double, D, double, cuDoubleComplex, CUDA_R_64F, orgqr, ormqr, syevj, sygvd)
JCM_SOLVER_API(cuComplex, C, float, cuComplex, CUDA_C_32F, ungqr, unmqr, heevj, hegvd)
JCM_SOLVER_API(cuDoubleComplex, Z, double, cuDoubleComplex, CUDA_C_64F, ungqr, unmqr, heevj,
               hegvd)
#undef JCM_SOLVER_API
#undef JCM_WITH_BUFFER_SIZE

template <typename T>
using real_t = typename solver_api<T>::real;
template <typename T>
using complex_t = typename solver_api<T>::complex;

// The cudaDataType of an element type (or of its real or complex type), for the 64-bit API.
template <typename T>
constexpr cudaDataType cuda_data_type() {
  return solver_api<T>::kDataType;
}

template <typename T>
inline constexpr bool is_complex_v = std::is_same_v<T, complex_t<T>>;

// A real number as an element type (cuBLAS's alpha / beta).
template <typename T>
T scalar_of(double x) {
  if constexpr (is_complex_v<T>) {
    return T{static_cast<real_t<T>>(x), 0};
  } else {
    return static_cast<T>(x);
  }
}

// A workspace-cache key for a call shape: the element type's letter, then the dims ("S:64:64").
template <typename T>
std::string shape_key(std::initializer_list<int64_t> dims) {
  std::string key(1, solver_api<T>::kLetter);
  for (int64_t d : dims) key += ":" + std::to_string(d);
  return key;
}

inline cublasFillMode_t fill_mode(bool lower) {
  return lower ? CUBLAS_FILL_MODE_LOWER : CUBLAS_FILL_MODE_UPPER;
}

// routine_name<float>("cusolverDn", "getrf") == "cusolverDnSgetrf".
template <typename T>
std::string routine_name(const char* library, const char* routine) {
  return std::string(library) + solver_api<T>::kLetter + routine;
}

}  // namespace jcm
