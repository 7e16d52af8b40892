// A one-launch triangular solve for batches of small matrices (n <= kTrsmSmallMaxN): the batched
// path of trsm there, in place of cuBLAS trsmBatched (JAX's lowering of
// lax.linalg.triangular_solve), which builds pointer arrays and launches per call several times
// over.
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/limits.h"  // the kernel's limits: kTrsmSmallMaxN, kTrsmSmallMaxRhs

namespace jcm {

// How a triangular solve reads its matrix: op(A) = A, A^T or A^H (cuBLAS's N, T and C).
enum class TrsmOp : int { kNone = 0, kTranspose = 1, kAdjoint = 2 };

// For `count` systems op(A) X = B: column-major n x n A (its `lower`, else upper, triangle read;
// a `unit` diagonal never read), column-major n x nrhs B, n <= kTrsmSmallMaxN and nrhs <=
// kTrsmSmallMaxRhs. A in shared memory, one warp per right-hand side. x may alias b.
template <typename T>
cudaError_t trsm_small_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                               bool lower, TrsmOp op, bool unit, const T* a, const T* b, T* x);

}  // namespace jcm
