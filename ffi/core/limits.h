// Every limit of the extension, in one place: the strategies, the lane pool's size, each kernel's
// largest n, and which strategy can run which routine on which shape. Plain constexpr, no CUDA
// types: the kernels and handlers include it, and so does the CUDA-free module _jcm_limits
// (limits_module.cc), which exports all of it to Python. Python restates none of it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace jcm {

// The values of the FFI attribute `strategy`; kStrategyNames are the names Python uses for them
// (and the only place they are spelled). "auto" never reaches C++: Python resolves it.
enum class Strategy : int32_t {
  kLooped = 0,      // one library call per item, spread over lanes (own stream + thread each)
  kSequential = 1,  // one library call per item, all on XLA's stream from the calling thread
  kBatched = 2,     // a batched API or kernel; with lanes > 1 each lane takes a chunk of the batch
  kBlocked = 3,     // a blocked algorithm over the whole batch on XLA's stream
};
inline constexpr int kStrategyCount = 4;
inline constexpr const char* kStrategyNames[kStrategyCount] = {"looped", "sequential", "batched",
                                                               "blocked"};
// The strategies whose `lanes` attribute is a lane count (the others run on XLA's stream).
constexpr bool strategy_uses_lanes(Strategy s) {
  return s == Strategy::kLooped || s == Strategy::kBatched;
}

namespace limits {

// Most lanes a device pool grows to: a call's `lanes` is in [1, kMaxLanesPerDevice].
inline constexpr int kMaxLanesPerDevice = 32;

// --- Kernel limits -------------------------------------------------------------------------------

// LU (lu_kernels.h). getrf_small_batched: a lane of each warp looks after two rows.
inline constexpr int64_t kGetrfSmallMaxN = 64;
// getrs_small_batched's right-hand sides (inv's n <= kGetrfSmallMaxN included).
inline constexpr int64_t kGetrsSmallMaxRhs = 64;
// Up to this n getrf_small_batched and getrs_small_batched give each matrix a thread (its
// entries in registers), and getrs up to this many right-hand sides (inv's included).
inline constexpr int64_t kLuTinyMaxN = 4;
inline constexpr int64_t kLuTinyMaxRhs = 4;
// The blocked LU's panel width (default) and the widest getf2_panel_batched takes.
inline constexpr int64_t kLuBlock = 32;
inline constexpr int64_t kLuMaxBlock = 256;

// Cholesky (cholesky_kernels.h): a lane of each warp holds two rows in potrs_small_batched; one
// warp per right-hand side, 32 warps at most per block.
inline constexpr int64_t kCholeskySmallMaxN = 64;
inline constexpr int64_t kCholeskySmallMaxRhs = 64;
// Up to this n potrf_small_batched and potrs_small_batched give each matrix a thread, and potrs
// up to this many right-hand sides.
inline constexpr int64_t kCholeskyTinyMaxN = 4;
inline constexpr int64_t kCholeskyTinyMaxRhs = 4;
// The blocked Cholesky's block size (default) and the range JCM_CHOLESKY_BLOCK may set.
inline constexpr int64_t kCholeskyBlock = 256;
inline constexpr int64_t kCholeskyMinBlock = 32;
inline constexpr int64_t kCholeskyMaxBlock = 1024;

// Triangular solve (triangular_kernels.h): potrs_small_batched's layout, one warp per right-hand
// side with a lane holding two rows, 32 warps at most per block.
inline constexpr int64_t kTrsmSmallMaxN = 64;
inline constexpr int64_t kTrsmSmallMaxRhs = 64;

// QR (qr_kernels.h): the kernels' shared-memory scratch is n elements of the dtype, n the columns
// (for ormqr: the dimension of C the reflectors do not run along).
inline constexpr int64_t kQrKernelMaxN = 1024;
// Up to this n a square matrix's geqr2_batched and org2r_batched give it a thread (its entries
// in registers).
inline constexpr int64_t kQrTinyMaxN = 4;

// LDL^T (ldl_kernels.h): the factor kernel (?sytf2, 2 n elements of shared memory), the
// warp-per-matrix and small-block kernels, the widest panel of the blocked factorization and of
// the blocked solve, and the narrowest shared-memory panel.
inline constexpr int64_t kLdlKernelMaxN = 1024;
// The warp-per-matrix factor (sytrf_small_batched, no barrier) up to n = 16: above, a double's
// shuffles and selects cost two each and the small block kernel wins (float32 256x32 0.062 ms
// against 0.054); sytrf_small_block_batched up to 64 (two copies of a complex128 matrix: 128 KiB
// of shared memory).
inline constexpr int64_t kLdlWarpMaxN = 16;
inline constexpr int64_t kLdlSmallBlockMaxN = 64;
inline constexpr int64_t kLdlMaxBlock = 256;
inline constexpr int64_t kLdlSolveMaxBlock = 64;
inline constexpr int64_t kLdlMinSharedBlock = 8;

// Jacobi eigensolver (eigh_kernels.h): the matrix twice and its eigenvectors in shared memory,
// one thread per pair of 2 x 2 blocks.
inline constexpr int64_t kSyevjKernelMaxN = 32;
// Up to this n syevj_small_batched gives each matrix a thread (the matrix and its eigenvectors in
// registers).
inline constexpr int64_t kSyevjTinyMaxN = 4;

// The general eigensolver's batched path (eig_kernels.h): a thread per matrix, the matrix, its
// Schur vectors and its Schur form in registers.
inline constexpr int64_t kGeevTinyMaxN = 4;

// Jacobi SVD (svd_kernels.h): the matrix and V in shared memory where they fit (else in the
// workspace), a warp per pair of columns, a lane per row up to 32 and per four rows at 128; m and
// n both.
inline constexpr int64_t kGesvdjKernelMaxN = 128;
// Up to this n a square matrix's gesvdj_small_batched gets a thread (the matrix, V and U in
// registers).
inline constexpr int64_t kGesvdjTinyMaxN = 4;

// The blocked and batched LDL^T solves: a block per kLdlSolveRhsPerBlock right-hand sides, in
// the grid's y.
inline constexpr int64_t kLdlSolveRhsPerBlock = 32;

// matmul: the largest cuBLASLt heuristic candidate index the `algorithm` attribute may pin.
inline constexpr int32_t kMatmulMaxAlgorithm = 255;

// --- Index widths and grids ----------------------------------------------------------------------

// The largest int: cuSOLVER's legacy API and cuBLAS take sizes, leading dimensions, workspace
// lengths and batch counts as int, and so do this project's kernels for n.
inline constexpr int64_t kIntMax = 2147483647;
// A launch's largest grid in x (a block or a cluster's blocks per matrix) and in y (right-hand
// side chunks, column blocks).
inline constexpr int64_t kMaxGridX = kIntMax;
inline constexpr int64_t kMaxGridY = 65535;

// --- Routines and their strategies -------------------------------------------------------------

enum class Routine : int {
  kGetrf, kGetrs, kPotrf, kPotrs, kGeqrf, kOrgqr, kOrmqr, kSytrf, kSytrs, kSyevd, kSyevj,
  kGeev, kGesvd, kGesvdj, kTrsm, kSygvd,
};
inline constexpr int kRoutineCount = 16;

// What a routine can run. looped and sequential run every routine (one library call per item).
struct RoutineLimits {
  Routine routine;
  const char* name;
  // The batched strategy: what it runs ("" where there is none) and on what shapes.
  const char* batched;
  int64_t batched_max_n;     // largest extent (batched_extent) it takes; 0: any
  bool batched_square_only;  // square matrices only
  int64_t batched_max_nrhs;  // most right-hand sides; 0: any
  // The blocked strategy: what it runs ("" where there is none).
  const char* blocked;
  bool blocked_square_only;
  // batched and blocked read the lower triangle only (the upper runs looped or sequential).
  bool lower_only;
  // The batched strategy's one-launch kernel for small square matrices (its own FFI target
  // `<name>_small`, or the batched path itself): up to this n (0: none) and right-hand sides.
  int64_t small_max_n;
  int64_t small_max_nrhs;
  // ... writes NaN for a matrix holding NaN or Inf itself (no guard around it in Python).
  bool small_writes_nan;
  // The blocked strategy takes only a matrix at least kOblongMinAspect times as tall as wide
  // or as wide as tall.
  bool blocked_oblong_only = false;
};

// The SVD's blocked strategy (svd.py _svd_qr_first): for m >> n the work of the SVD proper
// drops from the m x n matrix to the n x n R (LAPACK's gesvd does the same from m >= 1.6 n).
inline constexpr const char* kSvdQrFirst =
    "QR first: this project's Householder QR, the SVD of R, U = Q U_R by batched GEMM";
inline constexpr int64_t kOblongMinAspect = 2;

// cuSOLVER's XsygvStridedBatched came after release 12.0 (the H200 machine's 12.0.4 lacks it):
// sygvd's batched strategy exists where the header built against declares it (CMakeLists.txt).
#if JCM_HAS_SYGV_BATCHED
inline constexpr const char* kSygvBatched = "cuSOLVER XsygvStridedBatched";
#else
inline constexpr const char* kSygvBatched = "";
#endif

inline constexpr RoutineLimits kRoutines[kRoutineCount] = {
    {Routine::kGetrf, "getrf", "cuBLAS getrfBatched", 0, true, 0,
     "this project's ?getf2 panel kernel, trsmBatched and batched GEMM updates", true, false,
     kGetrfSmallMaxN, 0, true},
    {Routine::kGetrs, "getrs", "cuBLAS getrsBatched", 0, false, 0, "", false, false,
     kGetrfSmallMaxN, kGetrsSmallMaxRhs, false},
    {Routine::kPotrf, "potrf", "cuSOLVER potrfBatched", 0, false, 0,
     "potrfBatched diagonal blocks, trsmBatched panels and batched GEMM updates", false, false,
     kCholeskySmallMaxN, 0, false},
    {Routine::kPotrs, "potrs", "cuSOLVER potrsBatched", 0, false, 1, "", false, false,
     kCholeskySmallMaxN, kCholeskySmallMaxRhs, false},
    {Routine::kGeqrf, "geqrf", "this project's ?geqr2 kernel", kQrKernelMaxN, false, 0, "", false,
     false, 0, 0, false},
    {Routine::kOrgqr, "orgqr", "this project's ?org2r kernel", kQrKernelMaxN, false, 0, "", false,
     false, 0, 0, false},
    {Routine::kOrmqr, "ormqr", "this project's ?orm2r kernel", kQrKernelMaxN, false, 0, "", false,
     false, 0, 0, false},
    {Routine::kSytrf, "sytrf", "this project's ?sytf2 kernels", kLdlKernelMaxN, false, 0,
     "this project's ?lasyf panel kernel and batched GEMM updates", false, true, 0, 0, false},
    {Routine::kSytrs, "sytrs", "this project's ?sytrs kernel", 0, false, 0,
     "this project's blocked ?sytrs kernels and batched GEMMs (or ?sytrs2's TRSMs)", false, true,
     0, 0, false},
    {Routine::kSyevd, "syevd", "cuSOLVER XsyevBatched", 0, false, 0, "", false, false, 0, 0,
     false},
    {Routine::kSyevj, "syevj", "this project's Jacobi kernel", kSyevjKernelMaxN, false, 0, "",
     false, false, kSyevjKernelMaxN, 0, true},
    {Routine::kGeev, "geev", "this project's tiny eigensolver (a thread per matrix)",
     kGeevTinyMaxN, true, 0, "", false, false, kGeevTinyMaxN, 0, true},
    {Routine::kGesvd, "gesvd", "", 0, false, 0, kSvdQrFirst, false, false, 0, 0, false, true},
    {Routine::kGesvdj, "gesvdj", "this project's Jacobi kernel", kGesvdjKernelMaxN, false, 0,
     kSvdQrFirst, false, false, kGesvdjKernelMaxN, 0, true, true},
    {Routine::kTrsm, "trsm", "cuBLAS trsmBatched", 0, false, 0, "", false, false,
     kTrsmSmallMaxN, kTrsmSmallMaxRhs, false},
    {Routine::kSygvd, "sygvd", kSygvBatched, 0, false, 0, "", false, false, 0, 0, false},
};

constexpr const RoutineLimits& routine_limits(Routine r) { return kRoutines[static_cast<int>(r)]; }

// What a strategy's feasibility depends on: the matrix (m x n; ormqr: C), the right-hand sides of
// a solve, the triangle read, for ormqr the side Q is applied from, and the matrices in the call.
struct CallShape {
  int64_t m = 0, n = 0;
  int64_t nrhs = 0;
  bool lower = true;
  bool left = true;
  int64_t batch = 1;
};

// Whether `s` of `r` passes the call's sizes on as int: every path but the 64-bit generic API
// (cusolverDnX...) that looped and sequential call for sytrs, syevd, geev and gesvd, and the
// batched syevd's XsyevBatched and sygvd's XsygvStridedBatched. (The small kernels: their n is
// far below it.)
constexpr bool int_sizes(Routine r, Strategy s) {
  switch (s) {
    case Strategy::kLooped:
    case Strategy::kSequential:
      return r != Routine::kSytrs && r != Routine::kSyevd && r != Routine::kGeev &&
             r != Routine::kGesvd;
    case Strategy::kBatched: return r != Routine::kSyevd && r != Routine::kSygvd;
    case Strategy::kBlocked: return true;
  }
  return true;
}

// The extent of a call that a batched path's limit bounds: the columns for geqrf / orgqr, C's
// dimension the reflectors do not run along for ormqr, else the larger dimension.
constexpr int64_t batched_extent(Routine r, const CallShape& s) {
  switch (r) {
    case Routine::kGeqrf:
    case Routine::kOrgqr: return s.n;
    case Routine::kOrmqr: return s.left ? s.n : s.m;
    default: return s.m > s.n ? s.m : s.n;
  }
}

// Whether the batched strategy of `r` runs its one-launch small-matrix kernel for this shape (a
// block per matrix).
constexpr bool small_kernel(Routine r, const CallShape& s) {
  const RoutineLimits& l = routine_limits(r);
  return s.m == s.n && s.n <= l.small_max_n &&
         (l.small_max_nrhs == 0 || s.nrhs <= l.small_max_nrhs) && s.batch <= kMaxGridX;
}

// Why the call's sizes do not fit what `strategy` of `r` passes on as int (int_sizes) or
// launches as a grid, or nullptr where they do. A matrix's (and B's) elements count too: the
// legacy API's workspace lengths are int, and its offsets within a matrix may be.
constexpr const char* too_large(Routine r, Strategy strategy, const CallShape& s) {
  const bool batched = strategy == Strategy::kBatched || strategy == Strategy::kBlocked;
  if (batched && s.batch > kIntMax) return "more matrices than an int counts (2^31 - 1)";
  if (!int_sizes(r, strategy)) return nullptr;
  if (s.m > kIntMax || s.n > kIntMax || s.nrhs > kIntMax) {
    return "a dimension above 2^31 - 1 (its API takes int)";
  }
  if (s.m * s.n > kIntMax) return "more elements in a matrix than an int counts (2^31 - 1)";
  const int64_t b_rows = s.m > s.n ? s.m : s.n;
  if (s.nrhs > 0 && b_rows * s.nrhs > kIntMax) {
    return "more elements in the right-hand sides than an int counts (2^31 - 1)";
  }
  if (r == Routine::kSytrs && batched && s.nrhs > kMaxGridY * kLdlSolveRhsPerBlock) {
    return "more right-hand sides than the solve kernels' grid takes";
  }
  return nullptr;
}

// Why `strategy` has no path for `r` on this shape (the sizes aside), or nullptr.
constexpr const char* unsupported(Routine r, Strategy strategy, const CallShape& s) {
  const RoutineLimits& l = routine_limits(r);
  switch (strategy) {
    case Strategy::kLooped:
    case Strategy::kSequential:
      return nullptr;
    case Strategy::kBatched:
      if (l.batched[0] == '\0') return "there is no batched API or kernel for it";
      if (l.lower_only && !s.lower) return "the batched kernels read the lower triangle only";
      if (l.batched_square_only && s.m != s.n) return "the batched API takes square matrices only";
      if (l.batched_max_nrhs != 0 && s.nrhs > l.batched_max_nrhs) {
        return "the batched API takes one right-hand side only";
      }
      if (l.batched_max_n != 0 && batched_extent(r, s) > l.batched_max_n) {
        return "the matrix is larger than the batched kernel takes";
      }
      return nullptr;
    case Strategy::kBlocked:
      if (l.blocked[0] == '\0') return "there is no blocked algorithm for it";
      if (l.lower_only && !s.lower) return "the blocked algorithm reads the lower triangle only";
      if (l.blocked_square_only && s.m != s.n) {
        return "the blocked algorithm takes square matrices only";
      }
      if (l.blocked_oblong_only &&
          kOblongMinAspect * std::min(s.m, s.n) > std::max(s.m, s.n)) {
        return "the QR-first SVD takes a matrix at least twice as tall as wide, or as wide as "
               "tall";
      }
      return nullptr;
  }
  return "unknown strategy";
}

// Why `strategy` cannot run `r` on this shape through the routine's FFI target, or nullptr
// where it can. (The small kernels have their own targets: Python asks small_kernel first.)
constexpr const char* infeasible(Routine r, Strategy strategy, const CallShape& s) {
  if (const char* why = unsupported(r, strategy, s)) return why;
  return too_large(r, strategy, s);
}

static_assert(infeasible(Routine::kGetrf, Strategy::kLooped, {46341, 46341}) != nullptr,
              "cusolverDn<t>getrf takes an int lda and workspace");
static_assert(infeasible(Routine::kSyevd, Strategy::kLooped, {46341, 46341}) == nullptr,
              "cusolverDnXsyevd is 64-bit");
static_assert(infeasible(Routine::kGetrf, Strategy::kBatched, {8, 8, 0, true, true, kIntMax + 1})
              != nullptr, "cublas<t>getrfBatched counts the batch in an int");

}  // namespace limits
}  // namespace jcm
