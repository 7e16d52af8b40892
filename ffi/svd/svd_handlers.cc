// SVD family: gesvd (QR iteration, 64-bit cusolverDnXgesvd) and gesvdj (one-sided Jacobi; for
// the batched strategy on matrices of at most 128 x 128, this project's Jacobi kernel,
// svd_kernels.cu, in place of gesvdjBatched) as traits for run_looped, and their FFI handlers.
// Both handlers return (a destroyed, s, info) and then (u, v^H or v) only when vectors are asked
// for (RemainingRets): without them gesvdj still needs U and V buffers, which then live in the
// lane's workspace instead of in results the size of the batch.

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "core/handler_util.h"
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
  static constexpr bool kInputsOnHostSync = true;  // a 64-bit API routine (driver.h)
  InPlace<T> io;        // a, destroyed; info > 0: that many superdiagonals did not converge
  int64_t m, n;         // the column-major problem cuSOLVER sees: m >= n
  signed char job;      // 'A' (full U), 'S' (first n columns of U) or 'N' (no vectors)
  real_t<T>* s;
  T* u;   // m x (m or n); nullptr for job 'N'
  T* vt;  // n x n, V^H; nullptr for job 'N'

  int64_t u_cols() const { return job == 'A' ? m : n; }
  std::string workspace_key() const { return shape_key<T>({m, n, job}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    Workspace ws;
    JCM_CUSOLVER("cusolverDnXgesvd_bufferSize",
                 cusolverDnXgesvd_bufferSize(ctx.solver, ctx.params, job, job, m, n,
                                             cuda_data_type<T>(), io.data, m,
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
                                  io.data + i * m * n, m, cuda_data_type<real_t<T>>(), s + i * n,
                                  cuda_data_type<T>(), u_i, m, cuda_data_type<T>(), vt_i, n,
                                  cuda_data_type<T>(), work, ws.device_bytes, host,
                                  ws.host_bytes, io.info + i));
    return ffi::Error::Success();
  }
};

// --- gesvdj: one-sided Jacobi, any m x n; the Jacobi kernel for m, n <= 128 ----------------------

template <typename T>
struct gesvdj_traits {
  static constexpr const char* kName = "gesvdj";
  InPlace<T> io;  // a, destroyed; info min(m, n) + 1: no convergence within the sweeps
  int64_t m, n;
  bool vectors;  // compute U and V
  bool econ;     // U m x k, V n x k (k = min(m, n)) instead of square
  real_t<T>* s;
  T* u;  // m x u_cols(); nullptr without vectors (then workspace)
  T* v;  // n x v_cols(), V itself (not V^H); nullptr without vectors

  int64_t k() const { return std::min(m, n); }
  int64_t u_cols() const { return econ ? k() : m; }
  int64_t v_cols() const { return econ ? k() : n; }
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

  std::string workspace_key() const { return shape_key<T>({m, n, vectors, econ}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    JCM_ASSIGN_OR_RETURN(gesvdjInfo_t params, gesvdj_params_of_this_thread());
    JCM_ASSIGN_OR_RETURN(
        Workspace ws,
        lwork_workspace<T>("gesvdj_bufferSize", [&](int* lwork) {
          return solver_api<T>::gesvdj_buffer_size(ctx.solver, jobz(), econ, m, n, io.data, m, s,
                                                   u, m, v, n, lwork, params);
        }));
    ws.device_bytes += scratch_uv_bytes();
    return ws;
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_ASSIGN_OR_RETURN(gesvdjInfo_t params, gesvdj_params_of_this_thread());
    int lwork = static_cast<int>((ws.device_bytes - scratch_uv_bytes()) / sizeof(T));
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "gesvdj"),
                 solver_api<T>::gesvdj(ctx.solver, jobz(), econ, m, n, io.data + i * m * n, m,
                                       s + i * k(), u_of(i, work), m, v_of(i, work), n,
                                       lib_work(work), lwork, io.info + i, params));
    return ffi::Error::Success();
  }

  // The batched strategy is the kernel (m, n <= limits::kGesvdjKernelMaxN): one launch per
  // chunk, in shared memory (workspace only for what does not fit there; no U and V without
  // vectors), NaN and info written by the kernel itself.
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return gesvdj_small_workspace_bytes<T>(count, m, n, vectors);
  }

  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    JCM_CUDA(gesvdj_small_batched(ctx.stream, end - begin, m, n, econ, io.data + begin * m * n,
                                  s + begin * k(), vectors ? u + begin * m * u_cols() : nullptr,
                                  vectors ? v + begin * n * v_cols() : nullptr, io.info + begin,
                                  work));
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
                                           ffi::Result<ffi::AnyBuffer>& a_out,
                                           ffi::Result<ffi::AnyBuffer>& s,
                                           ffi::Result<ffi::Buffer<ffi::S32>>& info,
                                           ffi::RemainingRets& vectors, bool compute_uv,
                                           std::vector<int64_t> u_core,
                                           std::vector<int64_t> v_core, int64_t k) {
  auto dims = a.dimensions();
  JCM_RETURN_IF_ERROR(check_like(a, a_out, op, "a_out"));
  if (s->element_type() != ffi::ToReal(a.element_type())) {
    return invalid_argument(std::string(op) + ": s must have a's real dtype");
  }
  JCM_RETURN_IF_ERROR(check_dims(s->dimensions(), batch_shape(dims, 2, {k}), op, "s"));
  JCM_RETURN_IF_ERROR(check_info(info, a, op));
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
  JCM_ASSIGN_OR_RETURN(CallConfig call,
                       call_config(stream, device, strategy, lanes, Routine::kGesvd, {m, n}));
  const signed char job = !compute_uv ? 'N' : (full_matrices ? 'A' : 'S');
  return run_typed<gesvd_traits>(a.element_type(), "gesvd", call, scratch,
                                 in_place(a, a_out, info, mb), m, n, job, any_ptr(s),
                                 AnyPtr{transposed ? vec.v : vec.u},
                                 AnyPtr{transposed ? vec.u : vec.v});
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
  JCM_ASSIGN_OR_RETURN(CallConfig call,
                       call_config(stream, device, strategy, lanes, Routine::kGesvdj, {m, n}));
  return run_typed<gesvdj_traits>(a.element_type(), "gesvdj", call, scratch,
                                  in_place(a, a_out, info, mb), m, n, compute_uv != 0, econ != 0,
                                  any_ptr(s), AnyPtr{vec.u}, AnyPtr{vec.v});
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names. Both
// handlers take a and return a (destroyed), s and info, then the vectors when asked for.
#define JCM_SVD_BINDINGS                             \
  .Arg<xla::ffi::AnyBuffer>() /* a */                \
  .Ret<xla::ffi::AnyBuffer>() /* a (destroyed) */    \
  .Ret<xla::ffi::AnyBuffer>() /* s */                \
  JCM_INFO_RET                                       \
  .RemainingRets() /* u, and v^H (gesvd) or v (gesvdj), if compute_uv */

JCM_SOLVER_HANDLER(jcm_gesvd, gesvd_handler,
                   JCM_SVD_BINDINGS
                   .Attr<int32_t>("full_matrices")
                   .Attr<int32_t>("compute_uv")
                   .Attr<int32_t>("transposed"));

JCM_SOLVER_HANDLER(jcm_gesvdj, gesvdj_handler,
                   JCM_SVD_BINDINGS
                   .Attr<int32_t>("econ")
                   .Attr<int32_t>("compute_uv"));
