// Batched Householder QR kernels for small matrices: LAPACK ?geqr2 and ?org2r / ?ung2r step by
// step, one thread block per matrix, the whole batch in one launch. cuSOLVER's geqrf / orgqr
// per matrix are launch- and host-bound at small n (H100 float32 qr 64x128: 18 ms on 16 lanes,
// 50 ms on one stream, JAX's geqrfBatched + looped orgqr 9.8 ms) for a few MFLOP of work.
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/limits.h"  // the kernels' limit: kQrKernelMaxN (columns)

namespace jcm {

// `count` column-major m x n matrices factored in place as LAPACK ?geqr2: R on and above the
// diagonal, the Householder vectors below it, tau (count x min(m, n)).
template <typename T>
cudaError_t geqr2_batched(cudaStream_t stream, int64_t count, int64_t m, int64_t n, T* a, T* tau);

// The first n columns of Q = H(1) ... H(k) in place of the reflectors (m x n, column-major), as
// LAPACK ?org2r / ?ung2r; tau is count x k.
template <typename T>
cudaError_t org2r_batched(cudaStream_t stream, int64_t count, int64_t m, int64_t n, int64_t k,
                          T* a, const T* tau);

// C := op(Q) C (left) or C op(Q) (right) in place, Q = H(1) ... H(k) given by k reflectors
// (a: r x k column-major, r = m on the left, n on the right), as LAPACK ?orm2r / ?unm2r;
// op(Q) = Q^H if `adjoint` (Q^T for real). C is m x n, column-major; the dimension of C that
// the reflectors do not run along (n on the left, m on the right) must be <= kQrKernelMaxN.
template <typename T>
cudaError_t orm2r_batched(cudaStream_t stream, int64_t count, bool left, bool adjoint, int64_t m,
                          int64_t n, int64_t k, const T* a, const T* tau, T* c);

}  // namespace jcm
