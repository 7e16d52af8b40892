// The general eigendecomposition as traits for run_looped: Xgeev per item (cuSOLVER has no
// batched geev); the batched strategy is this project's tiny-matrix kernel (eig_kernels.cu).

#include "core/handler_util.h"
#include "eig/eig_kernels.h"

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
  static constexpr bool kInputsOnHostSync = true;  // a 64-bit API routine (driver.h)
  InPlace<T> io;  // a copy of A that geev overwrites
  int64_t n;
  bool right;  // compute the right eigenvectors
  complex_t<T>* w;
  T* vr;  // (n, n) per item when `right`, else unused

  cusolverEigMode_t jobvr() const {
    return right ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  }
  int64_t ldvr() const { return right ? n : 1; }
  T* vr_of(int64_t i) const { return right ? vr + i * n * n : nullptr; }
  std::string workspace_key() const { return shape_key<T>({n, right}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    Workspace ws;
    JCM_CUSOLVER("cusolverDnXgeev_bufferSize",
                 cusolverDnXgeev_bufferSize(
                     ctx.solver, ctx.params, CUSOLVER_EIG_MODE_NOVECTOR, jobvr(), n,
                     cuda_data_type<T>(), io.data, n, cuda_data_type<complex_t<T>>(), w,
                     cuda_data_type<T>(), nullptr, 1, cuda_data_type<T>(), vr_of(0), ldvr(),
                     cuda_data_type<T>(), &ws.device_bytes, &ws.host_bytes));
    return ws;
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER("cusolverDnXgeev",
                 cusolverDnXgeev(ctx.solver, ctx.params, CUSOLVER_EIG_MODE_NOVECTOR, jobvr(), n,
                                 cuda_data_type<T>(), io.data + i * n * n, n,
                                 cuda_data_type<complex_t<T>>(), w + i * n, cuda_data_type<T>(),
                                 nullptr, 1, cuda_data_type<T>(), vr_of(i), ldvr(),
                                 cuda_data_type<T>(), work, ws.device_bytes,
                                 ctx.lane->host_workspace(ws.host_bytes), ws.host_bytes,
                                 io.info + i));
    return ffi::Error::Success();
  }

  // The tiny kernel: no workspace; NaN and info written per matrix.
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return size_t{0}; }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(geev_tiny_batched(ctx.stream, end - begin, n, io.data + begin * n * n, w + begin * n,
                               right ? vr + begin * n * n : nullptr, io.info + begin));
    return ffi::Error::Success();
  }
};

}  // namespace

ffi::Error geev_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                        ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> a_out,
                        ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::AnyBuffer> vr,
                        ffi::Result<ffi::Buffer<ffi::S32>> info,
                        int32_t compute_right_eigenvectors, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, factor_operands(a, a_out, info, "geev", "a_out", true));
  const bool right = compute_right_eigenvectors != 0;
  // ToComplex maps only real types: a complex a's eigenvalues have a's own dtype.
  const bool complex_a =
      a.element_type() == ffi::DataType::C64 || a.element_type() == ffi::DataType::C128;
  const ffi::DataType complex_type = complex_a
                                         ? a.element_type()
                                         : ffi::ToComplex(a.element_type());
  if (vr->element_type() != a.element_type() || w->element_type() != complex_type) {
    return invalid_argument("geev: vr must have the dtype of a, the eigenvalues the complex "
                            "dtype of its precision");
  }
  JCM_RETURN_IF_ERROR(check_dims(w->dimensions(), batch_shape(a.dimensions(), 1, {}), "geev",
                                 "eigenvalues"));
  // Without right eigenvectors vr is an empty (..., 0, 0) placeholder.
  const int64_t vr_n = right ? mb.rows : 0;
  JCM_RETURN_IF_ERROR(check_dims(vr->dimensions(),
                                 batch_shape(a.dimensions(), 2, {vr_n, vr_n}), "geev", "vr"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes,
                                                    Routine::kGeev, {mb.rows, mb.rows}));
  return run_typed<geev_traits>(a.element_type(), "geev", call, scratch,
                                in_place(a, a_out, info, mb), mb.rows, right, any_ptr(w),
                                any_ptr(vr));
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
JCM_SOLVER_HANDLER(jcm_geev, geev_handler,
                   .Arg<xla::ffi::AnyBuffer>()  // a
                   .Ret<xla::ffi::AnyBuffer>()  // a (overwritten)
                   .Ret<xla::ffi::AnyBuffer>()  // eigenvalues
                   .Ret<xla::ffi::AnyBuffer>()  // right eigenvectors
                   JCM_INFO_RET
                   .Attr<int32_t>("compute_right_eigenvectors"));
