// The general eigendecomposition as traits for run_looped: Xgeev per item (there is no batched
// geev).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "core/dispatch.h"
#include "core/driver.h"
#include "core/handler_util.h"
#include "core/handlers.h"
#include "core/solver_api.h"

namespace jcm {

namespace {

// --- General: right eigenvectors only (cuSOLVER computes no left ones) ----------------------
//
// For real A the eigenvalues come back complex (W of the complex type: the documented option
// that returns both members of a conjugate pair) and the eigenvectors in LAPACK's packed real
// form (a pair's real and imaginary parts in adjacent columns); Python unpacks them.

template <typename T>
struct geev_traits {
  static constexpr const char* kName = "geev";
  // A 64-bit API routine with a host workspace, as Xsytrs (ldl_ops.cc), which read its inputs
  // outside its stream on the H100: wait for them on the host first (it blocks anyway).
  static constexpr bool kInputsOnHostSync = true;
  int64_t items, n;
  bool right;  // compute the right eigenvectors
  const void* a_in;
  T* a;  // a copy of A that geev overwrites
  complex_t<T>* w;
  T* vr;  // (n, n) per item when `right`, else unused
  int* info;
  size_t a_bytes;

  cusolverEigMode_t jobvr() const {
    return right ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  }
  int64_t ldvr() const { return right ? n : 1; }
  int64_t batch() const { return n == 0 ? 0 : items; }
  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, a, a_in, a_bytes));
    if (batch() == 0) JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }
  std::string workspace_key() const { return shape_key<T>({n, right}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    Workspace ws;
    JCM_CUSOLVER("cusolverDnXgeev_bufferSize",
                 cusolverDnXgeev_bufferSize(
                     ctx.solver, ctx.params, CUSOLVER_EIG_MODE_NOVECTOR, jobvr(), n,
                     cuda_data_type<T>(), a, n, cuda_data_type<complex_t<T>>(), w,
                     cuda_data_type<T>(), nullptr, 1, cuda_data_type<T>(),
                     right ? vr : nullptr, ldvr(), cuda_data_type<T>(), &ws.device_bytes,
                     &ws.host_bytes));
    return ws;
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER("cusolverDnXgeev",
                 cusolverDnXgeev(ctx.solver, ctx.params, CUSOLVER_EIG_MODE_NOVECTOR, jobvr(), n,
                                 cuda_data_type<T>(), a + i * n * n, n,
                                 cuda_data_type<complex_t<T>>(), w + i * n, cuda_data_type<T>(),
                                 nullptr, 1, cuda_data_type<T>(),
                                 right ? vr + i * n * n : nullptr, ldvr(), cuda_data_type<T>(),
                                 work, ws.device_bytes, ctx.lane->host_workspace(ws.host_bytes),
                                 ws.host_bytes, info + i));
    return ffi::Error::Success();
  }

  bool has_batched() const { return false; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext&, int64_t, int64_t, void*) const {
    return ffi::Error::Success();
  }
};

}  // namespace

ffi::Error geev_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                        ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> a_out,
                        ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::AnyBuffer> vr,
                        ffi::Result<ffi::Buffer<ffi::S32>> info,
                        int32_t compute_right_eigenvectors, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, square_batch(a, "geev"));
  const bool right = compute_right_eigenvectors != 0;
  if (a_out->element_type() != a.element_type() || vr->element_type() != a.element_type()) {
    return invalid_argument("geev: the overwritten copy of a and vr must have the dtype of a");
  }
  JCM_RETURN_IF_ERROR(check_dims(a_out->dimensions(), batch_shape(a.dimensions(), 0, {}), "geev",
                                 "a_out"));
  JCM_RETURN_IF_ERROR(check_dims(w->dimensions(), batch_shape(a.dimensions(), 2, {mb.rows}),
                                 "geev", "eigenvalues"));
  // Without right eigenvectors vr is an empty (..., 0, 0) placeholder.
  const int64_t vr_n = right ? mb.rows : 0;
  JCM_RETURN_IF_ERROR(check_dims(vr->dimensions(),
                                 batch_shape(a.dimensions(), 2, {vr_n, vr_n}), "geev", "vr"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), a.dimensions(), "geev"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "geev"));
  return dispatch_solver_dtype(a.element_type(), "geev", [&](auto tag) -> ffi::Error {
    using T = typename decltype(tag)::type;
    const ffi::DataType complex_dtype =
        sizeof(real_t<T>) == 4 ? ffi::DataType::C64 : ffi::DataType::C128;
    if (w->element_type() != complex_dtype) {
      return invalid_argument("geev: the eigenvalues must have the complex dtype of a's precision");
    }
    geev_traits<T> op{mb.batch,
                      mb.rows,
                      right,
                      a.untyped_data(),
                      static_cast<T*>(a_out->untyped_data()),
                      static_cast<complex_t<T>*>(w->untyped_data()),
                      static_cast<T*>(vr->untyped_data()),
                      info->typed_data(),
                      a.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_geev, jcm::geev_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // a
                                  .Ret<xla::ffi::AnyBuffer>()              // a (overwritten)
                                  .Ret<xla::ffi::AnyBuffer>()              // eigenvalues
                                  .Ret<xla::ffi::AnyBuffer>()              // right eigenvectors
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  .Attr<int32_t>("compute_right_eigenvectors")
                                  JCM_STRATEGY_ATTRS);
