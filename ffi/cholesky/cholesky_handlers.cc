// Cholesky (potrf, potrs) as traits for run_looped, the blocked Cholesky and the small-matrix
// kernels' handlers.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cholesky/cholesky_kernels.h"
#include "core/dispatch.h"
#include "core/driver.h"
#include "core/handler_util.h"
#include "core/handlers.h"
#include "core/solver_api.h"

namespace jcm {

namespace {

template <typename T>
struct potrf_traits {
  static constexpr const char* kName = "potrf";
  int64_t items, n;
  cublasFillMode_t uplo;
  const void* a_in;
  T* a;  // factored in place
  int* info;
  size_t a_bytes;

  int64_t batch() const { return n == 0 ? 0 : items; }
  ffi::Error prologue(cudaStream_t stream) const {
    JCM_RETURN_IF_ERROR(copy_if_not_aliased(stream, a, a_in, a_bytes));
    if (n == 0) JCM_CUDA(cudaMemsetAsync(info, 0, items * sizeof(int), stream));
    return ffi::Error::Success();
  }
  std::string workspace_key() const { return shape_key<T>({n, uplo}); }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    int lwork = 0;
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrf_bufferSize"),
                 solver_api<T>::potrf_buffer_size(ctx.solver, uplo, n, a, n, &lwork));
    return Workspace{static_cast<size_t>(lwork) * sizeof(T), 0};
  }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace& ws, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrf"),
                 solver_api<T>::potrf(ctx.solver, uplo, n, a + i * n * n, n, static_cast<T*>(work),
                                      static_cast<int>(ws.device_bytes / sizeof(T)), info + i));
    return ffi::Error::Success();
  }
  bool has_batched() const { return true; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return count * sizeof(T*);
  }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    T** ptrs = static_cast<T**>(work);
    JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, ptrs, a + begin * n * n, n * n, end - begin));
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrfBatched"),
                 solver_api<T>::potrf_batched(ctx.solver, uplo, n, ptrs, n, info + begin,
                                              end - begin));
    return ffi::Error::Success();
  }
};

// Right-looking blocked Cholesky of the whole batch on XLA's stream. Per block column: the
// diagonal blocks of every matrix by one potrfBatched, the panels beside them by one trsmBatched,
// and the trailing matrices by strided-batched GEMMs, one per block column of the trailing
// matrix, each only from the diagonal down (up, for upper): cuBLAS has no batched syrk, and a
// single GEMM over the whole square would do twice the flops. What lies outside the triangle
// asked for is garbage, and Python zeroes it as for every strategy. The GEMMs hold most of the
// flops and run the whole batch per call: what one potrf per matrix cannot do at large n. Full
// precision: the handles' default math mode (no TF32).
inline constexpr int64_t kCholeskyBlock = 256;

// The block size: kCholeskyBlock, or JCM_CHOLESKY_BLOCK (32..1024) to measure others.
inline int64_t cholesky_block() {
  static const int64_t block = block_size_from_env("JCM_CHOLESKY_BLOCK", kCholeskyBlock, 32, 1024);
  return block;
}

template <typename T>
ffi::Error potrf_blocked(const CallConfig& call, ffi::ScratchAllocator& scratch,
                         const potrf_traits<T>& op) {
  JCM_RETURN_IF_ERROR(op.prologue(call.xla_stream));
  const int64_t batch = op.batch(), n = op.n;
  if (batch == 0) return ffi::Error::Success();
  const size_t ptr_bytes = align_up(batch * sizeof(T*));
  JCM_ASSIGN_OR_RETURN(std::byte * work,
                       allocate_scratch(scratch, 2 * ptr_bytes + batch * sizeof(int), "potrf"));
  T** diag_ptrs = reinterpret_cast<T**>(work);
  T** panel_ptrs = reinterpret_cast<T**>(work + ptr_bytes);
  int* block_info = reinterpret_cast<int*>(work + 2 * ptr_bytes);
  const bool lower = op.uplo == CUBLAS_FILL_MODE_LOWER;
  const T one = scalar_of<T>(1), minus_one = scalar_of<T>(-1);
  return run_inline(call, [&](const LaneContext& ctx) -> ffi::Error {
    JCM_CUDA(cudaMemsetAsync(op.info, 0, batch * sizeof(int), ctx.stream));
    const int64_t nb = cholesky_block();
    for (int64_t j = 0; j < n; j += nb) {
      const int64_t jb = std::min(nb, n - j), rest = n - j - jb;
      T* diag = op.a + j + j * n;  // column-major: element (j, j)
      JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, diag_ptrs, diag, n * n, batch));
      JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrfBatched"),
                   solver_api<T>::potrf_batched(ctx.solver, op.uplo, jb, diag_ptrs, n,
                                                block_info, batch));
      JCM_CUDA(merge_block_info(ctx.stream, op.info, block_info, static_cast<int>(j), batch));
      if (rest == 0) break;
      // Lower: the panel below, L21 = A21 L11^-H; upper: the panel right, U12 = U11^-H A12.
      T* panel = lower ? diag + jb : diag + jb * n;
      JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, panel_ptrs, panel, n * n, batch));
      JCM_CUBLAS(routine_name<T>("cublas", "trsmBatched"),
                 solver_api<T>::trsm_batched(
                     ctx.blas, lower ? CUBLAS_SIDE_RIGHT : CUBLAS_SIDE_LEFT, op.uplo,
                     CUBLAS_OP_C, CUBLAS_DIAG_NON_UNIT, lower ? rest : jb, lower ? jb : rest,
                     &one, diag_ptrs, n, panel_ptrs, n, batch));
      // The trailing matrix, block column c (width w) at a time: lower, its rows c.. of
      // A22 -= L21 L21^H; upper, its rows ..c+w of A22 -= U12^H U12.
      T* trailing = diag + jb + jb * n;
      for (int64_t c = 0; c < rest; c += nb) {
        const int64_t w = std::min(nb, rest - c);
        const int64_t rows = lower ? rest - c : c + w;
        JCM_CUBLAS(routine_name<T>("cublas", "gemmStridedBatched"),
                   solver_api<T>::gemm_strided_batched(
                       ctx.blas, lower ? CUBLAS_OP_N : CUBLAS_OP_C,
                       lower ? CUBLAS_OP_C : CUBLAS_OP_N, rows, w, jb, &minus_one,
                       lower ? panel + c : panel, n, n * n, lower ? panel + c : panel + c * n, n,
                       n * n, &one, lower ? trailing + c + c * n : trailing + c * n, n, n * n,
                       batch));
      }
    }
    return ffi::Error::Success();
  });
}

template <typename T>
struct potrs_traits {
  static constexpr const char* kName = "potrs";
  int64_t items, n, nrhs;
  cublasFillMode_t uplo;
  const T* c;  // the factor
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
  std::string workspace_key() const { return ""; }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext&) const { return Workspace{}; }
  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace&, void*) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrs"),
                 solver_api<T>::potrs(ctx.solver, uplo, n, nrhs, c + i * n * n, n,
                                      x + i * n * nrhs, n, info + i));
    return ffi::Error::Success();
  }
  // potrsBatched takes one right-hand side only.
  bool has_batched() const { return nrhs == 1; }
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return 2 * count * sizeof(T*) + sizeof(int);
  }
  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    int64_t count = end - begin;
    T** c_ptrs = static_cast<T**>(work);
    T** x_ptrs = c_ptrs + count;
    int* status = reinterpret_cast<int*>(x_ptrs + count);
    JCM_RETURN_IF_ERROR(
        fill_pointers(ctx.stream, c_ptrs, const_cast<T*>(c) + begin * n * n, n * n, count));
    JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, x_ptrs, x + begin * n, n, count));
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "potrsBatched"),
                 solver_api<T>::potrs_batched(ctx.solver, uplo, n, 1, c_ptrs, n, x_ptrs, n, status,
                                              count));
    return ffi::Error::Success();
  }
};

}  // namespace

ffi::Error potrf_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> out,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t lower, int32_t strategy,
                         int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), "potrf", "a"));
  if (mb.rows != mb.cols) return invalid_argument("potrf: a must be square");
  JCM_RETURN_IF_ERROR(check_dims(out->dimensions(), batch_shape(a.dimensions(), 0, {}), "potrf",
                                 "factor"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), a.dimensions(), "potrf"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "potrf"));
  return dispatch_solver_dtype(a.element_type(), "potrf", [&](auto tag) {
    using T = typename decltype(tag)::type;
    potrf_traits<T> op{mb.batch,         mb.rows, fill_mode(lower),
                       a.untyped_data(), static_cast<T*>(out->untyped_data()),
                       info->typed_data(), a.size_bytes()};
    if (call.strategy == Strategy::kBlocked) return potrf_blocked(call, scratch, op);
    return run_looped(call, scratch, op);
  });
}

ffi::Error potrs_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer c, ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> x,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t lower, int32_t strategy,
                         int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mc, split_matrix_batch(c.dimensions(), "potrs", "c"));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mbb, split_matrix_batch(b.dimensions(), "potrs", "b"));
  if (mc.rows != mc.cols) return invalid_argument("potrs: the factor must be square");
  if (b.element_type() != c.element_type()) {
    return invalid_argument("potrs: the factor and b must have the same dtype");
  }
  if (mbb.batch != mc.batch || mbb.rows != mc.rows) {
    return invalid_argument("potrs: b must have shape batch + (n, nrhs)");
  }
  JCM_RETURN_IF_ERROR(check_dims(x->dimensions(), batch_shape(b.dimensions(), 0, {}), "potrs",
                                 "x"));
  JCM_RETURN_IF_ERROR(check_info(info->dimensions(), c.dimensions(), "potrs"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes, "potrs"));
  return dispatch_solver_dtype(c.element_type(), "potrs", [&](auto tag) {
    using T = typename decltype(tag)::type;
    potrs_traits<T> op{mc.batch,
                       mc.rows,
                       mbb.cols,
                       fill_mode(lower),
                       static_cast<const T*>(c.untyped_data()),
                       b.untyped_data(),
                       static_cast<T*>(x->untyped_data()),
                       info->typed_data(),
                       b.size_bytes()};
    return run_looped(call, scratch, op);
  });
}

// The small-matrix kernels (cholesky_kernels.h) on XLA's stream, one launch each: the factor
// with its other triangle zero and NaN where A is not positive definite, written in-kernel.
ffi::Error potrf_small_handler(cudaStream_t stream, ffi::AnyBuffer a,
                               ffi::Result<ffi::AnyBuffer> out, int32_t lower) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb,
                       small_square_batch(a, kCholeskySmallMaxN, "potrf_small", "a"));
  JCM_RETURN_IF_ERROR(check_small_result(a, out, "potrf_small", "factor"));
  return dispatch_solver_dtype(a.element_type(), "potrf_small", [&](auto tag) -> ffi::Error {
    using T = typename decltype(tag)::type;
    JCM_CUDA(potrf_small_batched(stream, mb.batch, mb.rows, lower != 0,
                                 static_cast<const T*>(a.untyped_data()),
                                 static_cast<T*>(out->untyped_data())));
    return ffi::Error::Success();
  });
}

ffi::Error potrs_small_handler(cudaStream_t stream, ffi::AnyBuffer c, ffi::AnyBuffer b,
                               ffi::Result<ffi::AnyBuffer> x, int32_t lower) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mc,
                       small_square_batch(c, kCholeskySmallMaxN, "potrs_small", "c"));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mbb,
                       small_rhs_batch(c, mc, b, x, kCholeskySmallMaxRhs, "potrs_small"));
  return dispatch_solver_dtype(c.element_type(), "potrs_small", [&](auto tag) -> ffi::Error {
    using T = typename decltype(tag)::type;
    JCM_CUDA(potrs_small_batched(stream, mc.batch, mc.rows, mbb.cols, lower != 0,
                                 static_cast<const T*>(c.untyped_data()),
                                 static_cast<const T*>(b.untyped_data()),
                                 static_cast<T*>(x->untyped_data())));
    return ffi::Error::Success();
  });
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_potrf, jcm::potrf_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // a
                                  .Ret<xla::ffi::AnyBuffer>()              // factor
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  .Attr<int32_t>("lower")
                                  JCM_STRATEGY_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_potrs, jcm::potrs_handler,
                              JCM_SOLVER_CTX
                                  .Arg<xla::ffi::AnyBuffer>()              // factor
                                  .Arg<xla::ffi::AnyBuffer>()              // b
                                  .Ret<xla::ffi::AnyBuffer>()              // x
                                  .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // info
                                  .Attr<int32_t>("lower")
                                  JCM_STRATEGY_ATTRS);

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_potrf_small, jcm::potrf_small_handler,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<xla::ffi::AnyBuffer>()  // a
                                  .Ret<xla::ffi::AnyBuffer>()  // factor
                                  .Attr<int32_t>("lower"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(jcm_potrs_small, jcm::potrs_small_handler,
                              xla::ffi::Ffi::Bind()
                                  .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<xla::ffi::AnyBuffer>()  // factor
                                  .Arg<xla::ffi::AnyBuffer>()  // b
                                  .Ret<xla::ffi::AnyBuffer>()  // x
                                  .Attr<int32_t>("lower"));
