// Batched kernels of the blocked LU (lu_handlers.cc getrf_blocked): LAPACK ?getf2 on one panel of
// every matrix in one launch, and ?laswp of that panel's interchanges over the other columns.
// cuBLAS getrfBatched takes square matrices only, so it cannot factor a tall panel.
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/limits.h"  // the kernels' limits (kGetrfSmallMaxN, ...)

namespace jcm {

// For `count` column-major n x n matrices (a, stride n * n): ?getf2 with partial pivoting on the
// panel A(j0:n, j0:j0+jb) of each, in place (unit-lower L below the diagonal, U on and above);
// the rows swapped within the panel only. Pivots 1-based in the whole matrix's numbering into
// ipiv[j0:j0+jb) of each (count x n); info = the first zero pivot's column (1-based) where it is
// still 0. `threads` per matrix: a multiple of 32 up to 1024.
template <typename T>
cudaError_t getf2_panel_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t j0,
                                int64_t jb, T* a, int* ipiv, int* info, int threads);

// The panel's interchanges (rows k and ipiv[k] - 1 for k in [j0, j0 + jb), in order) applied to
// every column of each matrix outside the panel.
template <typename T>
cudaError_t laswp_outside_panel_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t j0,
                                        int64_t jb, T* a, const int* ipiv);

// For `count` column-major n x n matrices (a, stride n * n; n <= kGetrfSmallMaxN): LU with
// partial pivoting (LAPACK ?getrf's pivots, ties and arithmetic), one thread block per matrix in
// shared memory (one thread per matrix, in registers, for n <= kLuTinyMaxN), one launch in all.
// Writes lu (P A = L U, unit-lower L below the diagonal), the 0-based pivots (row k swapped with
// pivots[k]) and the permutation (A[permutation] = L U), as jax.lax.linalg.lu returns them. A matrix holding NaN or Inf gives NaN in lu and the identity
// pivots, and touches no other matrix. lu must not alias a.
template <typename T>
cudaError_t getrf_small_batched(cudaStream_t stream, int64_t count, int64_t n, const T* a, T* lu,
                                int* pivots, int* permutation);

// For `count` systems op(A) X = B from getrf_small_batched's output (lu, 0-based pivots; n <=
// kGetrfSmallMaxN, column-major n x nrhs B with nrhs <= kGetrsSmallMaxRhs), op = A (trans 0), A^T
// (1) or A^H (2): LAPACK ?getrs's steps in one launch, one block per system, L U and B in shared
// memory, a warp per right-hand side (one thread per system, in registers, for n <= kLuTinyMaxN
// and nrhs <= kLuTinyMaxRhs). x may alias b.
template <typename T>
cudaError_t getrs_small_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                                int trans, const T* lu, const int* pivots, const T* b, T* x);

}  // namespace jcm
