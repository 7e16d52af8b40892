// LU family: getrf and getrs as traits for run_looped, and their FFI handlers.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/batch_kernels.h"
#include "core/dispatch.h"
#include "core/driver.h"
#include "core/handler_util.h"
#include "core/handlers.h"
#include "lu/lu_kernels.h"
#include "core/solver_api.h"

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

// Right-looking blocked LU of the whole batch on XLA's stream (square matrices; others run on
// lanes), LAPACK ?getrf's algorithm with every step one launch for the batch. Per block column
// j: this project's ?getf2 kernel factors each matrix's panel A(j:n, j:j+nb) (one thread block
// per matrix), a ?laswp kernel applies its interchanges to the other columns, one trsmBatched
// gives U12 = L11^-1 A12 and one strided-batched GEMM the trailing update A22 -= L21 U12, which
// holds most of the flops. cuBLAS getrfBatched (JAX's lowering for batches of small matrices)
// is unblocked: its cost grows as n^3 on one block per matrix (H100 float32 256 x 1024: 141 ms).
// Full precision: the handles' default math mode (no TF32). Panel width 32: H100 float32, panels
// of 32 / 64 / 128 columns: 64x512 2.78 / 2.87 / 3.72 ms, 64x1024 12.5 / 12.5 / 24.0, 256x1024
// 64.7 / 65.3 / 98.3, 4x2048 13.2 / ~ / 54.3 (benchmarks/results/s9-lub*_*.md): the panel kernel's
// rank-1 updates grow with the width, the GEMMs gain little beyond 32.
inline constexpr int64_t kLuBlock = 32;

// The panel width: kLuBlock, or JCM_LU_BLOCK (8..kLuMaxBlock) to measure others.
inline int64_t lu_block() {
  static const int64_t block = block_size_from_env("JCM_LU_BLOCK", kLuBlock, 8, kLuMaxBlock);
  return block;
}

// Threads per matrix of the panel kernel: each column step is a few barriers and a pass over the
// panel's rows, so tall panels take more. JCM_LU_THREADS (a multiple of 32) to measure others.
inline int lu_panel_threads(int64_t rows) {
  static const int forced = threads_from_env("JCM_LU_THREADS");
  if (forced) return forced;
  return rows >= 512 ? 512 : 256;
}

// U12 = L11^-1 A12 by the ?laswp kernel itself (one thread per column), in place of
// trsmBatched: JCM_LU_TRSM=kernel, until measured against cuBLAS on the GPU.
inline bool lu_trsm_in_kernel() {
  static const bool in_kernel = [] {
    const char* env = std::getenv("JCM_LU_TRSM");
    return env != nullptr && std::string(env) == "kernel";
  }();
  return in_kernel;
}

template <typename T>
ffi::Error getrf_blocked(const CallConfig& call, ffi::ScratchAllocator& scratch,
                         const getrf_traits<T>& op) {
  if (op.m != op.n) return run_looped(call, scratch, op);
  JCM_RETURN_IF_ERROR(op.prologue(call.xla_stream));
  const int64_t batch = op.batch(), n = op.n;
  if (batch == 0) return ffi::Error::Success();
  const size_t ptr_bytes = align_up(batch * sizeof(T*));
  JCM_ASSIGN_OR_RETURN(std::byte * work, allocate_scratch(scratch, 2 * ptr_bytes, "getrf"));
  T** diag_ptrs = reinterpret_cast<T**>(work);
  T** right_ptrs = reinterpret_cast<T**>(work + ptr_bytes);
  const T one = scalar_of<T>(1), minus_one = scalar_of<T>(-1);
  return run_inline(call, [&](const LaneContext& ctx) -> ffi::Error {
    JCM_CUDA(cudaMemsetAsync(op.info, 0, batch * sizeof(int), ctx.stream));
    const int64_t nb = lu_block();
    for (int64_t j = 0; j < n; j += nb) {
      const int64_t jb = std::min(nb, n - j), rest = n - j - jb;
      JCM_CUDA(getf2_panel_batched(ctx.stream, batch, n, j, jb, op.a, op.ipiv, op.info,
                                   lu_panel_threads(n - j)));
      T* diag = op.a + j + j * n;  // column-major: element (j, j)
      T* right = diag + jb * n;    // A12, and A22 below it
      if (lu_trsm_in_kernel()) {
        JCM_CUDA(laswp_trsm_outside_panel_batched(ctx.stream, batch, n, j, jb, op.a, op.ipiv));
        if (rest == 0) break;
      } else {
        JCM_CUDA(laswp_outside_panel_batched(ctx.stream, batch, n, j, jb, op.a, op.ipiv));
        if (rest == 0) break;
        JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, diag_ptrs, diag, n * n, batch));
        JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, right_ptrs, right, n * n, batch));
        JCM_CUBLAS(routine_name<T>("cublas", "trsmBatched"),
                   solver_api<T>::trsm_batched(ctx.blas, CUBLAS_SIDE_LEFT,
                                               CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N,
                                               CUBLAS_DIAG_UNIT, jb, rest, &one, diag_ptrs, n,
                                               right_ptrs, n, batch));
      }
      JCM_CUBLAS(routine_name<T>("cublas", "gemmStridedBatched"),
                 solver_api<T>::gemm_strided_batched(
                     ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, rest, rest, jb, &minus_one, diag + jb, n,
                     n * n, right, n, n * n, &one, right + jb, n, n * n, batch));
    }
    return ffi::Error::Success();
  });
}

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
    if (call.strategy == Strategy::kBlocked) return getrf_blocked(call, scratch, op);
    return run_looped(call, scratch, op);
  });
}

// The small-matrix kernel (lu_kernels.h getrf_small_batched): one launch on XLA's stream with
// JAX's outputs (0-based pivots and the permutation), NaN for a non-finite matrix in-kernel.
ffi::Error getrf_small_handler(cudaStream_t stream, ffi::AnyBuffer a,
                               ffi::Result<ffi::AnyBuffer> lu,
                               ffi::Result<ffi::Buffer<ffi::S32>> pivots,
                               ffi::Result<ffi::Buffer<ffi::S32>> permutation) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb,
                       small_square_batch(a, kGetrfSmallMaxN, "getrf_small", "a"));
  JCM_RETURN_IF_ERROR(check_small_result(a, lu, "getrf_small", "lu"));
  JCM_RETURN_IF_ERROR(check_dims(pivots->dimensions(), batch_shape(a.dimensions(), 2, {mb.rows}),
                                 "getrf_small", "pivots"));
  JCM_RETURN_IF_ERROR(check_dims(permutation->dimensions(),
                                 batch_shape(a.dimensions(), 2, {mb.rows}), "getrf_small",
                                 "permutation"));
  return dispatch_solver_dtype(a.element_type(), "getrf_small", [&](auto tag) -> ffi::Error {
    using T = typename decltype(tag)::type;
    JCM_CUDA(getrf_small_batched(stream, mb.batch, mb.rows, static_cast<const T*>(a.untyped_data()),
                                 static_cast<T*>(lu->untyped_data()), pivots->typed_data(),
                                 permutation->typed_data()));
    return ffi::Error::Success();
  });
}

// The small-system kernel (lu_kernels.h getrs_small_batched) on XLA's stream: JAX's 0-based
// pivots, one launch.
ffi::Error getrs_small_handler(cudaStream_t stream, ffi::AnyBuffer lu,
                               ffi::Buffer<ffi::S32> pivots, ffi::AnyBuffer b,
                               ffi::Result<ffi::AnyBuffer> x, int32_t trans) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb,
                       small_square_batch(lu, kGetrfSmallMaxN, "getrs_small", "lu"));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mbb,
                       small_rhs_batch(lu, mb, b, x, kGetrsSmallMaxRhs, "getrs_small"));
  JCM_RETURN_IF_ERROR(check_dims(pivots.dimensions(), batch_shape(lu.dimensions(), 2, {mb.rows}),
                                 "getrs_small", "pivots"));
  if (trans < 0 || trans > 2) {
    return invalid_argument("getrs_small: trans must be 0 (N), 1 (T) or 2 (C)");
  }
  return dispatch_solver_dtype(lu.element_type(), "getrs_small", [&](auto tag) -> ffi::Error {
    using T = typename decltype(tag)::type;
    JCM_CUDA(getrs_small_batched(stream, mb.batch, mb.rows, mbb.cols, trans,
                                 static_cast<const T*>(lu.untyped_data()), pivots.typed_data(),
                                 static_cast<const T*>(b.untyped_data()),
                                 static_cast<T*>(x->untyped_data())));
    return ffi::Error::Success();
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

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_getrf_small, jcm::getrf_small_handler,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<xla::ffi::AnyBuffer>()                // a
                                  .Ret<xla::ffi::AnyBuffer>()                // lu
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()    // pivots
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>());  // permutation

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_getrs, jcm::getrs_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()                // lu
                                  .Arg<xla::ffi::Buffer<xla::ffi::S32>>()    // pivots
                                  .Arg<xla::ffi::AnyBuffer>()                // b
                                  .Ret<xla::ffi::AnyBuffer>()                // x
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()    // info
                                  .Attr<int32_t>("trans")
                                  JCM_STRATEGY_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_getrs_small, jcm::getrs_small_handler,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<xla::ffi::AnyBuffer>()                // lu
                                  .Arg<xla::ffi::Buffer<xla::ffi::S32>>()    // pivots (0-based)
                                  .Arg<xla::ffi::AnyBuffer>()                // b
                                  .Ret<xla::ffi::AnyBuffer>()                // x
                                  .Attr<int32_t>("trans"));
