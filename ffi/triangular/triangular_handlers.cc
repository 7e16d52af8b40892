// The triangular solve (trsm) as traits for run_looped, and the small-matrix kernel's handler.

#include "core/handler_util.h"
#include "triangular/triangular_kernels.h"

namespace jcm {

namespace {

// The `transpose` attribute: TrsmOp's values.
ffi::ErrorOr<TrsmOp> trsm_op(int32_t transpose) {
  if (transpose < 0 || transpose > 2) {
    return invalid_argument("trsm: transpose must be 0 (A), 1 (A^T) or 2 (A^H), got " +
                            std::to_string(transpose));
  }
  return static_cast<TrsmOp>(transpose);
}

cublasOperation_t blas_op(TrsmOp op) {
  switch (op) {
    case TrsmOp::kNone: return CUBLAS_OP_N;
    case TrsmOp::kTranspose: return CUBLAS_OP_T;
    default: return CUBLAS_OP_C;
  }
}

template <typename T>
struct trsm_traits {
  static constexpr const char* kName = "trsm";
  static constexpr bool kZeroInfo = true;  // a triangular solve has no failure to report
  InPlace<T> io;  // b, solved in place (the `x` result)
  int64_t n, nrhs;
  cublasFillMode_t uplo;
  cublasOperation_t trans;
  cublasDiagType_t diag;
  const T* a;

  std::string workspace_key() const { return ""; }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext&) const { return Workspace{}; }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace&, void*) const {
    const T one = scalar_of<T>(1);
    JCM_CUBLAS(routine_name<T>("cublas", "trsm"),
               solver_api<T>::trsm(ctx.blas, CUBLAS_SIDE_LEFT, uplo, trans, diag, n, nrhs, &one,
                                   a + i * n * n, n, io.data + i * n * nrhs, n));
    return ffi::Error::Success();
  }
  // trsmBatched: what JAX's own lowering runs, here on lanes as well.
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return 2 * count * sizeof(T*);
  }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    const int64_t count = end - begin;
    const T one = scalar_of<T>(1);
    T** a_ptrs = static_cast<T**>(work);
    T** x_ptrs = a_ptrs + count;
    JCM_RETURN_IF_ERROR(
        fill_pointers(ctx.stream, a_ptrs, const_cast<T*>(a) + begin * n * n, n * n, count));
    JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, x_ptrs, io.data + begin * n * nrhs,
                                      n * nrhs, count));
    JCM_CUBLAS(routine_name<T>("cublas", "trsmBatched"),
               solver_api<T>::trsm_batched(ctx.blas, CUBLAS_SIDE_LEFT, uplo, trans, diag, n,
                                           nrhs, &one, a_ptrs, n, x_ptrs, n, count));
    return ffi::Error::Success();
  }
};

}  // namespace

ffi::Error trsm_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                        ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> x,
                        ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t lower, int32_t transpose,
                        int32_t unit_diagonal, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(TrsmOp op, trsm_op(transpose));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, solve_operands(a, "a", b, x, "trsm"));
  JCM_RETURN_IF_ERROR(check_info(info, a, "trsm"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes,
                                                    Routine::kTrsm, {mb.rows, mb.rows, mb.cols}));
  return run_typed<trsm_traits>(a.element_type(), "trsm", call, scratch, in_place(b, x, info, mb),
                                mb.rows, mb.cols, fill_mode(lower), blas_op(op),
                                unit_diagonal ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT,
                                any_ptr(a));
}

// The small-matrix kernel (triangular_kernels.h) on XLA's stream, one launch.
ffi::Error trsm_small_handler(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer b,
                              ffi::Result<ffi::AnyBuffer> x, int32_t lower, int32_t transpose,
                              int32_t unit_diagonal) {
  JCM_ASSIGN_OR_RETURN(TrsmOp op, trsm_op(transpose));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb,
                       solve_operands(a, "a", b, x, "trsm_small", limits::kTrsmSmallMaxN,
                                      limits::kTrsmSmallMaxRhs));
  return launch_typed(a.element_type(), "trsm_small", [&](auto tag) {
    return trsm_small_batched<tag_type<decltype(tag)>>(stream, mb.batch, mb.rows, mb.cols,
                                                       lower != 0, op, unit_diagonal != 0,
                                                       any_ptr(a), any_ptr(b), any_ptr(x));
  });
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
JCM_SOLVER_HANDLER(jcm_trsm, trsm_handler,
                   JCM_SOLVE_BINDINGS()  // a, b
                   .Attr<int32_t>("lower")
                   .Attr<int32_t>("transpose")
                   .Attr<int32_t>("unit_diagonal"));

JCM_KERNEL_HANDLER(jcm_trsm_small, trsm_small_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // a
                   .Arg<xla::ffi::AnyBuffer>()  // b
                   .Ret<xla::ffi::AnyBuffer>()  // x
                   .Attr<int32_t>("lower")
                   .Attr<int32_t>("transpose")
                   .Attr<int32_t>("unit_diagonal"));
