// Cholesky (potrf, potrs) as traits for run_looped, the blocked Cholesky and the small-matrix
// kernels' handlers.

#include <algorithm>

#include "cholesky/cholesky_kernels.h"
#include "core/handler_util.h"

namespace jcm {

namespace {

template <typename T>
struct potrf_traits {
  static constexpr const char* kName = "potrf";
  InPlace<T> io;  // a factored in place
  int64_t n;
  cublasFillMode_t uplo;

  std::string workspace_key() const { return shape_key<T>({n, uplo}); }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    return lwork_workspace<T>("potrf_bufferSize", solver_api<T>::potrf_buffer_size, ctx.solver,
                              uplo, n, io.data, n);
  }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrf"),
                 solver_api<T>::potrf(ctx.solver, uplo, n, io.data + i * n * n, n,
                                      static_cast<T*>(work), lwork_of<T>(ws), io.info + i));
    return ffi::Error::Success();
  }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return count * sizeof(T*);
  }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    T** ptrs = static_cast<T**>(work);
    JCM_RETURN_IF_ERROR(
        fill_pointers(ctx.stream, ptrs, io.data + begin * n * n, n * n, end - begin));
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrfBatched"),
                 solver_api<T>::potrf_batched(ctx.solver, uplo, n, ptrs, n, io.info + begin,
                                              end - begin));
    return ffi::Error::Success();
  }
};

// Right-looking blocked Cholesky of the whole batch on XLA's stream. Per block column: the
// diagonal blocks of every matrix by one potrfBatched, the panels beside them by one trsmBatched,
// and the trailing matrices by strided-batched GEMMs, one per block column of the trailing
// matrix, each only from the diagonal down (up, for upper): cuBLAS has no batched syrk, and a
// single GEMM over the whole square would do twice the flops. What lies outside the triangle
// asked for is garbage, and Python zeroes it as for every strategy. The GEMMs hold most of the
// flops and run the whole batch per call: what one potrf per matrix cannot do at large n. Full
// precision: the handles' default math mode (no TF32). Block size limits::kCholeskyBlock
// (JCM_CHOLESKY_BLOCK, core/settings.h).
template <typename T>
ffi::Error run_blocked(const CallConfig& call, ffi::ScratchAllocator& scratch,
                       const potrf_traits<T>& op) {
  const int64_t n = op.n;
  const bool lower = op.uplo == CUBLAS_FILL_MODE_LOWER;
  auto ptr_bytes = [](int64_t batch) { return align_up(batch * sizeof(T*)); };
  auto body = [&](const LaneContext& ctx, int64_t batch, std::byte* work) -> ffi::Error {
    T** diag_ptrs = reinterpret_cast<T**>(work);
    T** panel_ptrs = reinterpret_cast<T**>(work + ptr_bytes(batch));
    int* block_info = reinterpret_cast<int*>(work + 2 * ptr_bytes(batch));
    const T one = scalar_of<T>(1), minus_one = scalar_of<T>(-1);
    const int64_t nb = cholesky_block();
    for (int64_t j = 0; j < n; j += nb) {
      const int64_t jb = std::min(nb, n - j), rest = n - j - jb;
      T* diag = op.io.data + j + j * n;  // column-major: element (j, j)
      JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, diag_ptrs, diag, n * n, batch));
      JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrfBatched"),
                   solver_api<T>::potrf_batched(ctx.solver, op.uplo, jb, diag_ptrs, n,
                                                block_info, batch));
      JCM_CUDA(
          merge_block_info(ctx.stream, op.io.info, block_info, static_cast<int>(j), batch));
      if (rest == 0) break;
      // Lower: the panel below, L21 = A21 L11^-H; upper: the panel right, U12 = U11^-H A12.
      T* panel = lower ? diag + jb : diag + jb * n;
      JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, panel_ptrs, panel, n * n, batch));
      JCM_CUBLAS(routine_name<T>("cublas", "trsmBatched"),
                 solver_api<T>::trsm_batched(
                     ctx.blas, lower ? CUBLAS_SIDE_RIGHT : CUBLAS_SIDE_LEFT, op.uplo,
                     CUBLAS_OP_C, CUBLAS_DIAG_NON_UNIT, lower ? rest : jb, lower ? jb : rest,
                     &one, diag_ptrs, n, panel_ptrs, n, batch));
      // The trailing matrix, block column c (width w) at a time: lower, its rows c.. of
      // A22 -= L21 L21^H; upper, its rows ..c+w of A22 -= U12^H U12.
      T* trailing = diag + jb + jb * n;
      for (int64_t c = 0; c < rest; c += nb) {
        const int64_t w = std::min(nb, rest - c);
        const int64_t rows = lower ? rest - c : c + w;
        JCM_CUBLAS(routine_name<T>("cublas", "gemmStridedBatched"),
                   solver_api<T>::gemm_strided_batched(
                       ctx.blas, lower ? CUBLAS_OP_N : CUBLAS_OP_C,
                       lower ? CUBLAS_OP_C : CUBLAS_OP_N, rows, w, jb, &minus_one,
                       lower ? panel + c : panel, n, n * n, lower ? panel + c : panel + c * n, n,
                       n * n, &one, lower ? trailing + c + c * n : trailing + c * n, n, n * n,
                       batch));
      }
    }
    return ffi::Error::Success();
  };
  return run_blocked_inline(
      call, scratch, op,
      [&](int64_t batch) { return 2 * ptr_bytes(batch) + batch * sizeof(int); }, body);
}

template <typename T>
struct potrs_traits {
  static constexpr const char* kName = "potrs";
  static constexpr bool kZeroInfo = true;  // potrs reports illegal arguments only
  InPlace<T> io;  // b, solved in place (the `x` result)
  int64_t n, nrhs;
  cublasFillMode_t uplo;
  const T* c;  // the factor

  std::string workspace_key() const { return ""; }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext&) const { return Workspace{}; }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace&, void*) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrs"),
                 solver_api<T>::potrs(ctx.solver, uplo, n, nrhs, c + i * n * n, n,
                                      io.data + i * n * nrhs, n, io.info + i));
    return ffi::Error::Success();
  }
  // potrsBatched (one right-hand side: core/limits.h).
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return 2 * count * sizeof(T*) + sizeof(int);
  }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    int64_t count = end - begin;
    T** c_ptrs = static_cast<T**>(work);
    T** x_ptrs = c_ptrs + count;
    int* status = reinterpret_cast<int*>(x_ptrs + count);
    JCM_RETURN_IF_ERROR(
        fill_pointers(ctx.stream, c_ptrs, const_cast<T*>(c) + begin * n * n, n * n, count));
    JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, x_ptrs, io.data + begin * n, n, count));
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrsBatched"),
                 solver_api<T>::potrs_batched(ctx.solver, uplo, n, 1, c_ptrs, n, x_ptrs, n, status,
                                              count));
    return ffi::Error::Success();
  }
};

}  // namespace

ffi::Error potrf_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> out,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t lower, int32_t strategy,
                         int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, factor_operands(a, out, info, "potrf", "factor", true));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes,
                                                    Routine::kPotrf, {mb.rows, mb.rows}));
  return run_typed<potrf_traits>(a.element_type(), "potrf", call, scratch,
                                 in_place(a, out, info, mb), mb.rows, fill_mode(lower));
}

ffi::Error potrs_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer c, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> x,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t lower, int32_t strategy,
                         int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, solve_operands(c, "the factor", b, x, "potrs"));
  JCM_RETURN_IF_ERROR(check_info(info, c, "potrs"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes,
                                                    Routine::kPotrs, {mb.rows, mb.rows, mb.cols}));
  return run_typed<potrs_traits>(c.element_type(), "potrs", call, scratch,
                                 in_place(b, x, info, mb), mb.rows, mb.cols, fill_mode(lower),
                                 any_ptr(c));
}

// The small-matrix kernels (cholesky_kernels.h) on XLA's stream, one launch each: the factor
// with its other triangle zero and NaN where A is not positive definite, written in-kernel.
ffi::Error potrf_small_handler(cudaStream_t stream, ffi::AnyBuffer a,
                               ffi::Result<ffi::AnyBuffer> out, int32_t lower) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb,
                       small_square_batch(a, limits::kCholeskySmallMaxN, "potrf_small", "a"));
  JCM_RETURN_IF_ERROR(check_small_result(a, out, "potrf_small", "factor"));
  return launch_typed(a.element_type(), "potrf_small", [&](auto tag) {
    return potrf_small_batched<tag_type<decltype(tag)>>(stream, mb.batch, mb.rows, lower != 0,
                                                        any_ptr(a), any_ptr(out));
  });
}

ffi::Error potrs_small_handler(cudaStream_t stream, ffi::AnyBuffer c, ffi::AnyBuffer b,
                               ffi::Result<ffi::AnyBuffer> x, int32_t lower) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb,
                       solve_operands(c, "the factor", b, x, "potrs_small",
                                      limits::kCholeskySmallMaxN, limits::kCholeskySmallMaxRhs));
  return launch_typed(c.element_type(), "potrs_small", [&](auto tag) {
    return potrs_small_batched<tag_type<decltype(tag)>>(stream, mb.batch, mb.rows, mb.cols,
                                                        lower != 0, any_ptr(c), any_ptr(b),
                                                        any_ptr(x));
  });
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
JCM_SOLVER_HANDLER(jcm_potrf, potrf_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // a
                   .Ret<xla::ffi::AnyBuffer>()  // factor
                   JCM_INFO_RET
                   .Attr<int32_t>("lower"));

JCM_SOLVER_HANDLER(jcm_potrs, potrs_handler,
                   JCM_SOLVE_BINDINGS()  // factor, b
                   .Attr<int32_t>("lower"));

JCM_KERNEL_HANDLER(jcm_potrf_small, potrf_small_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // a
                   .Ret<xla::ffi::AnyBuffer>()  // factor
                   .Attr<int32_t>("lower"));

JCM_KERNEL_HANDLER(jcm_potrs_small, potrs_small_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // factor
                   .Arg<xla::ffi::AnyBuffer>()  // b
                   .Ret<xla::ffi::AnyBuffer>()  // x
                   .Attr<int32_t>("lower"));
