// One-launch Cholesky kernels for batches of small matrices (n <= kCholeskySmallMaxN), the
// matrix in shared memory, one thread block per matrix (up to kCholeskyTinyMaxN, and for potrs
// kCholeskyTinyMaxRhs right-hand sides, one thread per matrix, in registers): the batched path
// of potrf and potrs there, in place of cuSOLVER's potrfBatched / JAX's two batched triangular
// solves.
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/limits.h"  // the kernels' limits: kCholeskySmallMaxN, kCholeskySmallMaxRhs

namespace jcm {

// For `count` column-major n x n matrices (a, stride n * n): the Cholesky factor of the
// Hermitian matrix that a's `lower` (else upper) triangle defines, LAPACK ?potrf's steps, the
// other triangle of a never read. Writes out = L (lower: A = L L^H) or U (upper: A = U^H U) with
// the other triangle zero; where a leading minor is not positive definite (a pivot <= 0 or NaN),
// the factor's triangle is NaN: what jax.lax.linalg.cholesky and jax.scipy.linalg.cho_factor
// return. out may not alias a.
template <typename T>
cudaError_t potrf_small_batched(cudaStream_t stream, int64_t count, int64_t n, bool lower,
                                const T* a, T* out);

// For `count` systems A X = B from potrf_small_batched's factor c (A = L L^H with L c's lower
// triangle, or A = U^H U with U its upper one; the other triangle never read), n <=
// kCholeskySmallMaxN, column-major n x nrhs B with nrhs <= kCholeskySmallMaxRhs: the two
// triangular solves of ?potrs, c in shared memory, one warp per right-hand side. x may alias b.
template <typename T>
cudaError_t potrs_small_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                                bool lower, const T* c, const T* b, T* x);

}  // namespace jcm
