// Batched Jacobi eigensolver for small symmetric / Hermitian matrices: one thread block per
// matrix (one thread per matrix, in registers, up to kSyevjTinyMaxN), the whole batch in one
// launch. cuSOLVER's syevjBatched (JAX's lowering of eigh for
// batches of n <= 32) and syevj / syevd for a single matrix are launch- and host-bound there
// (H100 float32 eigh, JAX: 1x16 0.39 ms, 4x16 0.09 ms, 256x32 0.18 ms) for a few kFLOP a matrix.
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/limits.h"  // the kernel's limit: kSyevjKernelMaxN

namespace jcm {

// For `count` column-major n x n matrices in `a` (stride n * n; only the triangle `lower` names
// is read, the diagonal's imaginary part ignored, as LAPACK): the eigenvalues ascending into w
// (count x n) and the orthonormal eigenvectors (columns) in place of a. Cyclic Jacobi in the
// parallel (round-robin) order on the matrix scaled by a power of two, until the off-diagonal
// Frobenius norm is below machine epsilon times the matrix's. A matrix holding NaN or Inf in
// that triangle, or one that took more than the sweep limit (info n + 1, as syevj; else 0),
// gets NaN eigenvalues and eigenvectors, and no other matrix is touched.
template <typename T, typename R>
cudaError_t syevj_small_batched(cudaStream_t stream, int64_t count, int64_t n, bool lower, T* a,
                                R* w, int* info);

}  // namespace jcm
