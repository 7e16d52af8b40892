// SVD family: gesvd (QR iteration, 64-bit cusolverDnXgesvd) and gesvdj (one-sided Jacobi; for
// the batched strategy on matrices of at most 32 x 32, this project's Jacobi kernel,
// svd_kernels.cu, in place of gesvdjBatched) as traits for run_looped, and their FFI handlers.
// Both handlers return (a destroyed, s, info) and then (u, v^H or v) only when vectors are asked
// for (RemainingRets): without them gesvdj still needs U and V buffers, which then live in the
// lane's workspace instead of in results the size of the batch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dispatch.h"
#include "core/driver.h"
#include "core/handler_util.h"
#include "core/handlers.h"
#include "core/solver_api.h"
#include "svd/svd_kernels.h"

namespace jcm {

namespace {

// gesvdj's parameters (tolerance, sweeps, sorting) and its report (residual, sweeps done) live
// in a gesvdjInfo_t that every gesvdj call writes to, so concurrent calls must not share one.
// One per host thread: each lane is one persistent thread, and the inline path runs on XLA's
// thread. Left at cuSOLVER's defaults (tolerance = machine epsilon, 100 sweeps, descending
// order), which are JAX's.
ffi::ErrorOr<gesvdjInfo_t> gesvdj_params_of_this_thread() {
  struct Holder {
    gesvdjInfo_t info = nullptr;
    ~Holder() {
      if (info) cusolverDnDestroyGesvdjInfo(info);
    }
  };
  thread_local Holder holder;
  if (!holder.info) {
    JCM_CUSOLVER("cusolverDnCreateGesvdjInfo", cusolverDnCreateGesvdjInfo(&holder.info));
  }
  return holder.info;
}

// --- gesvd: Golub-Kahan bidiagonalization + QR iteration; needs m >= n -----------------------

template <typename T>
struct gesvd_traits {
  static constexpr const char* kName = "gesvd";
  // A 64-bit API routine with a host workspace, as Xsytrs (ldl_ops.cc), which read its inputs
  // outside its stream on the H100: wait for them on the host first (it blocks anyway).
  static constexpr bool kInputsOnHostSync = true;
  int64_t items, m, n;  // the column-major problem cuSOLVER sees: m >= n
  signed char job;      // 'A' (full U), 'S' (first n columns of U) or 'N' (no vectors)
  const void* a_in;
  T* a;  // destroyed
  real_t<T>* s;
  T* u;   // m x (m or n); nullptr for job 'N'
  T* vt;  // n x n, V^H; nullptr for job 'N'
  int* info;  // > 0: that many superdiagonals did not converge
  size_t a_bytes;

  int64_t u_cols() const { return job == 'A' ? m : n; }
  int64_t batch() const { return m == 0 || n == 0 ? 0 : items; }

  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, a, a_in, a_bytes));
    if (batch() == 0) JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }

  std::string workspace_key() const { return shape_key<T>({m, n, job}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    Workspace ws;
    JCM_CUSOLVER("cusolverDnXgesvd_bufferSize",
                 cusolverDnXgesvd_bufferSize(ctx.solver, ctx.params, job, job, m, n,
                                             cuda_data_type<T>(), a, m,
                                             cuda_data_type<real_t<T>>(), s, cuda_data_type<T>(),
                                             u, m, cuda_data_type<T>(), vt, n,
                                             cuda_data_type<T>(), &ws.device_bytes,
                                             &ws.host_bytes));
    return ws;
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    void* host = ws.host_bytes ? ctx.lane->host_workspace(ws.host_bytes) : nullptr;
    T* u_i = u ? u + i * m * u_cols() : nullptr;
    T* vt_i = vt ? vt + i * n * n : nullptr;
    JCM_CUSOLVER("cusolverDnXgesvd",
                 cusolverDnXgesvd(ctx.solver, ctx.params, job, job, m, n, cuda_data_type<T>(),
                                  a + i * m * n, m, cuda_data_type<real_t<T>>(), s + i * n,
                                  cuda_data_type<T>(), u_i, m, cuda_data_type<T>(), vt_i, n,
                                  cuda_data_type<T>(), work, ws.device_bytes, host,
                                  ws.host_bytes, info + i));
    return ffi::Error::Success();
  }

  bool has_batched() const { return false; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }
  ffi::Error run_batched(const LaneContext&, int64_t, int64_t, void*) const {
    return ffi::Error::Success();
  }
};

// --- gesvdj: one-sided Jacobi, any m x n; the Jacobi kernel for m, n <= 32 --------------------

template <typename T>
struct gesvdj_traits {
  static constexpr const char* kName = "gesvdj";
  int64_t items, m, n;
  bool vectors;  // compute U and V
  bool econ;     // U m x k, V n x k (k = min(m, n)) instead of square
  const void* a_in;
  T* a;  // destroyed
  real_t<T>* s;
  T* u;  // m x u_cols(); nullptr without vectors (then workspace)
  T* v;  // n x v_cols(), V itself (not V^H); nullptr without vectors
  int* info;  // min(m, n) + 1: no convergence within the sweeps
  size_t a_bytes;

  int64_t k() const { return std::min(m, n); }
  int64_t u_cols() const { return econ ? k() : m; }
  int64_t v_cols() const { return econ ? k() : n; }
  int64_t batch() const { return m == 0 || n == 0 ? 0 : items; }
  cusolverEigMode_t jobz() const {
    return vectors ? CUSOLVER_EIG_MODE_VECTOR : CUSOLVER_EIG_MODE_NOVECTOR;
  }
  // Without vectors, gesvdj's U and V of item i sit at the start of its lane's workspace slot.
  size_t scratch_uv_bytes() const {
    return vectors ? 0 : align_up((m * u_cols() + n * v_cols()) * sizeof(T));
  }
  T* u_of(int64_t i, void* work) const {
    return vectors ? u + i * m * u_cols() : static_cast<T*>(work);
  }
  T* v_of(int64_t i, void* work) const {
    return vectors ? v + i * n * v_cols() : static_cast<T*>(work) + m * u_cols();
  }
  T* lib_work(void* work) const {
    return reinterpret_cast<T*>(static_cast<std::byte*>(work) + scratch_uv_bytes());
  }

  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, a, a_in, a_bytes));
    if (batch() == 0) JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }

  std::string workspace_key() const { return shape_key<T>({m, n, vectors, econ}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    JCM_ASSIGN_OR_RETURN(gesvdjInfo_t params, gesvdj_params_of_this_thread());
    int lwork = 0;
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "gesvdj_bufferSize"),
                 solver_api<T>::gesvdj_buffer_size(ctx.solver, jobz(), econ, m, n, a, m, s, u, m,
                                                   v, n, &lwork, params));
    return Workspace{scratch_uv_bytes() + static_cast<size_t>(lwork) * sizeof(T), 0};
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_ASSIGN_OR_RETURN(gesvdjInfo_t params, gesvdj_params_of_this_thread());
    int lwork = static_cast<int>((ws.device_bytes - scratch_uv_bytes()) / sizeof(T));
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "gesvdj"),
                 solver_api<T>::gesvdj(ctx.solver, jobz(), econ, m, n, a + i * m * n, m,
                                       s + i * k(), u_of(i, work), m, v_of(i, work), n,
                                       lib_work(work), lwork, info + i, params));
    return ffi::Error::Success();
  }

  // The batched strategy is the kernel: one launch per chunk, no workspace (it works in shared
  // memory and needs no U and V without vectors), NaN and info written by the kernel itself.
  bool has_batched() const { return m <= kGesvdjKernelMaxN && n <= kGesvdjKernelMaxN; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t) const { return 0; }

  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void*) const {
    JCM_CUDA(gesvdj_small_batched(ctx.stream, end - begin, m, n, econ, a + begin * m * n,
                                  s + begin * k(), vectors ? u + begin * m * u_cols() : nullptr,
                                  vectors ? v + begin * n * v_cols() : nullptr, info + begin));
    return ffi::Error::Success();
  }
};

// Checks shared by both handlers: dtypes of s / u / v, the shapes of s and info, and that the
// vectors are among the remaining results exactly when asked for. Returns them (or nullptrs).
struct SvdVectors {
  void* u = nullptr;
  void* v = nullptr;
};

ffi::ErrorOr<SvdVectors> check_svd_results(const char* op, ffi::AnyBuffer a,
                                           ffi::Result<ffi::AnyBuffer> a_out,
                                           ffi::Result<ffi::AnyBuffer> s,
                                           ffi::Result<ffi::Buffer<ffi::S32>> info,
                                           ffi::RemainingRets vectors, bool compute_uv,
                                           std::vector<int64_t> u_core,
                                           std::vector<int64_t> v_core, int64_t k) {
  auto dims = a.dimensions();
  if (a_out->element_type() != a.element_type() ||
      s->element_type() != ffi::ToReal(a.element_type())) {
    return invalid_argument(std::string(op) +
                            ": s must have a's real dtype and the work copy a's dtype");
  }
  JCM_RETURN_IF_ERROR(check_dims(a_out->dimensions(), batch_shape(dims, 0, {}), op, "a_out"));
  JCM_RETURN_IF_ERROR(check_dims(s->dimensions(), batch_shape(dims, 2, {k}), op, "s"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), dims, op));
  if (vectors.size() != (compute_uv ? 2u : 0u)) {
    return invalid_argument(std::string(op) + ": expected " + (compute_uv ? "2" : "no") +
                            " vector results after info, got " +
                            std::to_string(vectors.size()));
  }
  SvdVectors out;
  if (!compute_uv) return out;
  JCM_ASSIGN_OR_RETURN(auto u, vectors.get<ffi::AnyBuffer>(0));
  JCM_ASSIGN_OR_RETURN(auto v, vectors.get<ffi::AnyBuffer>(1));
  if (u->element_type() != a.element_type() || v->element_type() != a.element_type()) {
    return invalid_argument(std::string(op) + ": the singular vectors must have a's dtype");
  }
  auto batch_dims = batch_shape(dims, 2, {});
  auto with_core = [&](const std::vector<int64_t>& core) {
    auto full = batch_dims;
    full.insert(full.end(), core.begin(), core.end());
    return full;
  };
  JCM_RETURN_IF_ERROR(check_dims(u->dimensions(), with_core(u_core), op, "u"));
  JCM_RETURN_IF_ERROR(check_dims(v->dimensions(), with_core(v_core), op, "v"));
  out.u = u->untyped_data();
  out.v = v->untyped_data();
  return out;
}

}  // namespace

// a is (..., rows, cols). transposed = false: column-major buffers, rows >= cols. transposed =
// true (a wide matrix): row-major buffers, i.e. the column-major cols x rows matrix A^T, whose
// SVD A^T = U' S V'^H gives A = conj(V') S U'^T: gesvd's V'^H, read row-major, is A's U and its U'
// is A's V^H. So the handler only swaps the two vector buffers; no data moves.
ffi::Error gesvd_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> a_out,
                         ffi::Result<ffi::AnyBuffer> s, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         ffi::RemainingRets vectors, int32_t full_matrices, int32_t compute_uv,
                         int32_t transposed, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), "gesvd", "a"));
  const int64_t rows = mb.rows, cols = mb.cols, k = std::min(rows, cols);
  const int64_t m = transposed ? cols : rows, n = transposed ? rows : cols;
  if (m < n) {
    return invalid_argument("gesvd: needs rows >= cols (or transposed = 1 for a wide matrix)");
  }
  JCM_ASSIGN_OR_RETURN(
      SvdVectors vec,
      check_svd_results("gesvd", a, a_out, s, info, vectors, compute_uv,
                        {rows, full_matrices ? rows : k}, {full_matrices ? cols : k, cols}, k));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "gesvd"));
  return dispatch_solver_dtype(a.element_type(), "gesvd", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* u = static_cast<T*>(transposed ? vec.v : vec.u);
    T* vt = static_cast<T*>(transposed ? vec.u : vec.v);
    signed char job = !compute_uv ? 'N' : (full_matrices ? 'A' : 'S');
    gesvd_traits<T> op{mb.batch,
                       m,
                       n,
                       job,
                       a.untyped_data(),
                       static_cast<T*>(a_out->untyped_data()),
                       static_cast<real_t<T>*>(s->untyped_data()),
                       u,
                       vt,
                       info->typed_data(),
                       a.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

// a is (..., m, n), column-major, any shape. The vectors come back as U (m, m or k) and V itself
// (n, n or k), both column-major; econ asks for the k-column forms.
ffi::Error gesvdj_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                          ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> a_out,
                          ffi::Result<ffi::AnyBuffer> s, ffi::Result<ffi::Buffer<ffi::S32>> info,
                          ffi::RemainingRets vectors, int32_t econ, int32_t compute_uv,
                          int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), "gesvdj", "a"));
  const int64_t m = mb.rows, n = mb.cols, k = std::min(m, n);
  JCM_ASSIGN_OR_RETURN(SvdVectors vec,
                       check_svd_results("gesvdj", a, a_out, s, info, vectors, compute_uv,
                                         {m, econ ? k : m}, {n, econ ? k : n}, k));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "gesvdj"));
  return dispatch_solver_dtype(a.element_type(), "gesvdj", [&](auto tag) {
    using T = typename decltype(tag)::type;
    gesvdj_traits<T> op{mb.batch,
                        m,
                        n,
                        compute_uv != 0,
                        econ != 0,
                        a.untyped_data(),
                        static_cast<T*>(a_out->untyped_data()),
                        static_cast<real_t<T>*>(s->untyped_data()),
                        static_cast<T*>(vec.u),
                        static_cast<T*>(vec.v),
                        info->typed_data(),
                        a.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_gesvd, jcm::gesvd_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // a
                                  .Ret<xla::ffi::AnyBuffer>()              // a (destroyed)
                                  .Ret<xla::ffi::AnyBuffer>()              // s
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  .RemainingRets()                         // u, vt if compute_uv
                                  .Attr<int32_t>("full_matrices")
                                  .Attr<int32_t>("compute_uv")
                                  .Attr<int32_t>("transposed")
                                  JCM_STRATEGY_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_gesvdj, jcm::gesvdj_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // a
                                  .Ret<xla::ffi::AnyBuffer>()              // a (destroyed)
                                  .Ret<xla::ffi::AnyBuffer>()              // s
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  .RemainingRets()                         // u, v if compute_uv
                                  .Attr<int32_t>("econ")
                                  .Attr<int32_t>("compute_uv")
                                  JCM_STRATEGY_ATTRS);
