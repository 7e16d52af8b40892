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

// One block per element type; adding a routine adds one line to the macro. ORG/ORM name the
// orthogonal (real) or unitary (complex) Householder routines: orgqr/ungqr, ormqr/unmqr; EVJ the
// symmetric (real) or Hermitian (complex) Jacobi eigensolver: syevj/heevj.
#define JCM_SOLVER_API(T, L, ORG, ORM, EVJ)                                         \
  template <>                                                                       \
  struct solver_api<T> {                                                            \
    static constexpr char kLetter = #L[0];                                          \
    static constexpr const char* kOrgqr = #ORG;                                     \
    static constexpr const char* kOrmqr = #ORM;                                     \
    static constexpr const char* kSyevj = #EVJ;                                     \
    static constexpr auto getrf_buffer_size = cusolverDn##L##getrf_bufferSize;      \
    static constexpr auto getrf = cusolverDn##L##getrf;                             \
    static constexpr auto getrs = cusolverDn##L##getrs;                             \
    static constexpr auto getrf_batched = cublas##L##getrfBatched;                  \
    static constexpr auto getrs_batched = cublas##L##getrsBatched;                  \
    static constexpr auto potrf_buffer_size = cusolverDn##L##potrf_bufferSize;      \
    static constexpr auto potrf = cusolverDn##L##potrf;                             \
    static constexpr auto potrs = cusolverDn##L##potrs;                             \
    static constexpr auto potrf_batched = cusolverDn##L##potrfBatched;              \
    static constexpr auto potrs_batched = cusolverDn##L##potrsBatched;              \
    static constexpr auto geqrf_buffer_size = cusolverDn##L##geqrf_bufferSize;      \
    static constexpr auto geqrf = cusolverDn##L##geqrf;                             \
    static constexpr auto orgqr_buffer_size = cusolverDn##L##ORG##_bufferSize;      \
    static constexpr auto orgqr = cusolverDn##L##ORG;                               \
    static constexpr auto ormqr_buffer_size = cusolverDn##L##ORM##_bufferSize;      \
    static constexpr auto ormqr = cusolverDn##L##ORM;                               \
    static constexpr auto sytrf_buffer_size = cusolverDn##L##sytrf_bufferSize;      \
    static constexpr auto sytrf = cusolverDn##L##sytrf;                             \
    static constexpr auto syevj_buffer_size = cusolverDn##L##EVJ##_bufferSize;      \
    static constexpr auto syevj = cusolverDn##L##EVJ;                               \
    static constexpr auto gesvdj_buffer_size = cusolverDn##L##gesvdj_bufferSize;    \
    static constexpr auto gesvdj = cusolverDn##L##gesvdj;                           \
    static constexpr auto trsm = cublas##L##trsm;                                   \
    static constexpr auto trsm_batched = cublas##L##trsmBatched;                    \
    static constexpr auto gemm_strided_batched = cublas##L##gemmStridedBatched;     \
  };

JCM_SOLVER_API(float, S, orgqr, ormqr, syevj)
JCM_SOLVER_API(double, D, orgqr, ormqr, syevj)
JCM_SOLVER_API(cuComplex, C, ungqr, unmqr, heevj)
JCM_SOLVER_API(cuDoubleComplex, Z, ungqr, unmqr, heevj)
#undef JCM_SOLVER_API

// The cudaDataType of an element type, for the 64-bit generic API (cusolverDnX...).
template <typename T>
constexpr cudaDataType cuda_data_type();
template <>
constexpr cudaDataType cuda_data_type<float>() { return CUDA_R_32F; }
template <>
constexpr cudaDataType cuda_data_type<double>() { return CUDA_R_64F; }
template <>
constexpr cudaDataType cuda_data_type<cuComplex>() { return CUDA_C_32F; }
template <>
constexpr cudaDataType cuda_data_type<cuDoubleComplex>() { return CUDA_C_64F; }

// The real type of an element type (eigenvalues, singular values) and its cudaDataType; and
// the complex type of the same precision (eigenvalues of a general matrix).
template <typename T>
struct real_of;
template <>
struct real_of<float> { using type = float; };
template <>
struct real_of<double> { using type = double; };
template <>
struct real_of<cuComplex> { using type = float; };
template <>
struct real_of<cuDoubleComplex> { using type = double; };
template <typename T>
using real_t = typename real_of<T>::type;

template <typename T>
struct complex_of;
template <>
struct complex_of<float> { using type = cuComplex; };
template <>
struct complex_of<double> { using type = cuDoubleComplex; };
template <>
struct complex_of<cuComplex> { using type = cuComplex; };
template <>
struct complex_of<cuDoubleComplex> { using type = cuDoubleComplex; };
template <typename T>
using complex_t = typename complex_of<T>::type;

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
