// LDL^T family: Bunch-Kaufman sytrf (legacy 32-bit API) and sytrs (64-bit Xsytrs) as traits for
// run_looped, and their FFI handlers. cuSOLVER has no batched LDL^T: the batched strategy runs
// this project's kernels (ldl_kernels.h, lower triangle; the factor kernel n <=
// limits::kLdlKernelMaxN), one launch per chunk; the blocked strategy (lower) this project's
// panels with cuBLAS GEMM trailing updates (sytrf) and its blocked solve, or for a few matrices
// ?sytrs2's route with cuBLAS TRSMs (sytrs); looped and sequential run cuSOLVER.

#include <algorithm>
#include <initializer_list>

#include "core/handler_util.h"
#include "ldl/ldl_kernels.h"

namespace jcm {

namespace {

// Threads per matrix of the factor kernels (one block each). Each column step is a few
// barriers and short dependent loops, so latency bounds it: where a launch's blocks have an SM
// each (count <= SMs), 512 threads hide more of it from n = 128 on; where blocks share SMs, 256
// (H100 float32 ?sytf2 kernel, 256 / 512 threads: 64x64 0.132 / 0.138 ms, 64x128 0.316 / 0.303,
// 64x256 1.07 / 0.83, 256x128 0.352 / 0.397). The ?lasyf panels: 512 from n = 512 (64x1024
// blocked 9.28 / 8.57, 1x1024 4.69 / 4.39; 64x256 0.856 / 0.972, 1x256 0.704 / 0.819). Fewer
// threads lose at every small shape: each warp then updates more of the step's columns one after
// another (float32 ?sytf2 kernel, 32 / 64 / 128 / the default: 256x128 1.40 / 0.78 / 0.47 /
// 0.37 ms).
enum class LdlKernel { kSytf2, kPanel };

inline int ldl_threads(LdlKernel kernel, int64_t n, int64_t count) {
  if (kernel == LdlKernel::kPanel) return n >= 512 ? 512 : 256;
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();  // no count: the safe default, and no error left for the next check
    return 256;
  }
  return n >= 128 && count <= sms ? 512 : 256;
}

// A = L D L^T (or U D U^T), D block diagonal with 1x1 and 2x2 blocks, factored in place. The
// batched and blocked strategies take the lower triangle only (core/limits.h).
template <typename T>
struct sytrf_traits {
  static constexpr const char* kName = "sytrf";
  // The compact factor (`ld`) in place; info > 0: D(info, info) is exactly zero (the
  // factorization still completes).
  InPlace<T> io;
  int64_t n;
  cublasFillMode_t uplo;
  int* ipiv;  // LAPACK's: 1-based, negative entries mark 2x2 blocks


  // The buffer size depends on n only (not on uplo).
  std::string workspace_key() const { return shape_key<T>({n}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    return lwork_workspace<T>("sytrf_bufferSize", solver_api<T>::sytrf_buffer_size, ctx.solver, n,
                              io.data, n);
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "sytrf"),
                 solver_api<T>::sytrf(ctx.solver, uplo, n, io.data + i * n * n, n, ipiv + i * n,
                                      static_cast<T*>(work), lwork_of<T>(ws), io.info + i));
    return ffi::Error::Success();
  }

  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    T* a = io.data;
    int* info = io.info;
    // One warp a matrix, then one block with the matrix mirrored in shared memory (one barrier
    // a step), then the ?sytf2 block kernel (three).
    if (n <= kLdlWarpMaxN) {
      JCM_CUDA(sytrf_small_batched(ctx.stream, end - begin, n, a + begin * n * n,
                                   ipiv + begin * n, info + begin));
    } else if (n <= kLdlSmallBlockMaxN) {
      JCM_CUDA(sytrf_small_block_batched(ctx.stream, end - begin, n, a + begin * n * n,
                                         ipiv + begin * n, info + begin));
    } else {
      JCM_CUDA(sytrf_lower_batched(ctx.stream, end - begin, n, a + begin * n * n,
                                   ipiv + begin * n, info + begin,
                                   ldl_threads(LdlKernel::kSytf2, n, end - begin)));
    }
    return ffi::Error::Success();
  }
};

// Blocked LDL^T of the whole batch on XLA's stream (lower): LAPACK ?sytrf's blocking with one
// twist, so that the batch moves in step. Per panel: one kernel launch factors
// each matrix's next panel (?lasyf: each column brought up to date by a GEMV with the panel's
// earlier ones, Bunch-Kaufman pivoting) up to the common column `target`, or target + 1 where a
// 2x2 pivot straddles it (LAPACK stops at target - 1 instead; either keeps ?sytrf's pivots,
// L and D); then strided-batched GEMMs update the trailing matrices' lower triangles from the
// panels' L and W = L D, which the kernel leaves zero-padded to nb + 1 columns and to the common
// first row `target`, one GEMM per block column. The last < 2 nb columns: the ?sytf2 kernel
// from each matrix's own column. The panels' GEMVs read L2; the GEMMs hold the O(n^3) flops
// that the unblocked kernel streams through one SM per matrix (H100 float32 64 x 1024: 122 ms).
// Panels of kLdlBlock columns, updates in kLdlUpdateBlock block columns (ldl_kernels.h).
inline constexpr size_t kLdlPanelBytes = size_t{256} << 20;  // panel buffers: chunk the batch

// Matrices per pass of a blocked routine (batch >= 1): as many as fit their buffers, item_bytes
// each, in kLdlPanelBytes; at least one.
inline int64_t ldl_chunk(int64_t batch, size_t item_bytes) {
  return std::clamp<int64_t>(static_cast<int64_t>(kLdlPanelBytes / item_bytes), 1, batch);
}

// The trailing update's GEMM block columns. A single matrix takes its whole trailing square in
// one GEMM: the upper triangle's half is wasted flops (and never read: the kernels read the lower
// triangle, and ldl_factor returns tril), but at batch 1 the ~(n - target) / kLdlUpdateBlock
// launches a panel cost more than those flops (H100, whole / 256 block columns: 1x2048 float32
// 12.7 / 13.4 ms, float64 15.4 / 16.1; 1x1024 4.25 / 4.46; equal up to n = 512).
inline int64_t ldl_update_block(int64_t count, int64_t n) {
  return count == 1 ? n : kLdlUpdateBlock;
}

template <typename T>
ffi::Error run_blocked(const CallConfig& call, ffi::ScratchAllocator& scratch,
                       const sytrf_traits<T>& op) {
  JCM_ASSIGN_OR_RETURN(const int64_t batch, prepare_items(op, call.xla_stream));
  if (batch == 0) return ffi::Error::Success();
  const int64_t n = op.n;
  const int64_t nb = kLdlBlock;
  const int64_t panel = n * (nb + 1);  // elements of one matrix's W (and L) buffer
  const int64_t chunk = ldl_chunk(batch, 2 * panel * sizeof(T) + sizeof(int));
  const size_t buffer_bytes = align_up(chunk * panel * sizeof(T));
  JCM_ASSIGN_OR_RETURN(std::byte * work,
                       allocate_scratch(scratch, 2 * buffer_bytes + chunk * sizeof(int), "sytrf"));
  T* w = reinterpret_cast<T*>(work);
  T* l = reinterpret_cast<T*>(work + buffer_bytes);
  int* progress = reinterpret_cast<int*>(work + 2 * buffer_bytes);
  const T one = scalar_of<T>(1), minus_one = scalar_of<T>(-1);
  return run_inline(call, [&](const LaneContext& ctx) -> ffi::Error {
    JCM_CUDA(cudaMemsetAsync(op.io.info, 0, batch * sizeof(int), ctx.stream));
    for (int64_t begin = 0; begin < batch; begin += chunk) {
      const int64_t count = std::min(chunk, batch - begin);
      T* a = op.io.data + begin * n * n;
      int* ipiv = op.ipiv + begin * n;
      int* info = op.io.info + begin;
      JCM_CUDA(cudaMemsetAsync(progress, 0, count * sizeof(int), ctx.stream));
      // done: the last panel's target (every matrix has reached it or one more). A panel is
      // narrower than nb where that is what fits its rows in shared memory (lasyf_panel_width).
      int64_t done = 0;
      for (;;) {
        const int64_t width = lasyf_panel_width<T>(n - done, nb, count);
        const int64_t target = done + width;
        if (n - target < nb) break;
        JCM_CUDA(lasyf_lower_batched(ctx.stream, count, n, width, target, a, w, l, progress,
                                     ipiv, info, ldl_threads(LdlKernel::kPanel, n, count)));
        // A(target:, target:) -= L W^T, block column by block column from the diagonal down
        // (transpose, not conjugate: complex symmetric). The kernel packs each matrix's L and W
        // at n (width + 1) elements apart.
        const int64_t update_block = ldl_update_block(count, n);
        const int64_t stride = n * (width + 1);
        for (int64_t c = target; c < n; c += update_block) {
          const int64_t cols = std::min(update_block, n - c);
          JCM_CUBLAS(routine_name<T>("cublas", "gemmStridedBatched"),
                     solver_api<T>::gemm_strided_batched(
                         ctx.blas, CUBLAS_OP_N, CUBLAS_OP_T, n - c, cols, width + 1,
                         &minus_one, l + c, n, stride, w + c, n, stride, &one, a + c + c * n,
                         n, n * n, count));
        }
        done = target;
      }
      const int64_t tail = n - done;
      JCM_CUDA(sytf2_lower_tail_batched(ctx.stream, count, n, tail, progress, a, ipiv, info,
                                        ldl_threads(LdlKernel::kSytf2, tail, count)));
    }
    return ffi::Error::Success();
  });
}

// Solves A X = B from sytrf's factor. The 64-bit API, so the pivots come in as int64.
template <typename T>
struct sytrs_traits {
  static constexpr const char* kName = "sytrs";
  // Xsytrs appears to read its inputs outside the handle's stream: on the H100 (cuSOLVER
  // 12.0.4) it faulted (illegal addresses, as with garbage pivots) unless every launch was
  // synchronous (CUDA_LAUNCH_BLOCKING=1 passed).
  static constexpr bool kInputsOnHostSync = true;
  // info stays 0 on every path but Xsytrs's illegal arguments: as Xsytrs, a singular D shows as
  // inf/NaN in x.
  static constexpr bool kZeroInfo = true;
  InPlace<T> io;  // b, solved in place (the `x` result)
  int64_t n, nrhs;
  cublasFillMode_t uplo;
  const T* ld;
  const int64_t* ipiv;


  std::string workspace_key() const { return shape_key<T>({n, nrhs, uplo}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    Workspace ws;
    JCM_CUSOLVER("cusolverDnXsytrs_bufferSize",
                 cusolverDnXsytrs_bufferSize(ctx.solver, uplo, n, nrhs, cuda_data_type<T>(), ld, n,
                                             ipiv, cuda_data_type<T>(), io.data, n,
                                             &ws.device_bytes,
                                             &ws.host_bytes));
    return ws;
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    void* host = ws.host_bytes ? ctx.lane->host_workspace(ws.host_bytes) : nullptr;
    JCM_CUSOLVER("cusolverDnXsytrs",
                 cusolverDnXsytrs(ctx.solver, uplo, n, nrhs, cuda_data_type<T>(), ld + i * n * n,
                                  n, ipiv + i * n, cuda_data_type<T>(), io.data + i * n * nrhs,
                                  n, work, ws.device_bytes, host, ws.host_bytes, io.info + i));
    return ffi::Error::Success();
  }

  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(sytrs_lower_batched(ctx.stream, end - begin, n, nrhs, ld + begin * n * n,
                                 ipiv + begin * n, io.data + begin * n * nrhs));
    return ffi::Error::Success();
  }
};

// The blocked solve of the whole batch on XLA's stream (lower): ?sytrs in blocks of nb columns
// (ldl_kernels.h). Per block, forward: one kernel solves the block's rows (nb short steps in
// shared memory), one strided-batched GEMM applies the block's columns to every row below;
// backward, from the last block: one GEMM gives the dot products of the block's columns with
// the rows below, one kernel the block's steps. The unblocked kernel's n dependent steps over
// the whole of B become 2 n / nb launches whose serial part is nb steps on nb rows in shared
// memory (H100 float32, the solve alone: 1x2048 11.7 -> 4.60 ms, 64x1024 6.63 -> 3.04; below
// n = 512 the unblocked kernel's single launch wins, strategy.py BLOCKED_MIN_N).
// Blocks of kLdlSolveBlock columns; up to kLdlSolveTrsmMaxCount matrices take LAPACK ?sytrs2's
// route instead (sytrs_trsm: the factor converted once, then cuBLAS TRSMs, a pair a matrix).

// ?sytrs2 (lower) on every matrix, after run_blocked's prologue: ldl_solve_convert's P, L (in
// scratch) and D's blocks; X = P L^-T D^-1 L^-1 P^T B (transpose, not conjugate: complex
// symmetric).
template <typename T>
ffi::Error sytrs_trsm(const CallConfig& call, ffi::ScratchAllocator& scratch,
                      const sytrs_traits<T>& op) {
  const int64_t batch = op.io.items, n = op.n, nrhs = op.nrhs;
  const size_t lc_bytes = align_up(batch * n * n * sizeof(T));
  const size_t y_bytes = align_up(batch * n * nrhs * sizeof(T));
  const size_t int_bytes = align_up(batch * n * sizeof(int));
  const size_t step_bytes = align_up(batch * n * sizeof(int2));
  JCM_ASSIGN_OR_RETURN(
      std::byte * work,
      allocate_scratch(scratch, lc_bytes + y_bytes + 2 * int_bytes + step_bytes, "sytrs"));
  T* lc = reinterpret_cast<T*>(work);
  T* y = reinterpret_cast<T*>(work + lc_bytes);
  int* perm = reinterpret_cast<int*>(work + lc_bytes + y_bytes);
  int* kind = reinterpret_cast<int*>(work + lc_bytes + y_bytes + int_bytes);
  int2* step = reinterpret_cast<int2*>(work + lc_bytes + y_bytes + 2 * int_bytes);
  const T one = scalar_of<T>(1);
  const std::string trsm = routine_name<T>("cublas", "trsm");
  return run_inline(call, [&](const LaneContext& ctx) -> ffi::Error {
    JCM_CUDA(ldl_solve_convert(ctx.stream, batch, n, op.ld, op.ipiv, lc, perm, kind, step));
    JCM_CUDA(ldl_solve_permute(ctx.stream, batch, n, nrhs, perm, op.io.data, y, /*gather=*/true));
    for (int64_t i = 0; i < batch; ++i) {
      JCM_CUBLAS(trsm, solver_api<T>::trsm(ctx.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                                           CUBLAS_OP_N, CUBLAS_DIAG_UNIT, n, nrhs, &one,
                                           lc + i * n * n, n, y + i * n * nrhs, n));
    }
    JCM_CUDA(ldl_solve_diagonal(ctx.stream, batch, n, nrhs, op.ld, kind, y));
    for (int64_t i = 0; i < batch; ++i) {
      JCM_CUBLAS(trsm, solver_api<T>::trsm(ctx.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                                           CUBLAS_OP_T, CUBLAS_DIAG_UNIT, n, nrhs, &one,
                                           lc + i * n * n, n, y + i * n * nrhs, n));
    }
    JCM_CUDA(ldl_solve_permute(ctx.stream, batch, n, nrhs, perm, y, op.io.data, /*gather=*/false));
    return ffi::Error::Success();
  });
}

template <typename T>
ffi::Error run_blocked(const CallConfig& call, ffi::ScratchAllocator& scratch,
                       const sytrs_traits<T>& op) {
  JCM_ASSIGN_OR_RETURN(const int64_t batch, prepare_items(op, call.xla_stream));
  if (batch == 0) return ffi::Error::Success();
  const int64_t n = op.n, nrhs = op.nrhs;
  if (batch <= kLdlSolveTrsmMaxCount && ldl_solve_convert_fits<T>(n) &&
      batch * n * n * sizeof(T) <= kLdlPanelBytes) {
    return sytrs_trsm(call, scratch, op);
  }
  const int64_t nb = kLdlSolveBlock;
  const int64_t per_item = (nb + 1) * nrhs;  // elements of one matrix's y / t
  const int64_t chunk = ldl_chunk(batch, per_item * sizeof(T));
  JCM_ASSIGN_OR_RETURN(std::byte * work,
                       allocate_scratch(scratch, align_up(chunk * per_item * sizeof(T)), "sytrs"));
  T* y = reinterpret_cast<T*>(work);
  const T one = scalar_of<T>(1), zero = scalar_of<T>(0), minus_one = scalar_of<T>(-1);
  const std::string gemm = routine_name<T>("cublas", "gemmStridedBatched");
  return run_inline(call, [&](const LaneContext& ctx) -> ffi::Error {
    for (int64_t begin = 0; begin < batch; begin += chunk) {
      const int64_t count = std::min(chunk, batch - begin);
      const T* ld = op.ld + begin * n * n;
      const int64_t* ipiv = op.ipiv + begin * n;
      T* x = op.io.data + begin * n * nrhs;
      // Forward. Below block k0: rows from k0 + nb + 1 on (the kernel updates row k0 + nb).
      for (int64_t k0 = 0; k0 < n; k0 += nb) {
        JCM_CUDA(sytrs_lower_blocked_forward(ctx.stream, count, n, nrhs, nb, k0, ld, ipiv, x, y));
        const int64_t below = k0 + nb + 1;
        if (below < n) {
          JCM_CUBLAS(gemm, solver_api<T>::gemm_strided_batched(
                               ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, n - below, nrhs, nb + 1,
                               &minus_one, ld + below + k0 * n, n, n * n, y, nb + 1, per_item,
                               &one, x + below, n, n * nrhs, count));
        }
      }
      // D^-1 and backward, from the last block (transpose, not conjugate: complex symmetric).
      for (int64_t k0 = (n - 1) / nb * nb; k0 >= 0; k0 -= nb) {
        const int64_t below = k0 + nb + 1;
        if (below < n) {
          JCM_CUBLAS(gemm, solver_api<T>::gemm_strided_batched(
                               ctx.blas, CUBLAS_OP_T, CUBLAS_OP_N, nb + 1, nrhs, n - below, &one,
                               ld + below + k0 * n, n, n * n, x + below, n, n * nrhs, &zero, y,
                               nb + 1, per_item, count));
        }
        JCM_CUDA(sytrs_lower_blocked_backward(ctx.stream, count, n, nrhs, nb, k0, below < n, ld,
                                              ipiv, x, y));
      }
    }
    return ffi::Error::Success();
  });
}

}  // namespace

ffi::Error sytrf_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> ld,
                         ffi::Result<ffi::Buffer<ffi::S32>> ipiv,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t lower, int32_t strategy,
                         int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, factor_operands(a, ld, info, "sytrf", "ld", true));
  JCM_RETURN_IF_ERROR(check_dims(ipiv->dimensions(), batch_shape(a.dimensions(), 1, {}), "sytrf",
                                 "pivots"));
  JCM_ASSIGN_OR_RETURN(CallConfig call,
                       call_config(stream, device, strategy, lanes, Routine::kSytrf,
                                   {mb.rows, mb.rows, 0, lower != 0}));
  return run_typed<sytrf_traits>(a.element_type(), "sytrf", call, scratch,
                                 in_place(a, ld, info, mb), mb.rows, fill_mode(lower),
                                 ipiv->typed_data());
}

ffi::Error sytrs_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer ld, ffi::Buffer<ffi::S64> ipiv, ffi::AnyBuffer b,
                         ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t lower, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, solve_operands(ld, "ld", b, x, "sytrs"));
  JCM_RETURN_IF_ERROR(check_dims(ipiv.dimensions(), batch_shape(ld.dimensions(), 1, {}), "sytrs",
                                 "pivots"));
  JCM_RETURN_IF_ERROR(check_info(info, ld, "sytrs"));
  JCM_ASSIGN_OR_RETURN(CallConfig call,
                       call_config(stream, device, strategy, lanes, Routine::kSytrs,
                                   {mb.rows, mb.rows, mb.cols, lower != 0}));
  return run_typed<sytrs_traits>(ld.element_type(), "sytrs", call, scratch,
                                 in_place(b, x, info, mb), mb.rows, mb.cols, fill_mode(lower),
                                 any_ptr(ld), ipiv.typed_data());
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
JCM_SOLVER_HANDLER(jcm_sytrf, sytrf_handler,
                   .Arg<xla::ffi::AnyBuffer>()              // a
                   .Ret<xla::ffi::AnyBuffer>()              // ld
                   .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // pivots
                   JCM_INFO_RET
                   .Attr<int32_t>("lower"));

JCM_SOLVER_HANDLER(jcm_sytrs, sytrs_handler,
                   JCM_SOLVE_BINDINGS(.Arg<xla::ffi::Buffer<xla::ffi::S64>>())  // ld, pivots, b
                   .Attr<int32_t>("lower"));
