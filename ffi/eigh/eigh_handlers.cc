// The symmetric/Hermitian eigendecomposition as traits for run_looped: divide and conquer
// (Xsyevd per item, XsyevBatched for the batched strategy) or Jacobi (syevj per item, this
// project's Jacobi kernel for the batched strategy at n <= 32, eigh_kernels.cu).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "core/dispatch.h"
#include "core/driver.h"
#include "core/handler_util.h"
#include "core/handlers.h"
#include "core/solver_api.h"
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
  // A 64-bit API routine with a host workspace, as Xsytrs (ldl_ops.cc), which read its inputs
  // outside its stream on the H100: wait for them on the host first (it blocks anyway).
  static constexpr bool kInputsOnHostSync = true;
  static constexpr cusolverEigMode_t kJobz = CUSOLVER_EIG_MODE_VECTOR;
  int64_t items, n;
  cublasFillMode_t uplo;
  bool jacobi;
  const void* a_in;
  T* a;  // the triangle `uplo` of A in, the eigenvectors out (in place)
  real_t<T>* w;
  int* info;
  size_t a_bytes;

  int64_t batch() const { return n == 0 ? 0 : items; }
  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, a, a_in, a_bytes));
    if (batch() == 0) JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }
  std::string workspace_key() const { return shape_key<T>({n, uplo, jacobi}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    if (jacobi) {
      JCM_ASSIGN_OR_RETURN(syevjInfo_t params, JacobiParams::ForThisThread());
      int lwork = 0;
      JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kSyevj) + "_bufferSize",
                   solver_api<T>::syevj_buffer_size(ctx.solver, kJobz, uplo, n, a, n, w, &lwork,
                                                    params));
      return Workspace{static_cast<size_t>(lwork) * sizeof(T), 0};
    }
    Workspace ws;
    JCM_CUSOLVER("cusolverDnXsyevd_bufferSize",
                 cusolverDnXsyevd_bufferSize(ctx.solver, ctx.params, kJobz, uplo, n,
                                             cuda_data_type<T>(), a, n,
                                             cuda_data_type<real_t<T>>(), w, cuda_data_type<T>(),
                                             &ws.device_bytes, &ws.host_bytes));
    return ws;
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    T* a_i = a + i * n * n;
    real_t<T>* w_i = w + i * n;
    if (jacobi) {
      JCM_ASSIGN_OR_RETURN(syevjInfo_t params, JacobiParams::ForThisThread());
      JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kSyevj),
                   solver_api<T>::syevj(ctx.solver, kJobz, uplo, n, a_i, n, w_i,
                                        static_cast<T*>(work),
                                        static_cast<int>(ws.device_bytes / sizeof(T)), info + i,
                                        params));
      return ffi::Error::Success();
    }
    JCM_CUSOLVER("cusolverDnXsyevd",
                 cusolverDnXsyevd(ctx.solver, ctx.params, kJobz, uplo, n, cuda_data_type<T>(), a_i,
                                  n, cuda_data_type<real_t<T>>(), w_i, cuda_data_type<T>(), work,
                                  ws.device_bytes, ctx.lane->host_workspace(ws.host_bytes),
                                  ws.host_bytes, info + i));
    return ffi::Error::Success();
  }

  bool has_batched() const { return !jacobi || n <= kSyevjKernelMaxN; }

  // Device and host bytes of one batched call over `count` matrices (both APIs want a query).
  ffi::ErrorOr<Workspace> batched_sizes(const LaneContext& ctx, int64_t count) const {
    if (jacobi) return Workspace{};  // the kernel works in shared memory
    Workspace ws;
    JCM_CUSOLVER("cusolverDnXsyevBatched_bufferSize",
                 cusolverDnXsyevBatched_bufferSize(
                     ctx.solver, ctx.params, kJobz, uplo, n, cuda_data_type<T>(), a, n,
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
    T* a_chunk = a + begin * n * n;
    real_t<T>* w_chunk = w + begin * n;
    if (jacobi) {
      JCM_CUDA(syevj_small_batched(ctx.stream, count, n, uplo == CUBLAS_FILL_MODE_LOWER, a_chunk,
                                   w_chunk, info + begin));
      return ffi::Error::Success();
    }
    JCM_ASSIGN_OR_RETURN(Workspace ws, batched_sizes(ctx, count));
    JCM_CUSOLVER("cusolverDnXsyevBatched",
                 cusolverDnXsyevBatched(ctx.solver, ctx.params, kJobz, uplo, n,
                                        cuda_data_type<T>(), a_chunk, n,
                                        cuda_data_type<real_t<T>>(), w_chunk, cuda_data_type<T>(),
                                        work, ws.device_bytes,
                                        ctx.lane->host_workspace(ws.host_bytes), ws.host_bytes,
                                        info + begin, count));
    return ffi::Error::Success();
  }
};

}  // namespace

ffi::Error syevd_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> v,
                         ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t lower, int32_t jacobi, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, square_batch(a, "syevd"));
  if (v->element_type() != a.element_type()) {
    return invalid_argument("syevd: the eigenvectors must have the dtype of a");
  }
  JCM_RETURN_IF_ERROR(check_dims(v->dimensions(), batch_shape(a.dimensions(), 0, {}), "syevd",
                                 "eigenvectors"));
  JCM_RETURN_IF_ERROR(check_dims(w->dimensions(), batch_shape(a.dimensions(), 2, {mb.rows}),
                                 "syevd", "eigenvalues"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), a.dimensions(), "syevd"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "syevd"));
  return dispatch_solver_dtype(a.element_type(), "syevd", [&](auto tag) -> ffi::Error {
    using T = typename decltype(tag)::type;
    if (w->element_type() != (sizeof(real_t<T>) == 4 ? ffi::DataType::F32 : ffi::DataType::F64)) {
      return invalid_argument("syevd: the eigenvalues must have the real dtype of a");
    }
    syevd_traits<T> op{mb.batch,
                       mb.rows,
                       fill_mode(lower),
                       jacobi != 0,
                       a.untyped_data(),
                       static_cast<T*>(v->untyped_data()),
                       static_cast<real_t<T>*>(w->untyped_data()),
                       info->typed_data(),
                       a.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_syevd, jcm::syevd_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // a
                                  .Ret<xla::ffi::AnyBuffer>()              // eigenvectors
                                  .Ret<xla::ffi::AnyBuffer>()              // eigenvalues
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  .Attr<int32_t>("lower")
                                  .Attr<int32_t>("jacobi")
                                  JCM_STRATEGY_ATTRS);
