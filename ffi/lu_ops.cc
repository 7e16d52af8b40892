// LU family: getrf and getrs as traits for run_looped, and their FFI handlers.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "batch_kernels.h"
#include "dispatch.h"
#include "driver.h"
#include "handler_util.h"
#include "handlers.h"
#include "solver_api.h"

namespace jcm {

namespace {

template <typename T>
struct getrf_traits {
  static constexpr const char* kName = "getrf";
  int64_t items, m, n;
  const void* a_in;
  T* a;       // factored in place (the `lu` result)
  int* ipiv;  // 1-based, LAPACK
  int* info;
  size_t a_bytes;

  int64_t k() const { return std::min(m, n); }
  bool empty() const { return m == 0 || n == 0; }
  int64_t batch() const { return empty() ? 0 : items; }

  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, a, a_in, a_bytes));
    if (empty()) JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }

  std::string workspace_key() const {
    return shape_key<T>({m, n});
  }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    int lwork = 0;
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "getrf_bufferSize"),
                 solver_api<T>::getrf_buffer_size(ctx.solver, m, n, a, m, &lwork));
    return Workspace{static_cast<size_t>(lwork) * sizeof(T), 0};
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace&, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "getrf"),
                 solver_api<T>::getrf(ctx.solver, m, n, a + i * m * n, m,
                                      static_cast<T*>(work), ipiv + i * k(), info + i));
    return ffi::Error::Success();
  }

  // cuBLAS getrfBatched only takes square matrices.
  bool has_batched() const { return m == n; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return count * sizeof(T*);
  }

  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    int64_t count = end - begin;
    T** ptrs = static_cast<T**>(work);
    JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, ptrs, a + begin * n * n, n * n, count));
    JCM_CUBLAS(routine_name<T>("cublas", "getrfBatched"),
               solver_api<T>::getrf_batched(ctx.blas, n, ptrs, n, ipiv + begin * n, info + begin,
                                            count));
    return ffi::Error::Success();
  }
};

template <typename T>
struct getrs_traits {
  static constexpr const char* kName = "getrs";
  int64_t items, n, nrhs;
  cublasOperation_t trans;
  const T* lu;
  const int* ipiv;  // 1-based, LAPACK
  const void* b_in;
  T* x;             // b, solved in place
  int* info;
  size_t b_bytes;

  bool empty() const { return n == 0 || nrhs == 0; }
  int64_t batch() const { return empty() ? 0 : items; }

  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, x, b_in, b_bytes));
    // getrs reports only illegal arguments (a status error here); per-item info is always 0.
    JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }

  std::string workspace_key() const { return ""; }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext&) const { return Workspace{}; }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace&, void*) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "getrs"),
                 solver_api<T>::getrs(ctx.solver, trans, n, nrhs, lu + i * n * n, n,
                                      ipiv + i * n, x + i * n * nrhs, n, info + i));
    return ffi::Error::Success();
  }

  bool has_batched() const { return true; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return 2 * count * sizeof(T*);
  }

  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    int64_t count = end - begin;
    T** a_ptrs = static_cast<T**>(work);
    T** b_ptrs = a_ptrs + count;
    JCM_RETURN_IF_ERROR(
        fill_pointers(ctx.stream, a_ptrs, const_cast<T*>(lu) + begin * n * n, n * n, count));
    JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, b_ptrs, x + begin * n * nrhs, n * nrhs, count));
    int host_info = 0;
    JCM_CUBLAS(routine_name<T>("cublas", "getrsBatched"),
               solver_api<T>::getrs_batched(ctx.blas, trans, n, nrhs, a_ptrs, n,
                                            ipiv + begin * n, b_ptrs, n, &host_info, count));
    if (host_info != 0) {
      return invalid_argument(routine_name<T>("cublas", "getrsBatched") +
                                         ": illegal argument " + std::to_string(-host_info));
    }
    return ffi::Error::Success();
  }
};

}  // namespace

ffi::Error getrf_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> lu,
                         ffi::Result<ffi::Buffer<ffi::S32>> ipiv,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t strategy,
                         int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), "getrf", "a"));
  if (lu->element_type() != a.element_type()) {
    return invalid_argument("getrf: lu must have the dtype of a");
  }
  JCM_RETURN_IF_ERROR(check_dims(lu->dimensions(), batch_shape(a.dimensions(), 0, {}), "getrf",
                                 "lu"));
  JCM_RETURN_IF_ERROR(check_dims(ipiv->dimensions(),
                                 batch_shape(a.dimensions(), 2, {std::min(mb.rows, mb.cols)}),
                                 "getrf", "pivots"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), a.dimensions(), "getrf"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "getrf"));
  // XLA stores the matrices column-major (layouts set at lowering), so rows == cuSOLVER's m.
  return dispatch_solver_dtype(a.element_type(), "getrf", [&](auto tag) {
    using T = typename decltype(tag)::type;
    getrf_traits<T> op{mb.batch,        mb.rows,        mb.cols,
                       a.untyped_data(), static_cast<T*>(lu->untyped_data()),
                       ipiv->typed_data(), info->typed_data(), a.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

ffi::Error getrs_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer lu, ffi::Buffer<ffi::S32> ipiv, ffi::AnyBuffer b,
                         ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t trans, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(lu.dimensions(), "getrs", "lu"));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mbb, split_matrix_batch(b.dimensions(), "getrs", "b"));
  if (mb.rows != mb.cols) return invalid_argument("getrs: lu must be square");
  if (b.element_type() != lu.element_type() || x->element_type() != lu.element_type()) {
    return invalid_argument("getrs: lu, b and x must have the same dtype");
  }
  if (mbb.batch != mb.batch || mbb.rows != mb.rows) {
    return invalid_argument("getrs: b must have shape batch + (n, nrhs)");
  }
  JCM_RETURN_IF_ERROR(check_dims(ipiv.dimensions(), batch_shape(lu.dimensions(), 2, {mb.rows}),
                                 "getrs", "pivots"));
  JCM_RETURN_IF_ERROR(check_dims(x->dimensions(), batch_shape(b.dimensions(), 0, {}), "getrs",
                                 "x"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), lu.dimensions(), "getrs"));
  if (trans < 0 || trans > 2) {
    return invalid_argument("getrs: trans must be 0 (N), 1 (T) or 2 (C)");
  }
  const cublasOperation_t op_trans = trans == 0 ? CUBLAS_OP_N : trans == 1 ? CUBLAS_OP_T
                                                                          : CUBLAS_OP_C;
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "getrs"));
  return dispatch_solver_dtype(lu.element_type(), "getrs", [&](auto tag) {
    using T = typename decltype(tag)::type;
    getrs_traits<T> op{mb.batch,
                       mb.rows,
                       mbb.cols,
                       op_trans,
                       static_cast<const T*>(lu.untyped_data()),
                       ipiv.typed_data(),
                       b.untyped_data(),
                       static_cast<T*>(x->untyped_data()),
                       info->typed_data(),
                       b.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_getrf, jcm::getrf_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()                // a
                                  .Ret<xla::ffi::AnyBuffer>()                // lu
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()    // pivots
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()    // info
                                  JCM_STRATEGY_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_getrs, jcm::getrs_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()                // lu
                                  .Arg<xla::ffi::Buffer<xla::ffi::S32>>()    // pivots
                                  .Arg<xla::ffi::AnyBuffer>()                // b
                                  .Ret<xla::ffi::AnyBuffer>()                // x
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()    // info
                                  .Attr<int32_t>("trans")
                                  JCM_STRATEGY_ATTRS);
