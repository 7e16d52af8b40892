// Batched one-sided Jacobi SVD for small matrices: one thread block per matrix (one thread per
// square matrix, in registers, up to kGesvdjTinyMaxN), the whole batch in one launch. JAX's
// lowering (gesvdjBatched for batches of matrices up to 32 x 32, gesvdj one matrix after another
// above) is launch- and host-bound there (H100 float32 svd, JAX: 1x16 0.50 ms, 4x16 0.17 ms,
// 256x32 0.31 ms) for a few kFLOP a matrix. Up to 128 rows and columns, so that it also takes
// the R factors of the QR-first SVD of tall matrices (svd.py _svd_qr_first).
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/limits.h"  // the kernel's limit: kGesvdjKernelMaxN (m and n)

namespace jcm {

// For `count` column-major m x n matrices in `a` (stride m * n), k = min(m, n): the singular
// values descending into s (count x k) and, when u and v are not null, U (m x (econ ? k : m))
// and V itself, not V^H (n x (econ ? k : n)), column-major. Hestenes' one-sided Jacobi on the
// columns of A (or of A^H for a wide A), scaled by a power of two, in the parallel
// (round-robin) order, until every pair of columns is orthogonal to 2 sqrt(rows) eps relative to
// their norms: singular values to high relative accuracy. U's columns for zero singular values
// (and past k with full U) complete an orthonormal basis. A matrix holding NaN or Inf, or one
// that took more than the sweep limit (info k + 1, as gesvdj; else 0), gets NaN in every output,
// and no other matrix is touched.
template <typename T, typename R>
cudaError_t gesvdj_small_batched(cudaStream_t stream, int64_t count, int64_t m, int64_t n,
                                 bool econ, const T* a, R* s, T* u, T* v, int* info, void* work);

// The global memory `work` of gesvdj_small_batched must hold for `count` matrices: none where the
// matrix (and V, with vectors) fit in this device's shared memory, else their copies.
template <typename T>
size_t gesvdj_small_workspace_bytes(int64_t count, int64_t m, int64_t n, bool vectors);

}  // namespace jcm
