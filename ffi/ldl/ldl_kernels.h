// Batched LDL^T kernels: Bunch-Kaufman sytrf and sytrs for the lower triangle, one thread block
// per matrix. cuSOLVER has no batched LDL^T, and its sytrf / Xsytrs host-synchronise per column
// and per call (H100: ~9 ms for one 128x128 sytrf on a lane), so a batch of small matrices is
// dominated by latency that one kernel launch over the whole batch does not pay.
//
// The kernels, a translation unit each (ldl_device.cuh: their shared device code): the batched
// factor's ldl_warp_kernels.cu, ldl_small_block_kernels.cu and ldl_sytf2_kernels.cu (by n), the
// blocked factor's ?lasyf panels ldl_panel_kernels.cu (one block a matrix) and
// ldl_cluster_kernels.cu (a cluster of blocks), and the solves' ldl_solve_kernels.cu.
// ldl_handlers.cc drives them.
#pragma once

#include <cuComplex.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/limits.h"

namespace jcm {

// ---------------------------------------------------------------------------------------------
// Limits: what the kernels take
// ---------------------------------------------------------------------------------------------

// Defined once in core/limits.h (exported to Python): the factor kernel's n (?sytf2, 2 n
// elements of shared memory), the widest panel of the blocked factorization and of the blocked
// solve, the narrowest shared-memory panel, and the warp and small-block kernels' n.
using limits::kLdlKernelMaxN;
using limits::kLdlMaxBlock;
using limits::kLdlMinSharedBlock;
using limits::kLdlSolveMaxBlock;
using limits::kLdlSmallBlockMaxN;
using limits::kLdlWarpMaxN;

// ---------------------------------------------------------------------------------------------
// The measured-best choices (H100 timings of the whole call; the H100 report)
// ---------------------------------------------------------------------------------------------

// Warps of sytrf_small_block_batched at its largest n: 8 beat 16 and 32 at every batch (float64
// 256x32 0.053 / 0.079 / 0.100 ms, 256x64 0.152 / 0.201 / 0.232).
inline constexpr int kLdlSmallBlockWarps = 8;

// Panel width of the blocked factorization (narrower where that is what fits a panel in shared
// memory: lasyf_panel_width).
inline constexpr int64_t kLdlBlock = 32;

// GEMM block columns of the blocked factorization's trailing update: the lower triangle in few
// launches, little of the upper's wasted work (a single matrix takes its whole square at once).
inline constexpr int64_t kLdlUpdateBlock = 256;

// The cluster panel (sm_90): blocks a cluster at most (the portable cluster size), threads a
// block (a thread a row), and matrices a launch at most (float64 16x2048 24.5 -> 17.6 ms on
// clusters, but 64x1024 10.7 against 10.3 in global memory).
inline constexpr int kLdlClusterMaxRanks = 8;
inline constexpr int kLdlClusterThreads = 256;
inline constexpr int64_t kLdlClusterMaxCount = 16;

// Block width of the blocked solve: the widest its kernels take (2 n / nb launches a solve).
inline constexpr int64_t kLdlSolveBlock = kLdlSolveMaxBlock;

// Up to this many matrices the blocked solve takes ?sytrs2's route (two cuBLAS TRSMs a matrix);
// more take the blocked kernels (one launch over the batch a block).
inline constexpr int64_t kLdlSolveTrsmMaxCount = 4;

// ---------------------------------------------------------------------------------------------
// The kernels
// ---------------------------------------------------------------------------------------------

// Factors `count` column-major n x n matrices in place from their lower triangles, exactly as
// LAPACK ?sytf2 (UPLO = 'L', complex symmetric for complex T: no conjugation): the compact
// L and D in `a`, LAPACK's 1-based pivots (negative pairs for 2x2 blocks) in `ipiv` (count x n),
// and info[i] = the first k (1-based) with a zero column (D(k, k) = 0), else 0. `threads` per
// matrix (the factor kernels' block size): a multiple of 32 up to 1024.
template <typename T>
cudaError_t sytrf_lower_batched(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                                int* info, int threads);

// sytrf_lower_batched's factorization (the same steps in the same arithmetic: LAPACK's pivots,
// L and D) for n <= kLdlWarpMaxN: one warp per matrix, its rows in registers
// (ldl_warp_kernels.cu).
template <typename T>
cudaError_t sytrf_small_batched(cudaStream_t stream, int64_t count, int64_t n, T* a, int* ipiv,
                                int* info);

// sytrf_small_batched's factorization (the same pivots, L and D, to the bit) for n <=
// kLdlSmallBlockMaxN with one block per matrix, the matrix mirrored twice in shared memory and
// one barrier a step (ldl_small_block_kernels.cu), kLdlSmallBlockWarps warps.
template <typename T>
cudaError_t sytrf_small_block_batched(cudaStream_t stream, int64_t count, int64_t n, T* a,
                                      int* ipiv, int* info);

// The blocked factorization's pieces (ldl_handlers.cc sytrf_blocked drives them). One panel of
// LAPACK ?lasyf per matrix: matrix i continues from its column progress[i] and stops at column
// `target` or, when a 2x2 pivot straddles it, target + 1 (progress[i] is updated); pivots and info
// (kept where already set) in the whole matrix's numbering. w and l (count x n x (nb + 1) each)
// receive the trailing update's operands: A(target:, target:) -= L W^T over the lower triangle. The
// panel's L and W sit in shared memory where they fit (see lasyf_panel_width: one block's, or a
// cluster's), else in w and l (L2).
template <typename T>
cudaError_t lasyf_lower_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nb,
                                int64_t target, T* a, T* w, T* l, int* progress, int* ipiv,
                                int* info, int threads);

// The panel width for a panel whose rows start `rows` above the matrix's end, `count` matrices: nb
// where the panel runs on a cluster of blocks (sm_90, up to kLdlClusterMaxCount matrices whose
// one-block panel would be narrower than 16 columns, not fit at all, or take more rows than
// threads: its rows spread over several SMs' shared memory); else nb where its L and W
// (rows x (nb + 1) each) fit in a block's shared memory, else the widest of nb / 2, nb / 4, ...
// that fits (down to kLdlMinSharedBlock for few or small matrices, less narrow for more: each
// narrower panel adds a GEMM over every trailing matrix); else nb (the panel then runs in global
// memory, `threads` per matrix; in shared memory the launch picks its own block size).
template <typename T>
int64_t lasyf_panel_width(int64_t rows, int64_t nb, int64_t count);

// ?sytf2 on each matrix's trailing (n - start[i]) x (n - start[i]) part, start[i] >= n - m_max
// (m_max <= kLdlKernelMaxN): the blocked factorization's last columns.
template <typename T>
cudaError_t sytf2_lower_tail_batched(cudaStream_t stream, int64_t count, int64_t n,
                                     int64_t m_max, const int* start, T* a, int* ipiv, int* info,
                                     int threads);

// Solves A X = B for `count` systems from sytrf_lower_batched's (or LAPACK's) factor and pivots,
// as LAPACK ?sytrs (UPLO = 'L'): b (count x n x nrhs, column-major) is overwritten with X.
// Pivots out of range are treated as no interchange (the caller NaNs such items).
template <typename T>
cudaError_t sytrs_lower_batched(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                                const T* ld, const int64_t* ipiv, T* b);

// The blocked solve (ldl_handlers.cc sytrs_blocked drives it), LAPACK ?sytrs (UPLO = 'L') in blocks
// of nb <= kLdlSolveMaxBlock columns cut at k0 = 0, nb, 2 nb, ... Forward through block k0 on each
// matrix's rows of the block (b overwritten), y (count x (nb + 1) x nrhs) receiving the operand of
// the GEMM b(k0 + nb + 1:, :) -= L(k0 + nb + 1:, k0:k0 + nb + 1) y that follows it (when k0 + nb +
// 1 < n).
template <typename T>
cudaError_t sytrs_lower_blocked_forward(cudaStream_t stream, int64_t count, int64_t n,
                                        int64_t nrhs, int64_t nb, int64_t k0, const T* ld,
                                        const int64_t* ipiv, T* b, T* y);

// D^-1 and back through block k0, after the forward pass and the blocks after k0: has_t says
// that t (count x (nb + 1) x nrhs) holds L(k0 + nb + 1:, k0:k0 + nb + 1)^T b(k0 + nb + 1:, :).
template <typename T>
cudaError_t sytrs_lower_blocked_backward(cudaStream_t stream, int64_t count, int64_t n,
                                         int64_t nrhs, int64_t nb, int64_t k0, bool has_t,
                                         const T* ld, const int64_t* ipiv, T* b, const T* t);

// The TRSM-based solve's pieces (LAPACK ?sytrs2, UPLO = 'L'; ldl_handlers.cc sytrs_trsm drives them
// with cuBLAS TRSMs). ldl_solve_convert: per matrix, perm (n) such that P^T B = B(perm, :), kind
// (n: 1 a 1x1 step, 2 a 2x2 step's first row, 0 its second) and lc (n x n), ?syconv's unit lower L
// (strictly lower part written; the interchanges of later steps applied to each column, a 2x2
// block's subdiagonal zeroed); step (n) is its scratch. Pivots as sytrs_lower_batched reads them.
template <typename T>
cudaError_t ldl_solve_convert(cudaStream_t stream, int64_t count, int64_t n, const T* ld,
                              const int64_t* ipiv, T* lc, int* perm, int* kind, int2* step);

// Whether ldl_solve_convert takes n (a column of n elements fits a block's shared memory).
template <typename T>
bool ldl_solve_convert_fits(int64_t n);

// dst(i, :) = src(perm[i], :) (gather) or dst(perm[i], :) = src(i, :), per n x nrhs matrix.
template <typename T>
cudaError_t ldl_solve_permute(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                              const int* perm, const T* src, T* dst, bool gather);

// y := D^-1 y, D's blocks from the factor ld and ldl_solve_convert's kind.
template <typename T>
cudaError_t ldl_solve_diagonal(cudaStream_t stream, int64_t count, int64_t n, int64_t nrhs,
                               const T* ld, const int* kind, T* y);

}  // namespace jcm
