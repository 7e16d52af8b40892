// The general eigendecomposition of tiny matrices (n <= limits::kGeevTinyMaxN), a thread per
// matrix, the whole batch in one launch. cuSOLVER has no batched geev: JAX calls Xgeev once per
// matrix (H100 table: 16 matrices of 2 x 2 float32 in 8.9 ms, 1024 complex64 in 550 ms),
// host-bound for a few hundred flops a matrix.
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/limits.h"  // the kernel's limit: kGeevTinyMaxN

namespace jcm {

// For `count` column-major n x n matrices in `a` (stride n * n): the eigenvalues into w (count x
// n) and, where vr is not null, the right eigenvectors into vr (count x n x n, a's dtype), as
// LAPACK's ?geev gives them: unit 2-norm, the largest-magnitude component real; for real a, a
// conjugate pair in adjacent places (positive imaginary part first) whose vector's real and
// imaginary parts fill the pair's two columns. The method: Hessenberg form by Givens rotations,
// complex QR iteration with Wilkinson shifts and ?lahqr's deflation test, the triangular
// factor's eigenvectors by back substitution (?trevc), all on the matrix scaled by a power of
// two. A matrix holding NaN or Inf (info 0) or whose iteration did not converge (info 1; else
// 0) gets NaN in all of its outputs, and no other matrix is touched.
template <typename T, typename C>
cudaError_t geev_tiny_batched(cudaStream_t stream, int64_t count, int64_t n, const T* a, C* w,
                              T* vr, int* info);

}  // namespace jcm
