// The symmetric/Hermitian eigendecomposition as traits for run_looped: divide and conquer
// (Xsyevd per item, XsyevBatched for the batched strategy) or Jacobi (syevj per item, this
// project's Jacobi kernel for the batched strategy, n <= limits::kSyevjKernelMaxN,
// eigh_kernels.cu); and the generalized problem with B positive definite (?sygvd / ?hegvd per
// item, XsygvStridedBatched for the batched strategy where the cuSOLVER built against has it).

#include "core/handler_util.h"
#include "eigh/eigh_kernels.h"

namespace jcm {

namespace {

// The Jacobi solvers read their controls from a syevjInfo_t and write results (residual, sweeps)
// back into it, so two concurrent calls must not share one. Each lane is one persistent thread
// and the inline path runs on XLA's calling thread: one object per thread is one per concurrent
// call, created on first use, without touching the lane pool.
class JacobiParams {
 public:
  static ffi::ErrorOr<syevjInfo_t> ForThisThread() {
    thread_local JacobiParams holder;
    if (holder.info_ == nullptr) {
      syevjInfo_t info = nullptr;
      JCM_CUSOLVER("cusolverDnCreateSyevjInfo", cusolverDnCreateSyevjInfo(&info));
      holder.info_ = info;
      // Ascending eigenvalues, as JAX (the library default; set so it never depends on it).
      JCM_CUSOLVER("cusolverDnXsyevjSetSortEig", cusolverDnXsyevjSetSortEig(info, 1));
    }
    return holder.info_;
  }
  ~JacobiParams() {
    if (info_ != nullptr) cusolverDnDestroySyevjInfo(info_);
  }

 private:
  JacobiParams() = default;
  syevjInfo_t info_ = nullptr;
};

// --- Symmetric / Hermitian: A = V diag(w) V^H, w ascending ----------------------------------

template <typename T>
struct syevd_traits {
  static constexpr const char* kName = "syevd";
  static constexpr bool kInputsOnHostSync = true;  // a 64-bit API routine (driver.h)
  static constexpr cusolverEigMode_t kJobz = CUSOLVER_EIG_MODE_VECTOR;
  InPlace<T> io;  // the triangle `uplo` of A in, the eigenvectors out
  int64_t n;
  cublasFillMode_t uplo;
  bool jacobi;
  real_t<T>* w;

  std::string workspace_key() const { return shape_key<T>({n, uplo, jacobi}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    if (jacobi) {
      JCM_ASSIGN_OR_RETURN(syevjInfo_t params, JacobiParams::ForThisThread());
      auto query = [&](int* lwork) {
        return solver_api<T>::syevj_buffer_size(ctx.solver, kJobz, uplo, n, io.data, n, w, lwork,
                                                params);
      };
      return lwork_workspace<T>(std::string(solver_api<T>::kSyevj) + "_bufferSize", query);
    }
    return batched_sizes(ctx, 0);
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    T* a_i = io.data + i * n * n;
    real_t<T>* w_i = w + i * n;
    if (jacobi) {
      JCM_ASSIGN_OR_RETURN(syevjInfo_t params, JacobiParams::ForThisThread());
      JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kSyevj),
                   solver_api<T>::syevj(ctx.solver, kJobz, uplo, n, a_i, n, w_i,
                                        static_cast<T*>(work), lwork_of<T>(ws), io.info + i,
                                        params));
      return ffi::Error::Success();
    }
    JCM_CUSOLVER("cusolverDnXsyevd",
                 cusolverDnXsyevd(ctx.solver, ctx.params, kJobz, uplo, n, cuda_data_type<T>(), a_i,
                                  n, cuda_data_type<real_t<T>>(), w_i, cuda_data_type<T>(), work,
                                  ws.device_bytes, ctx.lane->host_workspace(ws.host_bytes),
                                  ws.host_bytes, io.info + i));
    return ffi::Error::Success();
  }

  // Device and host bytes of divide and conquer: one matrix (count 0, Xsyevd) or one batched
  // call over `count` matrices (XsyevBatched); both APIs want a query. The Jacobi kernel works
  // in shared memory.
  ffi::ErrorOr<Workspace> batched_sizes(const LaneContext& ctx, int64_t count) const {
    Workspace ws;
    if (jacobi && count > 0) return ws;
    if (count == 0) {
      JCM_CUSOLVER("cusolverDnXsyevd_bufferSize",
                   cusolverDnXsyevd_bufferSize(ctx.solver, ctx.params, kJobz, uplo, n,
                                               cuda_data_type<T>(), io.data, n,
                                               cuda_data_type<real_t<T>>(), w, cuda_data_type<T>(),
                                               &ws.device_bytes, &ws.host_bytes));
      return ws;
    }
    JCM_CUSOLVER("cusolverDnXsyevBatched_bufferSize",
                 cusolverDnXsyevBatched_bufferSize(
                     ctx.solver, ctx.params, kJobz, uplo, n, cuda_data_type<T>(), io.data, n,
                     cuda_data_type<real_t<T>>(), w, cuda_data_type<T>(), &ws.device_bytes,
                     &ws.host_bytes, count));
    return ws;
  }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext& ctx, int64_t count) const {
    JCM_ASSIGN_OR_RETURN(Workspace ws, batched_sizes(ctx, count));
    return ws.device_bytes;
  }

  // The driver sized the slot for the largest chunk; this chunk (the last may be smaller) asks
  // for no more than that.
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    const int64_t count = end - begin;
    T* a_chunk = io.data + begin * n * n;
    real_t<T>* w_chunk = w + begin * n;
    if (jacobi) {
      JCM_CUDA(syevj_small_batched(ctx.stream, count, n, uplo == CUBLAS_FILL_MODE_LOWER, a_chunk,
                                   w_chunk, io.info + begin));
      return ffi::Error::Success();
    }
    JCM_ASSIGN_OR_RETURN(Workspace ws, batched_sizes(ctx, count));
    JCM_CUSOLVER("cusolverDnXsyevBatched",
                 cusolverDnXsyevBatched(ctx.solver, ctx.params, kJobz, uplo, n,
                                        cuda_data_type<T>(), a_chunk, n,
                                        cuda_data_type<real_t<T>>(), w_chunk, cuda_data_type<T>(),
                                        work, ws.device_bytes,
                                        ctx.lane->host_workspace(ws.host_bytes), ws.host_bytes,
                                        io.info + begin, count));
    return ffi::Error::Success();
  }
};

// --- Generalized: A x = w B x (type 1), A B x = w x (2), B A x = w x (3), B definite --------

template <typename T>
struct sygvd_traits {
  static constexpr const char* kName = "sygvd";
  // The eigensolvers block the host in cuSOLVER anyway; treated as the 64-bit API's (driver.h).
  static constexpr bool kInputsOnHostSync = true;
  static constexpr cusolverEigMode_t kJobz = CUSOLVER_EIG_MODE_VECTOR;
  InPlace<T> io;  // the triangle `uplo` of A in, the eigenvectors out
  T* b;           // the triangle `uplo` of B in (the handler's copy), its Cholesky factor out
  int64_t n;
  cusolverEigType_t itype;
  cublasFillMode_t uplo;
  real_t<T>* w;

  std::string workspace_key() const {
    return shape_key<T>({n, static_cast<int64_t>(itype), uplo});
  }

  // Per item the typed ?sygvd / ?hegvd: the 64-bit API's Xsygvd came with the same cuSOLVER
  // release as XsygvStridedBatched, after 12.0, and one per-item path serves every release.
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    const int ni = static_cast<int>(n);
    auto query = [&](int* lwork) {
      return solver_api<T>::sygvd_buffer_size(ctx.solver, itype, kJobz, uplo, ni, io.data, ni, b,
                                              ni, w, lwork);
    };
    return lwork_workspace<T>(std::string(solver_api<T>::kSygvd) + "_bufferSize", query);
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    const int ni = static_cast<int>(n);
    JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kSygvd),
                 solver_api<T>::sygvd(ctx.solver, itype, kJobz, uplo, ni, io.data + i * n * n,
                                      ni, b + i * n * n, ni, w + i * n, static_cast<T*>(work),
                                      lwork_of<T>(ws), io.info + i));
    return ffi::Error::Success();
  }

#if JCM_HAS_SYGV_BATCHED
  // One strided-batched call over `count` matrices; device and host bytes.
  ffi::ErrorOr<Workspace> batched_sizes(const LaneContext& ctx, int64_t count) const {
    Workspace ws;
    JCM_CUSOLVER("cusolverDnXsygvStridedBatched_bufferSize",
                 cusolverDnXsygvStridedBatched_bufferSize(
                     ctx.solver, ctx.params, itype, kJobz, uplo, n, cuda_data_type<T>(), io.data,
                     n, n * n, cuda_data_type<T>(), b, n, n * n, cuda_data_type<real_t<T>>(), w,
                     n, cuda_data_type<T>(), count, &ws.device_bytes, &ws.host_bytes));
    return ws;
  }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext& ctx, int64_t count) const {
    JCM_ASSIGN_OR_RETURN(Workspace ws, batched_sizes(ctx, count));
    return ws.device_bytes;
  }

  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    const int64_t count = end - begin;
    JCM_ASSIGN_OR_RETURN(Workspace ws, batched_sizes(ctx, count));
    JCM_CUSOLVER("cusolverDnXsygvStridedBatched",
                 cusolverDnXsygvStridedBatched(
                     ctx.solver, ctx.params, itype, kJobz, uplo, n, cuda_data_type<T>(),
                     io.data + begin * n * n, n, n * n, cuda_data_type<T>(), b + begin * n * n,
                     n, n * n, cuda_data_type<real_t<T>>(), w + begin * n, n, cuda_data_type<T>(),
                     count, work, ws.device_bytes, ctx.lane->host_workspace(ws.host_bytes),
                     ws.host_bytes, io.info + begin));
    return ffi::Error::Success();
  }
#else
  // Not reached: the limits give sygvd no batched strategy here (limits.h), which the
  // handler's call_config refuses before any run.
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const {
    return invalid_argument("sygvd: this cuSOLVER has no XsygvStridedBatched");
  }
  ffi::Error run_batched(const LaneContext&, int64_t, int64_t, void*) const {
    return invalid_argument("sygvd: this cuSOLVER has no XsygvStridedBatched");
  }
#endif
};

}  // namespace

ffi::Error syevd_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> v,
                         ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t lower, int32_t jacobi, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, factor_operands(a, v, info, "syevd", "eigenvectors", true));
  if (w->element_type() != ffi::ToReal(a.element_type())) {
    return invalid_argument("syevd: the eigenvalues must have the real dtype of a");
  }
  JCM_RETURN_IF_ERROR(check_dims(w->dimensions(), batch_shape(a.dimensions(), 1, {}), "syevd",
                                 "eigenvalues"));
  JCM_ASSIGN_OR_RETURN(CallConfig call,
                       call_config(stream, device, strategy, lanes,
                                   jacobi ? Routine::kSyevj : Routine::kSyevd,
                                   {mb.rows, mb.rows, 0, lower != 0}));
  return run_typed<syevd_traits>(a.element_type(), "syevd", call, scratch,
                                 in_place(a, v, info, mb), mb.rows, fill_mode(lower), jacobi != 0,
                                 any_ptr(w));
}

ffi::Error sygvd_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> v,
                         ffi::Result<ffi::AnyBuffer> b_factor, ffi::Result<ffi::AnyBuffer> w,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t itype, int32_t lower,
                         int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, factor_operands(a, v, info, "sygvd", "eigenvectors", true));
  if (b.element_type() != a.element_type()) {
    return invalid_argument("sygvd: b must have the dtype of a");
  }
  JCM_RETURN_IF_ERROR(check_dims(b.dimensions(), batch_shape(a.dimensions(), 0, {}), "sygvd",
                                 "b"));
  JCM_RETURN_IF_ERROR(check_like(a, b_factor, "sygvd", "b's factor"));
  if (w->element_type() != ffi::ToReal(a.element_type())) {
    return invalid_argument("sygvd: the eigenvalues must have the real dtype of a");
  }
  JCM_RETURN_IF_ERROR(check_dims(w->dimensions(), batch_shape(a.dimensions(), 1, {}), "sygvd",
                                 "eigenvalues"));
  if (itype < 1 || itype > 3) {
    return invalid_argument("sygvd: itype must be 1, 2 or 3, got " + std::to_string(itype));
  }
  JCM_ASSIGN_OR_RETURN(CallConfig call,
                       call_config(stream, device, strategy, lanes, Routine::kSygvd,
                                   {mb.rows, mb.rows, 0, lower != 0}));
  // B is factored in place too: into its result, on XLA's stream before the lanes fork from it.
  JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, b_factor->untyped_data(), b.untyped_data(),
                                          b.size_bytes()));
  return run_typed<sygvd_traits>(a.element_type(), "sygvd", call, scratch,
                                 in_place(a, v, info, mb), any_ptr(b_factor), mb.rows,
                                 static_cast<cusolverEigType_t>(itype), fill_mode(lower),
                                 any_ptr(w));
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
JCM_SOLVER_HANDLER(jcm_syevd, syevd_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // a
                   .Ret<xla::ffi::AnyBuffer>()  // eigenvectors
                   .Ret<xla::ffi::AnyBuffer>()  // eigenvalues
                   JCM_INFO_RET
                   .Attr<int32_t>("lower")
                   .Attr<int32_t>("jacobi"));

JCM_SOLVER_HANDLER(jcm_sygvd, sygvd_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // a
                   .Arg<xla::ffi::AnyBuffer>()  // b
                   .Ret<xla::ffi::AnyBuffer>()  // eigenvectors
                   .Ret<xla::ffi::AnyBuffer>()  // b's Cholesky factor
                   .Ret<xla::ffi::AnyBuffer>()  // eigenvalues
                   JCM_INFO_RET
                   .Attr<int32_t>("itype")
                   .Attr<int32_t>("lower"));
