// QR (geqrf, orgqr/ungqr, ormqr/unmqr) as traits for run_looped.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/dispatch.h"
#include "core/driver.h"
#include "core/handler_util.h"
#include "core/handlers.h"
#include "core/solver_api.h"
#include "qr/qr_kernels.h"

namespace jcm {

namespace {

template <typename T>
struct geqrf_traits {
  static constexpr const char* kName = "geqrf";
  int64_t items, m, n;
  const void* a_in;
  T* a;  // R above the diagonal, reflectors below, in place
  T* tau;
  int* info;
  size_t a_bytes;

  int64_t k() const { return std::min(m, n); }
  int64_t batch() const { return m == 0 || n == 0 ? 0 : items; }
  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, a, a_in, a_bytes));
    JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }
  std::string workspace_key() const { return shape_key<T>({m, n}); }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    int lwork = 0;
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "geqrf_bufferSize"),
                 solver_api<T>::geqrf_buffer_size(ctx.solver, m, n, a, m, &lwork));
    return Workspace{static_cast<size_t>(lwork) * sizeof(T), 0};
  }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "geqrf"),
                 solver_api<T>::geqrf(ctx.solver, m, n, a + i * m * n, m, tau + i * k(),
                                      static_cast<T*>(work),
                                      static_cast<int>(ws.device_bytes / sizeof(T)), info + i));
    return ffi::Error::Success();
  }
  // The batched strategy: this project's ?geqr2 kernel (qr_kernels.cu), one launch per chunk.
  bool has_batched() const { return n <= kQrKernelMaxN; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(geqr2_batched(ctx.stream, end - begin, m, n, a + begin * m * n, tau + begin * k()));
    return ffi::Error::Success();
  }
};

// Householder product: the first n columns of Q = H(1) ... H(k), from geqrf's reflectors.
template <typename T>
struct orgqr_traits {
  static constexpr const char* kName = "orgqr";
  int64_t items, m, n, k;
  const void* a_in;
  T* a;  // reflectors in, Q out
  const T* tau;
  int* info;
  size_t a_bytes;

  int64_t batch() const { return m == 0 || n == 0 ? 0 : items; }
  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, a, a_in, a_bytes));
    // Zero for the batched kernels (which report nothing) and an empty batch alike.
    JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }
  std::string workspace_key() const { return shape_key<T>({m, n, k}); }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    int lwork = 0;
    JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kOrgqr) + "_bufferSize",
                 solver_api<T>::orgqr_buffer_size(ctx.solver, m, n, k, a, m, tau, &lwork));
    return Workspace{static_cast<size_t>(lwork) * sizeof(T), 0};
  }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kOrgqr),
                 solver_api<T>::orgqr(ctx.solver, m, n, k, a + i * m * n, m, tau + i * k,
                                      static_cast<T*>(work),
                                      static_cast<int>(ws.device_bytes / sizeof(T)), info + i));
    return ffi::Error::Success();
  }
  // The batched strategy: this project's ?org2r kernel (qr_kernels.cu), one launch per chunk.
  bool has_batched() const { return n <= kQrKernelMaxN; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(org2r_batched(ctx.stream, end - begin, m, n, k, a + begin * m * n, tau + begin * k));
    return ffi::Error::Success();
  }
};

// C <- op(Q) C or C op(Q), Q given by k reflectors (no explicit Q).
template <typename T>
struct ormqr_traits {
  static constexpr const char* kName = "ormqr";
  int64_t items, m, n, k;  // C is m x n
  cublasSideMode_t side;
  cublasOperation_t trans;
  const T* a;  // reflectors: (m, k) on the left, (n, k) on the right
  const T* tau;
  const void* c_in;
  T* c;
  int* info;
  size_t c_bytes;

  int64_t rows_a() const { return side == CUBLAS_SIDE_LEFT ? m : n; }
  int64_t batch() const { return m == 0 || n == 0 ? 0 : items; }
  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, c, c_in, c_bytes));
    // Zero for the batched kernel (which reports nothing) and an empty batch alike.
    JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }
  std::string workspace_key() const { return shape_key<T>({m, n, k, side, trans}); }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    int lwork = 0;
    JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kOrmqr) + "_bufferSize",
                 solver_api<T>::ormqr_buffer_size(ctx.solver, side, trans, m, n, k, a,
                                                  std::max<int64_t>(rows_a(), 1), tau, c, m,
                                                  &lwork));
    return Workspace{static_cast<size_t>(lwork) * sizeof(T), 0};
  }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", solver_api<T>::kOrmqr),
                 solver_api<T>::ormqr(ctx.solver, side, trans, m, n, k, a + i * rows_a() * k,
                                      std::max<int64_t>(rows_a(), 1), tau + i * k, c + i * m * n,
                                      m, static_cast<T*>(work),
                                      static_cast<int>(ws.device_bytes / sizeof(T)), info + i));
    return ffi::Error::Success();
  }
  // The batched strategy: this project's ?orm2r kernel (qr_kernels.cu), one launch per chunk.
  bool has_batched() const { return (side == CUBLAS_SIDE_LEFT ? n : m) <= kQrKernelMaxN; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(orm2r_batched(ctx.stream, end - begin, side == CUBLAS_SIDE_LEFT,
                           trans != CUBLAS_OP_N, m, n, k, a + begin * rows_a() * k,
                           tau + begin * k, c + begin * m * n));
    return ffi::Error::Success();
  }
};

}  // namespace

ffi::Error geqrf_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> out,
                         ffi::Result<ffi::AnyBuffer> tau, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), "geqrf", "a"));
  if (tau->element_type() != a.element_type()) {
    return invalid_argument("geqrf: tau must have the dtype of a");
  }
  JCM_RETURN_IF_ERROR(check_dims(out->dimensions(), batch_shape(a.dimensions(), 0, {}), "geqrf",
                                 "qr"));
  JCM_RETURN_IF_ERROR(check_dims(tau->dimensions(),
                                 batch_shape(a.dimensions(), 2, {std::min(mb.rows, mb.cols)}),
                                 "geqrf", "tau"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), a.dimensions(), "geqrf"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "geqrf"));
  return dispatch_solver_dtype(a.element_type(), "geqrf", [&](auto tag) {
    using T = typename decltype(tag)::type;
    geqrf_traits<T> op{mb.batch,
                       mb.rows,
                       mb.cols,
                       a.untyped_data(),
                       static_cast<T*>(out->untyped_data()),
                       static_cast<T*>(tau->untyped_data()),
                       info->typed_data(),
                       a.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

ffi::Error orgqr_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::AnyBuffer tau, ffi::Result<ffi::AnyBuffer> q,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t strategy,
                         int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), "orgqr", "a"));
  auto tau_dims = tau.dimensions();
  int64_t k = tau_dims.size() ? tau_dims[tau_dims.size() - 1] : 0;
  if (tau.element_type() != a.element_type()) {
    return invalid_argument("orgqr: tau must have the dtype of a");
  }
  if (mb.cols > mb.rows || k > mb.cols) {
    return invalid_argument("orgqr: needs m >= n >= k for a (m, n) and taus (k,)");
  }
  JCM_RETURN_IF_ERROR(check_dims(tau_dims, batch_shape(a.dimensions(), 2, {k}), "orgqr", "taus"));
  JCM_RETURN_IF_ERROR(check_dims(q->dimensions(), batch_shape(a.dimensions(), 0, {}), "orgqr",
                                 "q"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), a.dimensions(), "orgqr"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "orgqr"));
  return dispatch_solver_dtype(a.element_type(), "orgqr", [&](auto tag) {
    using T = typename decltype(tag)::type;
    orgqr_traits<T> op{mb.batch,
                       mb.rows,
                       mb.cols,
                       k,
                       a.untyped_data(),
                       static_cast<T*>(q->untyped_data()),
                       static_cast<const T*>(tau.untyped_data()),
                       info->typed_data(),
                       a.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

ffi::Error ormqr_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::AnyBuffer tau, ffi::AnyBuffer c,
                         ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t left, int32_t transpose, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch ma, split_matrix_batch(a.dimensions(), "ormqr", "a"));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mc, split_matrix_batch(c.dimensions(), "ormqr", "c"));
  auto tau_dims = tau.dimensions();
  int64_t k = tau_dims.size() ? tau_dims[tau_dims.size() - 1] : 0;
  if (tau.element_type() != a.element_type() || c.element_type() != a.element_type()) {
    return invalid_argument("ormqr: a, taus and c must have the same dtype");
  }
  int64_t q_order = left ? mc.rows : mc.cols;
  if (ma.batch != mc.batch || ma.rows != q_order || ma.cols < k || k > q_order) {
    return invalid_argument("ormqr: a (reflectors), taus and c do not fit: need a of shape "
                            "(m, k) for left=True or (n, k) for left=False, taus (k,), c (m, n)");
  }
  JCM_RETURN_IF_ERROR(check_dims(tau_dims, batch_shape(a.dimensions(), 2, {k}), "ormqr", "taus"));
  JCM_RETURN_IF_ERROR(check_dims(out->dimensions(), batch_shape(c.dimensions(), 0, {}), "ormqr",
                                 "out"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), c.dimensions(), "ormqr"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "ormqr"));
  return dispatch_solver_dtype(a.element_type(), "ormqr", [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr bool is_complex = std::is_same_v<T, cuComplex> || std::is_same_v<T, cuDoubleComplex>;
    cublasOperation_t op_trans =
        !transpose ? CUBLAS_OP_N : (is_complex ? CUBLAS_OP_C : CUBLAS_OP_T);
    // The reflector matrix a may have more columns than k (e.g. the whole geqrf output).
    ormqr_traits<T> op{mc.batch,
                       mc.rows,
                       mc.cols,
                       k,
                       left ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT,
                       op_trans,
                       static_cast<const T*>(a.untyped_data()),
                       static_cast<const T*>(tau.untyped_data()),
                       c.untyped_data(),
                       static_cast<T*>(out->untyped_data()),
                       info->typed_data(),
                       c.size_bytes()};
    if (ma.cols != k) {
      return ffi::Error(invalid_argument("ormqr: a must have exactly k = len(taus) columns"));
    }
    return run_looped(call, scratch, op);
  });
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_geqrf, jcm::geqrf_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // a
                                  .Ret<xla::ffi::AnyBuffer>()              // qr (R + reflectors)
                                  .Ret<xla::ffi::AnyBuffer>()              // taus
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  JCM_STRATEGY_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_orgqr, jcm::orgqr_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // a (reflectors)
                                  .Arg<xla::ffi::AnyBuffer>()              // taus
                                  .Ret<xla::ffi::AnyBuffer>()              // q
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  JCM_STRATEGY_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_ormqr, jcm::ormqr_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // a (reflectors)
                                  .Arg<xla::ffi::AnyBuffer>()              // taus
                                  .Arg<xla::ffi::AnyBuffer>()              // c
                                  .Ret<xla::ffi::AnyBuffer>()              // op(Q) c or c op(Q)
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  .Attr<int32_t>("left")
                                  .Attr<int32_t>("transpose")
                                  JCM_STRATEGY_ATTRS);
