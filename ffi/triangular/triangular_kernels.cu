#include "triangular/triangular_kernels.h"

#include <climits>
#include <cstdint>

#include "core/kernel_util.cuh"

namespace jcm {

using limits::kTrsmSmallMaxN;
using limits::kTrsmSmallMaxRhs;

namespace {

using namespace kernel;

// One block per system: A to shared memory, then each warp solves its right-hand sides with the
// rows in registers (kernel_util.cuh warp_solve_columns). op(A) is lower triangular where A's
// lower triangle is read untransposed or its upper one transposed. x may alias b.
template <typename T>
__global__ void __launch_bounds__(kMaxThreads)
    trsm_small_kernel(int n, int nrhs, bool lower, TrsmOp op, bool unit, const T* a_all,
                      const T* b_all, T* x_all) {
  const BlockSystem<T> sys = load_block_system(n, nrhs, a_all, b_all, x_all);
  auto entry = [&](int i, int k) {
    switch (op) {
      case TrsmOp::kNone: return sys.factor[i + k * n];
      case TrsmOp::kTranspose: return sys.factor[k + i * n];
      default: return conj_of(sys.factor[k + i * n]);
    }
  };
  const bool solves_lower = lower == (op == TrsmOp::kNone);
  warp_solve_columns(n, nrhs, sys, [&](T(&y)[2]) {
    if (solves_lower) {
      warp_solve_lower(n, y, entry, unit);
    } else {
      warp_solve_upper(n, y, entry, unit);
    }
  });
}

}  // namespace

template <typename T>
cudaError_t trsm_small_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                               bool lower, TrsmOp op, bool unit, const T* a, const T* b, T* x) {
  using D = typename device_type<T>::type;
  if (count <= 0 || n <= 0 || nrhs <= 0) return cudaSuccess;
  if (n > kTrsmSmallMaxN || nrhs > kTrsmSmallMaxRhs || count > INT32_MAX) {
    return cudaErrorInvalidValue;
  }
  const int threads = 32 * static_cast<int>(nrhs < kMaxThreads / 32 ? nrhs : kMaxThreads / 32);
  const size_t smem = static_cast<size_t>(n * n) * sizeof(D);
  if (cudaError_t err = allow_shared(trsm_small_kernel<D>, smem); err != cudaSuccess) return err;
  trsm_small_kernel<D><<<static_cast<unsigned>(count), threads, smem, stream>>>(
      static_cast<int>(n), static_cast<int>(nrhs), lower, op, unit,
      reinterpret_cast<const D*>(a), reinterpret_cast<const D*>(b), reinterpret_cast<D*>(x));
  return cudaGetLastError();
}

#define JCM_TRIANGULAR_KERNELS(T)                                                            \
  template cudaError_t trsm_small_batched<T>(cudaStream_t, int64_t, int64_t, int64_t, bool,  \
                                             TrsmOp, bool, const T*, const T*, T*);
JCM_TRIANGULAR_KERNELS(float)
JCM_TRIANGULAR_KERNELS(double)
JCM_TRIANGULAR_KERNELS(cuComplex)
JCM_TRIANGULAR_KERNELS(cuDoubleComplex)
#undef JCM_TRIANGULAR_KERNELS

}  // namespace jcm
