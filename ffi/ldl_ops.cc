// LDL^T family: Bunch-Kaufman sytrf (legacy 32-bit API) and sytrs (64-bit Xsytrs) as traits for
// run_looped, and their FFI handlers. cuSOLVER has no batched LDL^T: the batched strategy runs
// this project's kernels (ldl_kernels.cu, lower triangle, n <= kLdlKernelMaxN), one launch per
// chunk; other calls run cuSOLVER on lanes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "dispatch.h"
#include "driver.h"
#include "handler_util.h"
#include "handlers.h"
#include "ldl_kernels.h"
#include "solver_api.h"

namespace jcm {

namespace {

// A = L D L^T (or U D U^T), D block diagonal with 1x1 and 2x2 blocks, factored in place.
template <typename T>
struct sytrf_traits {
  static constexpr const char* kName = "sytrf";
  int64_t items, n;
  cublasFillMode_t uplo;
  const void* a_in;
  T* a;       // the compact factor (`ld`), in place
  int* ipiv;  // LAPACK's: 1-based, negative entries mark 2x2 blocks
  int* info;  // > 0: D(info, info) is exactly zero (the factorization still completes)
  size_t a_bytes;

  int64_t batch() const { return n == 0 ? 0 : items; }

  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, a, a_in, a_bytes));
    if (n == 0) JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }

  // The buffer size depends on n only (not on uplo).
  std::string workspace_key() const { return shape_key<T>({n}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    int lwork = 0;
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "sytrf_bufferSize"),
                 solver_api<T>::sytrf_buffer_size(ctx.solver, n, a, n, &lwork));
    // LAPACK's contract is lwork >= 1: never hand sytrf an empty workspace.
    return Workspace{static_cast<size_t>(std::max(lwork, 1)) * sizeof(T), 0};
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "sytrf"),
                 solver_api<T>::sytrf(ctx.solver, uplo, n, a + i * n * n, n, ipiv + i * n,
                                      static_cast<T*>(work),
                                      static_cast<int>(ws.device_bytes / sizeof(T)), info + i));
    return ffi::Error::Success();
  }

  bool has_batched() const { return uplo == CUBLAS_FILL_MODE_LOWER && n <= kLdlKernelMaxN; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(sytrf_lower_batched(ctx.stream, end - begin, n, a + begin * n * n, ipiv + begin * n,
                                 info + begin));
    return ffi::Error::Success();
  }
};

// Solves A X = B from sytrf's factor. The 64-bit API, so the pivots come in as int64.
template <typename T>
struct sytrs_traits {
  static constexpr const char* kName = "sytrs";
  // Xsytrs appears to read its inputs outside the handle's stream: on the H100 (cuSOLVER
  // 12.0.4) it faulted (illegal addresses, as with garbage pivots) unless every launch was
  // synchronous (CUDA_LAUNCH_BLOCKING=1 passed). See benchmarks/diag/ and results/probes/.
  static constexpr bool kInputsOnHostSync = true;
  int64_t items, n, nrhs;
  cublasFillMode_t uplo;
  const T* ld;
  const int64_t* ipiv;
  const void* b_in;
  T* x;  // b, solved in place
  int* info;
  size_t b_bytes;

  int64_t batch() const { return n == 0 || nrhs == 0 ? 0 : items; }

  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, x, b_in, b_bytes));
    JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }

  std::string workspace_key() const { return shape_key<T>({n, nrhs, uplo}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    Workspace ws;
    JCM_CUSOLVER("cusolverDnXsytrs_bufferSize",
                 cusolverDnXsytrs_bufferSize(ctx.solver, uplo, n, nrhs, cuda_data_type<T>(), ld, n,
                                             ipiv, cuda_data_type<T>(), x, n, &ws.device_bytes,
                                             &ws.host_bytes));
    return ws;
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    void* host = ws.host_bytes ? ctx.lane->host_workspace(ws.host_bytes) : nullptr;
    JCM_CUSOLVER("cusolverDnXsytrs",
                 cusolverDnXsytrs(ctx.solver, uplo, n, nrhs, cuda_data_type<T>(), ld + i * n * n,
                                  n, ipiv + i * n, cuda_data_type<T>(), x + i * n * nrhs, n, work,
                                  ws.device_bytes, host, ws.host_bytes, info + i));
    return ffi::Error::Success();
  }

  bool has_batched() const { return uplo == CUBLAS_FILL_MODE_LOWER && n <= kLdlKernelMaxN; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  // info stays 0 (prologue): as Xsytrs, a singular D shows as inf/NaN in x.
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(sytrs_lower_batched(ctx.stream, end - begin, n, nrhs, ld + begin * n * n,
                                 ipiv + begin * n, x + begin * n * nrhs));
    return ffi::Error::Success();
  }
};

}  // namespace

ffi::Error sytrf_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> ld,
                         ffi::Result<ffi::Buffer<ffi::S32>> ipiv,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t lower, int32_t strategy,
                         int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), "sytrf", "a"));
  if (mb.rows != mb.cols) return invalid_argument("sytrf: a must be square");
  if (ld->element_type() != a.element_type()) {
    return invalid_argument("sytrf: ld must have the dtype of a");
  }
  JCM_RETURN_IF_ERROR(check_dims(ld->dimensions(), batch_shape(a.dimensions(), 0, {}), "sytrf",
                                 "ld"));
  JCM_RETURN_IF_ERROR(check_dims(ipiv->dimensions(), batch_shape(a.dimensions(), 1, {}), "sytrf",
                                 "pivots"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), a.dimensions(), "sytrf"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "sytrf"));
  return dispatch_solver_dtype(a.element_type(), "sytrf", [&](auto tag) {
    using T = typename decltype(tag)::type;
    sytrf_traits<T> op{mb.batch,
                       mb.rows,
                       fill_mode(lower),
                       a.untyped_data(),
                       static_cast<T*>(ld->untyped_data()),
                       ipiv->typed_data(),
                       info->typed_data(),
                       a.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

ffi::Error sytrs_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer ld, ffi::Buffer<ffi::S64> ipiv, ffi::AnyBuffer b,
                         ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t lower, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(ld.dimensions(), "sytrs", "ld"));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mbb, split_matrix_batch(b.dimensions(), "sytrs", "b"));
  if (mb.rows != mb.cols) return invalid_argument("sytrs: ld must be square");
  if (b.element_type() != ld.element_type() || x->element_type() != ld.element_type()) {
    return invalid_argument("sytrs: ld, b and x must have the same dtype");
  }
  if (mbb.batch != mb.batch || mbb.rows != mb.rows) {
    return invalid_argument("sytrs: b must have shape batch + (n, nrhs)");
  }
  JCM_RETURN_IF_ERROR(check_dims(ipiv.dimensions(), batch_shape(ld.dimensions(), 1, {}), "sytrs",
                                 "pivots"));
  JCM_RETURN_IF_ERROR(check_dims(x->dimensions(), batch_shape(b.dimensions(), 0, {}), "sytrs",
                                 "x"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), ld.dimensions(), "sytrs"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "sytrs"));
  return dispatch_solver_dtype(ld.element_type(), "sytrs", [&](auto tag) {
    using T = typename decltype(tag)::type;
    sytrs_traits<T> op{mb.batch,
                       mb.rows,
                       mbb.cols,
                       fill_mode(lower),
                       static_cast<const T*>(ld.untyped_data()),
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
XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_sytrf, jcm::sytrf_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // a
                                  .Ret<xla::ffi::AnyBuffer>()              // ld
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // pivots
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  .Attr<int32_t>("lower")
                                  JCM_STRATEGY_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_sytrs, jcm::sytrs_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // ld
                                  .Arg<xla::ffi::Buffer<xla::ffi::S64>>()  // pivots
                                  .Arg<xla::ffi::AnyBuffer>()              // b
                                  .Ret<xla::ffi::AnyBuffer>()              // x
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  .Attr<int32_t>("lower")
                                  JCM_STRATEGY_ATTRS);
