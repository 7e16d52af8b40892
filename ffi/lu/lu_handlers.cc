// LU family: getrf and getrs as traits for run_looped, and their FFI handlers.

#include <algorithm>

#include "core/handler_util.h"
#include "lu/lu_kernels.h"

namespace jcm {

namespace {

template <typename T>
struct getrf_traits {
  static constexpr const char* kName = "getrf";
  InPlace<T> io;  // a factored in place (the `lu` result)
  int64_t m, n;
  int* ipiv;  // 1-based, LAPACK

  int64_t k() const { return std::min(m, n); }
  std::string workspace_key() const { return shape_key<T>({m, n}); }

  ffi::ErrorOr<Workspace> query_workspace(const LaneContext& ctx) const {
    return lwork_workspace<T>("getrf_bufferSize", solver_api<T>::getrf_buffer_size, ctx.solver, m,
                              n, io.data, m);
  }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace&, void* work) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "getrf"),
                 solver_api<T>::getrf(ctx.solver, m, n, io.data + i * m * n, m,
                                      static_cast<T*>(work), ipiv + i * k(), io.info + i));
    return ffi::Error::Success();
  }

  // cuBLAS getrfBatched (square matrices: core/limits.h).
  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return count * sizeof(T*);
  }

  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    int64_t count = end - begin;
    T** ptrs = static_cast<T**>(work);
    JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, ptrs, io.data + begin * n * n, n * n, count));
    JCM_CUBLAS(routine_name<T>("cublas", "getrfBatched"),
               solver_api<T>::getrf_batched(ctx.blas, n, ptrs, n, ipiv + begin * n,
                                            io.info + begin, count));
    return ffi::Error::Success();
  }
};

// Right-looking blocked LU of the whole batch on XLA's stream (square matrices), LAPACK ?getrf's
// algorithm with every step one launch for the batch. Per block column j: this project's ?getf2
// kernel factors each matrix's panel A(j:n, j:j+nb) (one thread block per matrix), a ?laswp
// kernel applies its interchanges to the other columns, one trsmBatched gives U12 = L11^-1 A12
// and one strided-batched GEMM the trailing update A22 -= L21 U12, which holds most of the
// flops. cuBLAS getrfBatched (JAX's lowering for batches of small matrices) is unblocked: its
// cost grows as n^3 on one block per matrix (H100 float32 256 x 1024: 141 ms). Full precision:
// the handles' default math mode (no TF32). Panel width limits::kLuBlock = 32 (JCM_LU_BLOCK,
// core/settings.h): H100 float32, panels of 32 / 64 / 128 columns: 64x512 2.78 / 2.87 / 3.72 ms,
// 64x1024 12.5 / 12.5 / 24.0, 256x1024 64.7 / 65.3 / 98.3, 4x2048 13.2 / ~ / 54.3: the panel
// kernel's rank-1 updates grow with the width, the GEMMs gain little beyond 32. The panel kernel
// takes 512 threads per matrix for panels of 512 rows and more (each column step is a few
// barriers and a pass over the panel's rows), else 256.
template <typename T>
ffi::Error run_blocked(const CallConfig& call, ffi::ScratchAllocator& scratch,
                       const getrf_traits<T>& op) {
  const int64_t n = op.n;
  T* a = op.io.data;
  auto ptr_bytes = [](int64_t batch) { return align_up(batch * sizeof(T*)); };
  auto body = [&](const LaneContext& ctx, int64_t batch, std::byte* work) -> ffi::Error {
    T** diag_ptrs = reinterpret_cast<T**>(work);
    T** right_ptrs = reinterpret_cast<T**>(work + ptr_bytes(batch));
    const T one = scalar_of<T>(1), minus_one = scalar_of<T>(-1);
    const int64_t nb = lu_block();
    for (int64_t j = 0; j < n; j += nb) {
      const int64_t jb = std::min(nb, n - j), rest = n - j - jb;
      JCM_CUDA(getf2_panel_batched(ctx.stream, batch, n, j, jb, a, op.ipiv, op.io.info,
                                   n - j >= 512 ? 512 : 256));
      JCM_CUDA(laswp_outside_panel_batched(ctx.stream, batch, n, j, jb, a, op.ipiv));
      if (rest == 0) break;
      T* diag = a + j + j * n;   // column-major: element (j, j)
      T* right = diag + jb * n;  // A12, and A22 below it
      JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, diag_ptrs, diag, n * n, batch));
      JCM_RETURN_IF_ERROR(fill_pointers(ctx.stream, right_ptrs, right, n * n, batch));
      JCM_CUBLAS(routine_name<T>("cublas", "trsmBatched"),
                 solver_api<T>::trsm_batched(ctx.blas, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER,
                                             CUBLAS_OP_N, CUBLAS_DIAG_UNIT, jb, rest, &one,
                                             diag_ptrs, n, right_ptrs, n, batch));
      JCM_CUBLAS(routine_name<T>("cublas", "gemmStridedBatched"),
                 solver_api<T>::gemm_strided_batched(
                     ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, rest, rest, jb, &minus_one, diag + jb, n,
                     n * n, right, n, n * n, &one, right + jb, n, n * n, batch));
    }
    return ffi::Error::Success();
  };
  return run_blocked_inline(
      call, scratch, op, [&](int64_t batch) { return 2 * ptr_bytes(batch); }, body);
}

template <typename T>
struct getrs_traits {
  static constexpr const char* kName = "getrs";
  // getrs reports only illegal arguments (a status error here): per-item info is always 0.
  static constexpr bool kZeroInfo = true;
  InPlace<T> io;  // b, solved in place (the `x` result)
  int64_t n, nrhs;
  cublasOperation_t trans;
  const T* lu;
  const int* ipiv;  // 1-based, LAPACK

  std::string workspace_key() const { return ""; }
  ffi::ErrorOr<Workspace> query_workspace(const LaneContext&) const { return Workspace{}; }

  ffi::Error run_item(const LaneContext& ctx, int64_t i, const Workspace&, void*) const {
    JCM_CUSOLVER(routine_name<T>("cusolverDn", "getrs"),
                 solver_api<T>::getrs(ctx.solver, trans, n, nrhs, lu + i * n * n, n,
                                      ipiv + i * n, io.data + i * n * nrhs, n, io.info + i));
    return ffi::Error::Success();
  }

  ffi::ErrorOr<size_t> batched_workspace(const LaneContext&, int64_t count) const {
    return 2 * count * sizeof(T*);
  }

  ffi::Error run_batched(const LaneContext& ctx, int64_t begin, int64_t end, void* work) const {
    int64_t count = end - begin;
    T** a_ptrs = static_cast<T**>(work);
    T** b_ptrs = a_ptrs + count;
    JCM_RETURN_IF_ERROR(
        fill_pointers(ctx.stream, a_ptrs, const_cast<T*>(lu) + begin * n * n, n * n, count));
    JCM_RETURN_IF_ERROR(
        fill_pointers(ctx.stream, b_ptrs, io.data + begin * n * nrhs, n * nrhs, count));
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

ffi::Error check_trans(int32_t trans, const char* op) {
  if (trans >= 0 && trans <= 2) return ffi::Error::Success();
  return invalid_argument(std::string(op) + ": trans must be 0 (N), 1 (T) or 2 (C)");
}

}  // namespace

ffi::Error getrf_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> lu,
                         ffi::Result<ffi::Buffer<ffi::S32>> ipiv,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, int32_t strategy,
                         int32_t lanes) {
  // XLA stores the matrices column-major (layouts set at lowering), so rows == cuSOLVER's m.
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, factor_operands(a, lu, info, "getrf", "lu", false));
  JCM_RETURN_IF_ERROR(check_dims(ipiv->dimensions(),
                                 batch_shape(a.dimensions(), 2, {std::min(mb.rows, mb.cols)}),
                                 "getrf", "pivots"));
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes,
                                                    Routine::kGetrf, {mb.rows, mb.cols}));
  return run_typed<getrf_traits>(a.element_type(), "getrf", call, scratch,
                                 in_place(a, lu, info, mb), mb.rows, mb.cols, ipiv->typed_data());
}

ffi::Error getrs_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                         ffi::AnyBuffer lu, ffi::Buffer<ffi::S32> ipiv, ffi::AnyBuffer b,
                         ffi::Result<ffi::AnyBuffer> x, ffi::Result<ffi::Buffer<ffi::S32>> info,
                         int32_t trans, int32_t strategy, int32_t lanes) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, solve_operands(lu, "lu", b, x, "getrs"));
  JCM_RETURN_IF_ERROR(check_dims(ipiv.dimensions(), batch_shape(lu.dimensions(), 1, {}),
                                 "getrs", "pivots"));
  JCM_RETURN_IF_ERROR(check_info(info, lu, "getrs"));
  JCM_RETURN_IF_ERROR(check_trans(trans, "getrs"));
  const cublasOperation_t op_trans = trans == 0 ? CUBLAS_OP_N : trans == 1 ? CUBLAS_OP_T
                                                                          : CUBLAS_OP_C;
  JCM_ASSIGN_OR_RETURN(CallConfig call, call_config(stream, device, strategy, lanes,
                                                    Routine::kGetrs, {mb.rows, mb.rows, mb.cols}));
  return run_typed<getrs_traits>(lu.element_type(), "getrs", call, scratch,
                                 in_place(b, x, info, mb), mb.rows, mb.cols, op_trans, any_ptr(lu),
                                 ipiv.typed_data());
}

// The small-matrix kernel (lu_kernels.h getrf_small_batched): one launch on XLA's stream with
// JAX's outputs (0-based pivots and the permutation), NaN for a non-finite matrix in-kernel.
ffi::Error getrf_small_handler(cudaStream_t stream, ffi::AnyBuffer a,
                               ffi::Result<ffi::AnyBuffer> lu,
                               ffi::Result<ffi::Buffer<ffi::S32>> pivots,
                               ffi::Result<ffi::Buffer<ffi::S32>> permutation) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb,
                       small_square_batch(a, limits::kGetrfSmallMaxN, "getrf_small", "a"));
  JCM_RETURN_IF_ERROR(check_small_result(a, lu, "getrf_small", "lu"));
  const auto vector_shape = batch_shape(a.dimensions(), 2, {mb.rows});
  JCM_RETURN_IF_ERROR(check_dims(pivots->dimensions(), vector_shape, "getrf_small", "pivots"));
  JCM_RETURN_IF_ERROR(
      check_dims(permutation->dimensions(), vector_shape, "getrf_small", "permutation"));
  return launch_typed(a.element_type(), "getrf_small", [&](auto tag) {
    return getrf_small_batched<tag_type<decltype(tag)>>(stream, mb.batch, mb.rows, any_ptr(a),
                                                        any_ptr(lu), pivots->typed_data(),
                                                        permutation->typed_data());
  });
}

// The small-system kernel (lu_kernels.h getrs_small_batched) on XLA's stream: JAX's 0-based
// pivots, one launch.
ffi::Error getrs_small_handler(cudaStream_t stream, ffi::AnyBuffer lu,
                               ffi::Buffer<ffi::S32> pivots, ffi::AnyBuffer b,
                               ffi::Result<ffi::AnyBuffer> x, int32_t trans) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb,
                       solve_operands(lu, "lu", b, x, "getrs_small", limits::kGetrfSmallMaxN,
                                      limits::kGetrsSmallMaxRhs));
  JCM_RETURN_IF_ERROR(check_dims(pivots.dimensions(), batch_shape(lu.dimensions(), 1, {}),
                                 "getrs_small", "pivots"));
  JCM_RETURN_IF_ERROR(check_trans(trans, "getrs_small"));
  return launch_typed(lu.element_type(), "getrs_small", [&](auto tag) {
    return getrs_small_batched<tag_type<decltype(tag)>>(stream, mb.batch, mb.rows, mb.cols, trans,
                                                        any_ptr(lu), pivots.typed_data(),
                                                        any_ptr(b), any_ptr(x));
  });
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
JCM_SOLVER_HANDLER(jcm_getrf, getrf_handler,
                   .Arg<xla::ffi::AnyBuffer>()              // a
                   .Ret<xla::ffi::AnyBuffer>()              // lu
                   .Ret<xla::ffi::Buffer<xla::ffi::S32>>()  // pivots
                   JCM_INFO_RET);

JCM_KERNEL_HANDLER(jcm_getrf_small, getrf_small_handler,
                   .Arg<xla::ffi::AnyBuffer>()                // a
                   .Ret<xla::ffi::AnyBuffer>()                // lu
                   .Ret<xla::ffi::Buffer<xla::ffi::S32>>()    // pivots
                   .Ret<xla::ffi::Buffer<xla::ffi::S32>>());  // permutation

JCM_SOLVER_HANDLER(jcm_getrs, getrs_handler,
                   JCM_SOLVE_BINDINGS(.Arg<xla::ffi::Buffer<xla::ffi::S32>>())  // lu, pivots, b
                   .Attr<int32_t>("trans"));

JCM_KERNEL_HANDLER(jcm_getrs_small, getrs_small_handler,
                   .Arg<xla::ffi::AnyBuffer>()              // lu
                   .Arg<xla::ffi::Buffer<xla::ffi::S32>>()  // pivots (0-based)
                   .Arg<xla::ffi::AnyBuffer>()              // b
                   .Ret<xla::ffi::AnyBuffer>()              // x
                   .Attr<int32_t>("trans"));
