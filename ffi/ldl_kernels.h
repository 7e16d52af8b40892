// Batched LDL^T kernels: Bunch-Kaufman sytrf and sytrs for the lower triangle, one thread block
// per matrix. cuSOLVER has no batched LDL^T, and its sytrf / Xsytrs host-synchronise per column
// and per call (H100: ~9 ms for one 128x128 sytrf on a lane), so a batch of small matrices is
// dominated by latency that one kernel launch over the whole batch does not pay.
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace jcm {

// Largest n the kernels take: their shared-memory scratch is 2 n elements of the dtype.
inline constexpr int64_t kLdlKernelMaxN = 1024;

// Factors `count` column-major n x n matrices in place from their lower triangles, exactly as
// LAPACK ?sytf2 (UPLO = 'L', complex symmetric for complex T: no conjugation): the compact
// L and D in `a`, LAPACK's 1-based pivots (negative pairs for 2x2 blocks) in `ipiv` (count x n),
// and info[i] = the first k (1-based) with a zero column (D(k, k) = 0), else 0.
template <typename T>
cudaError_t sytrf_lower_batched(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                                int* info);

// Solves A X = B for `count` systems from sytrf_lower_batched's (or LAPACK's) factor and pivots,
// as LAPACK ?sytrs (UPLO = 'L'): b (count x n x nrhs, column-major) is overwritten with X.
// Pivots out of range are treated as no interchange (the caller NaNs such items).
template <typename T>
cudaError_t sytrs_lower_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                                const T* ld, const int64_t* ipiv, T* b);

}  // namespace jcm
