// QR (geqrf, orgqr/ungqr, ormqr/unmqr) as traits for run_looped.

#include <algorithm>

#include "core/handler_util.h"
#include "qr/qr_kernels.h"

namespace jcm {

namespace {

// The batched strategy of the three routines is this project's kernels (qr_kernels.cu, one
// launch per chunk; n <= limits::kQrKernelMaxN), which report nothing: info is zeroed first.

template <typename T>
struct geqrf_traits {
  static constexpr const char* kName = "geqrf";
  static constexpr bool kZeroInfo = true;
  InPlace<T> io;  // R above the diagonal, reflectors below, in place
  int64_t m, n;
  T* tau;

  int64_t k() const { return std::min(m, n); }
  std::string workspace_key() const { return shape_key<T>({m, n}); }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    return lwork_workspace<T>("geqrf_bufferSize", solver_api<T>::geqrf_buffer_size, ctx.solver, m,
                              n, io.data, m);
  }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "geqrf"),
                 solver_api<T>::geqrf(ctx.solver, m, n, io.data + i * m * n, m, tau + i * k(),
                                      static_cast<T*>(work), lwork_of<T>(ws), io.info + i));
    return ffi::Error::Success();
  }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(geqr2_batched(ctx.stream, end - begin, m, n, io.data + begin * m * n,
                           tau + begin * k()));
    return ffi::Error::Success();
  }
};

// Householder product: the first n columns of Q = H(1) ... H(k), from geqrf's reflectors.
template <typename T>
struct orgqr_traits {
  static constexpr const char* kName = "orgqr";
  static constexpr bool kZeroInfo = true;
  InPlace<T> io;  // reflectors in, Q out
  int64_t m, n, k;
  const T* tau;

  std::string workspace_key() const { return shape_key<T>({m, n, k}); }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    return lwork_workspace<T>(std::string(solver_api<T>::kOrgqr) + "_bufferSize",
                              solver_api<T>::orgqr_buffer_size, ctx.solver, m, n, k, io.data, m,
                              tau);
  }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kOrgqr),
                 solver_api<T>::orgqr(ctx.solver, m, n, k, io.data + i * m * n, m, tau + i * k,
                                      static_cast<T*>(work), lwork_of<T>(ws), io.info + i));
    return ffi::Error::Success();
  }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(org2r_batched(ctx.stream, end - begin, m, n, k, io.data + begin * m * n,
                           tau + begin * k));
    return ffi::Error::Success();
  }
};

// C <- op(Q) C or C op(Q), Q given by k reflectors (no explicit Q).
template <typename T>
struct ormqr_traits {
  static constexpr const char* kName = "ormqr";
  static constexpr bool kZeroInfo = true;
  InPlace<T> io;    // C, in place
  int64_t m, n, k;  // C is m x n
  bool left;        // Q C (else C Q)
  bool adjoint;     // Q^H (Q^T for real T)
  const T* a;       // reflectors: (m, k) on the left, (n, k) on the right
  const T* tau;

  cublasSideMode_t side() const { return left ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT; }
  cublasOperation_t trans() const {
    return !adjoint ? CUBLAS_OP_N : is_complex_v<T> ? CUBLAS_OP_C : CUBLAS_OP_T;
  }
  int64_t rows_a() const { return left ? m : n; }
  int64_t lda() const { return std::max<int64_t>(rows_a(), 1); }
  std::string workspace_key() const { return shape_key<T>({m, n, k, left, adjoint}); }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    return lwork_workspace<T>(std::string(solver_api<T>::kOrmqr) + "_bufferSize",
                              solver_api<T>::ormqr_buffer_size, ctx.solver, side(), trans(), m,
                              n, k, a, lda(), tau, io.data, m);
  }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kOrmqr),
                 solver_api<T>::ormqr(ctx.solver, side(), trans(), m, n, k, a + i * rows_a() * k,
                                      lda(), tau + i * k, io.data + i * m * n, m,
                                      static_cast<T*>(work), lwork_of<T>(ws), io.info + i));
    return ffi::Error::Success();
  }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(orm2r_batched(ctx.stream, end - begin, left, adjoint, m, n, k,
                           a + begin * rows_a() * k, tau + begin * k, io.data + begin * m * n));
    return ffi::Error::Success();
  }
};

// taus of shape batch(a) + (k,) and a's dtype; returns k.
ffi::ErrorOr<int64_t> check_taus(ffi::AnyBuffer a, ffi::AnyBuffer::Dimensions taus,
                                 ffi::DataType dtype, const char* op) {
  if (dtype != a.element_type()) {
    return invalid_argument(std::string(op) + ": taus must have the dtype of a");
  }
  const int64_t k = taus.size() ? taus[taus.size() - 1] : 0;
  JCM_RETURN_IF_ERROR(check_dims(taus, batch_shape(a.dimensions(), 2, {k}), op, "taus"));
  return k;
}

}  // namespace

ffi::Error geqrf_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> out,
                         ffi::Result<ffi::AnyBuffer> tau, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, factor_operands(a, out, info, "geqrf", "qr", false));
  JCM_ASSIGN_OR_RETURN(int64_t k, check_taus(a, tau->dimensions(), tau->element_type(), "geqrf"));
  if (k != std::min(mb.rows, mb.cols)) return invalid_argument("geqrf: taus must have min(m, n)");
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes,
                                                    Routine::kGeqrf, {mb.rows, mb.cols}));
  return run_typed<geqrf_traits>(a.element_type(), "geqrf", call, scratch,
                                 in_place(a, out, info, mb), mb.rows, mb.cols, any_ptr(tau));
}

ffi::Error orgqr_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::AnyBuffer tau, ffi::Result<ffi::AnyBuffer> q,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t strategy,
                         int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, factor_operands(a, q, info, "orgqr", "q", false));
  JCM_ASSIGN_OR_RETURN(int64_t k, check_taus(a, tau.dimensions(), tau.element_type(), "orgqr"));
  if (mb.cols > mb.rows || k > mb.cols) {
    return invalid_argument("orgqr: needs m >= n >= k for a (m, n) and taus (k,)");
  }
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes,
                                                    Routine::kOrgqr, {mb.rows, mb.cols}));
  return run_typed<orgqr_traits>(a.element_type(), "orgqr", call, scratch,
                                 in_place(a, q, info, mb), mb.rows, mb.cols, k, any_ptr(tau));
}

ffi::Error ormqr_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::AnyBuffer tau, ffi::AnyBuffer c,
                         ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t left, int32_t transpose, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch ma, split_matrix_batch(a.dimensions(), "ormqr", "a"));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mc, factor_operands(c, out, info, "ormqr", "out", false));
  JCM_ASSIGN_OR_RETURN(int64_t k, check_taus(a, tau.dimensions(), tau.element_type(), "ormqr"));
  if (c.element_type() != a.element_type()) {
    return invalid_argument("ormqr: a, taus and c must have the same dtype");
  }
  // The reflector matrix has exactly k = len(taus) columns.
  const int64_t q_order = left ? mc.rows : mc.cols;
  if (ma.batch != mc.batch || ma.rows != q_order || ma.cols != k || k > q_order) {
    return invalid_argument("ormqr: a (reflectors), taus and c do not fit: need a of shape "
                            "(m, k) for left=True or (n, k) for left=False, taus (k,), c (m, n)");
  }
  JCM_ASSIGN_OR_RETURN(CallConfig call,
                       call_config(stream, device, strategy, lanes, Routine::kOrmqr,
                                   {mc.rows, mc.cols, 0, true, left != 0}));
  return run_typed<ormqr_traits>(a.element_type(), "ormqr", call, scratch,
                                 in_place(c, out, info, mc), mc.rows, mc.cols, k, left != 0,
                                 transpose != 0, any_ptr(a), any_ptr(tau));
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
JCM_SOLVER_HANDLER(jcm_geqrf, geqrf_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // a
                   .Ret<xla::ffi::AnyBuffer>()  // qr (R + reflectors)
                   .Ret<xla::ffi::AnyBuffer>()  // taus
                   JCM_INFO_RET);

JCM_SOLVER_HANDLER(jcm_orgqr, orgqr_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // a (reflectors)
                   .Arg<xla::ffi::AnyBuffer>()  // taus
                   .Ret<xla::ffi::AnyBuffer>()  // q
                   JCM_INFO_RET);

JCM_SOLVER_HANDLER(jcm_ormqr, ormqr_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // a (reflectors)
                   .Arg<xla::ffi::AnyBuffer>()  // taus
                   .Arg<xla::ffi::AnyBuffer>()  // c
                   .Ret<xla::ffi::AnyBuffer>()  // op(Q) c or c op(Q)
                   JCM_INFO_RET
                   .Attr<int32_t>("left")
                   .Attr<int32_t>("transpose"));
