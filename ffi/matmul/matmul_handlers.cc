// Matrix multiply through cuBLASLt: the handler behind jax_cusolver_ms.matmul.
//
// JAX arrays are row-major, and a row-major r x c matrix is, to cuBLAS, the column-major c x r
// matrix of its transpose. So C = op(a) op(b) is computed as C^T = op(b)^T op(a)^T with our b in
// cuBLAS's A slot and our a in its B slot: no copies, and the transpose/conjugate-transpose of
// each operand is the same op flag on its stored matrix. A plan (matmul descriptor, layouts, the
// chosen algorithm and its workspace size) is built once per call shape and reused; the
// workspace comes from XLA's scratch allocator on every call; everything runs on XLA's stream.
// cuBLAS's own GEMM (cublasGemmStridedBatchedEx, then an epilogue kernel) runs where cuBLASLt has
// no algorithm, where autotuning finds it faster, or when the caller pins it.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/handler_util.h"
#include "core/per_process.h"
#include "matmul/matmul_kernels.h"

namespace jcm {

namespace {

// Most workspace an algorithm may ask for: what XLA grants its own GEMMs on Hopper.
constexpr size_t kMaxWorkspaceBytes = size_t{32} << 20;
// Heuristic candidates timed once per plan when the algorithm is autotuned.
constexpr int kAutotuneCandidates = 16;
constexpr int kAutotuneRuns = 3;
// The `algorithm` attribute: -1 autotunes (cuBLASLt's candidates and cuBLAS's own GEMM), -2
// pins cuBLAS's own GEMM (cublasGemmStridedBatchedEx + epilogue kernel), i >= 0 pins the
// heuristic's i-th candidate.
constexpr int32_t kAutotune = -1;
constexpr int32_t kCublasGemm = -2;
constexpr int32_t kMaxAlgorithm = limits::kMatmulMaxAlgorithm;

// --- Element and compute types ------------------------------------------------------------------

struct MatmulTypes {
  cudaDataType operand, result, scale;
  cublasComputeType_t compute;
};

// The one dtype switch of the matmul: each operand dtype's cudaDataType. Half precisions scale
// and accumulate in float32 (and may return float32); float32/complex64 use TF32 tensor cores
// only when the caller allows it.
ffi::ErrorOr<MatmulTypes> matmul_types(ffi::DataType operand, ffi::DataType result,
                                       bool allow_tf32) {
  struct Kind {
    ffi::DataType dtype;
    cudaDataType type;
  };
  static constexpr Kind kKinds[] = {{ffi::DataType::BF16, CUDA_R_16BF},
                                    {ffi::DataType::F16, CUDA_R_16F},
                                    {ffi::DataType::F32, CUDA_R_32F},
                                    {ffi::DataType::F64, CUDA_R_64F},
                                    {ffi::DataType::C64, CUDA_C_32F},
                                    {ffi::DataType::C128, CUDA_C_64F}};
  const Kind* kind = nullptr;
  for (const Kind& k : kKinds) kind = k.dtype == operand ? &k : kind;
  if (kind == nullptr) {
    return invalid_argument("matmul: unsupported dtype " + dtype_name(operand) +
                            "; expected bfloat16, float16, float32, float64, complex64 or "
                            "complex128");
  }
  const bool half = operand == ffi::DataType::BF16 || operand == ffi::DataType::F16;
  if (result != operand && !(half && result == ffi::DataType::F32)) {
    return invalid_argument("matmul: unsupported result dtype " + dtype_name(result) +
                            " for operands of dtype " + dtype_name(operand));
  }
  const bool single = operand == ffi::DataType::F32 || operand == ffi::DataType::C64;
  const bool double_ = operand == ffi::DataType::F64 || operand == ffi::DataType::C128;
  const cublasComputeType_t compute =
      double_ ? CUBLAS_COMPUTE_64F
              : (single && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  return MatmulTypes{kind->type, result == operand ? kind->type : CUDA_R_32F,
                     half ? CUDA_R_32F : kind->type, compute};
}

bool is_complex(cudaDataType t) { return t == CUDA_C_32F || t == CUDA_C_64F; }

// alpha = 1 and beta = 0 in the scale type (host pointer mode).
struct Scalars {
  alignas(16) unsigned char one[16] = {};
  alignas(16) unsigned char zero[16] = {};
  explicit Scalars(cudaDataType scale) {
    if (scale == CUDA_R_64F || scale == CUDA_C_64F) {
      const double v = 1.0;
      std::memcpy(one, &v, sizeof(v));
    } else {
      const float v = 1.0f;
      std::memcpy(one, &v, sizeof(v));
    }
  }
};

// --- Shapes -------------------------------------------------------------------------------------

// One call, in row-major terms: out (batch x rows x cols) = op(a) (rows x inner) op(b).
struct MatmulShape {
  int64_t batch, rows, cols, inner;
  int64_t batch_a, batch_b;  // 1 (broadcast to every item) or batch
};

int64_t product(ffi::AnyBuffer::Dimensions dims, size_t count) {
  int64_t p = 1;
  for (size_t i = 0; i < count; ++i) p *= dims[i];
  return p;
}

// Checks the call's contract (ranks, inner dims, broadcasting of the batch dims, the result's
// shape) and reads the problem size off it.
ffi::ErrorOr<MatmulShape> matmul_shape(ffi::AnyBuffer::Dimensions a, ffi::AnyBuffer::Dimensions b,
                                       ffi::AnyBuffer::Dimensions out, bool trans_a,
                                       bool trans_b) {
  if (a.size() < 2 || b.size() < 2 || out.size() < 2) {
    return invalid_argument("matmul: a, b and the result need rank >= 2, got ranks " +
                            std::to_string(a.size()) + ", " + std::to_string(b.size()) + ", " +
                            std::to_string(out.size()));
  }
  const size_t ra = a.size(), rb = b.size(), ro = out.size();
  const int64_t rows = trans_a ? a[ra - 1] : a[ra - 2];
  const int64_t inner = trans_a ? a[ra - 2] : a[ra - 1];
  const int64_t inner_b = trans_b ? b[rb - 1] : b[rb - 2];
  const int64_t cols = trans_b ? b[rb - 2] : b[rb - 1];
  if (inner != inner_b) {
    return invalid_argument("matmul: inner dimensions differ: op(a) has " +
                            std::to_string(inner) + " columns, op(b) has " +
                            std::to_string(inner_b) + " rows");
  }
  if (out[ro - 2] != rows || out[ro - 1] != cols) {
    return invalid_argument("matmul: the result's last two dims must be (" +
                            std::to_string(rows) + ", " + std::to_string(cols) + ")");
  }
  // Batch dims broadcast as in jnp.matmul: right-aligned, each equal to the result's or 1.
  const size_t batch_rank = ro - 2;
  if (ra - 2 > batch_rank || rb - 2 > batch_rank) {
    return invalid_argument("matmul: the result has fewer batch dims than an operand");
  }
  for (size_t i = 0; i < batch_rank; ++i) {
    const int64_t want = out[i];
    const size_t from_end = batch_rank - i;
    const int64_t da = from_end <= ra - 2 ? a[ra - 2 - from_end] : 1;
    const int64_t db = from_end <= rb - 2 ? b[rb - 2 - from_end] : 1;
    const bool ok = (da == want || da == 1) && (db == want || db == 1) &&
                    (want == da || want == db);
    if (!ok) {
      return invalid_argument("matmul: batch dim " + std::to_string(i) + " of a (" +
                              std::to_string(da) + ") and b (" + std::to_string(db) +
                              ") do not broadcast to the result's (" + std::to_string(want) +
                              ")");
    }
  }
  MatmulShape s{product(out, batch_rank), rows, cols, inner, product(a, ra - 2),
                product(b, rb - 2)};
  // Strided batches: an operand is either one matrix for every item or one per item. Batch dims
  // that broadcast against each other (a 3x1 batch with a 1x4 one) are expanded by the caller.
  if ((s.batch_a != 1 && s.batch_a != s.batch) || (s.batch_b != 1 && s.batch_b != s.batch)) {
    return invalid_argument("matmul: a and b batch dims that broadcast against each other must "
                            "be expanded before the call (one operand's batch must be 1 or the "
                            "result's)");
  }
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  if (rows > kIntMax || cols > kIntMax || inner > kIntMax || s.batch > kIntMax) {
    return invalid_argument("matmul: dimensions beyond 2^31 - 1 are not supported by cuBLAS");
  }
  return s;
}

// What cuBLAS is asked to do: D (cols x rows, column-major) = op_b(S_b) op_a(S_a), over `batch`
// items with element strides (0 = the same matrix for every item).
struct Problem {
  cublasOperation_t op_a, op_b;
  int64_t rows, cols, inner, batch;
  int64_t lda, ldb, ldd;
  int64_t stride_a, stride_b, stride_d;
};

Problem make_problem(const MatmulShape& s, cublasOperation_t op_a, cublasOperation_t op_b) {
  Problem p{op_a, op_b, s.rows, s.cols, s.inner, s.batch, 0, 0, 0, 0, 0, 0};
  // One matrix b for every item and a not transposed: the items of a and of the result are
  // consecutive row blocks of one tall matrix, so the batch folds into one larger GEMM.
  if (s.batch > 1 && s.batch_b == 1 && s.batch_a == s.batch && op_a == CUBLAS_OP_N &&
      s.batch * s.rows <= std::numeric_limits<int32_t>::max()) {
    p.rows = s.batch * s.rows;
    p.batch = 1;
  }
  p.lda = op_a == CUBLAS_OP_N ? p.inner : p.rows;  // S_a is inner x rows, or rows x inner
  p.ldb = op_b == CUBLAS_OP_N ? p.cols : p.inner;  // S_b is cols x inner, or inner x cols
  p.ldd = p.cols;
  if (p.batch > 1) {
    p.stride_a = s.batch_a == 1 ? 0 : p.rows * p.inner;
    p.stride_b = s.batch_b == 1 ? 0 : p.inner * p.cols;
    p.stride_d = p.rows * p.cols;
  }
  return p;
}

cublasLtEpilogue_t epilogue_of(bool has_bias, Activation activation) {
  switch (activation) {
    case Activation::kRelu: return has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case Activation::kGelu: return has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default: return has_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// The alignment (bytes, up to 256) a kernel may assume for every item's matrix.
uint32_t alignment(const void* ptr, int64_t stride_bytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr) | 256u;
  if (stride_bytes != 0) bits |= static_cast<uint64_t>(stride_bytes);
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// --- Handles: per device, created lazily ---------------------------------------------------------

// A handle belongs to the device current when it is created, so creation selects the call's
// device (XLA's thread normally has it current already; this does not rely on it).

// cublasLtHandle_t is safe to share between threads; one per device, never destroyed (it would
// outlive the CUDA runtime at exit otherwise).
struct LtHandles {
  std::mutex mu;
  std::unordered_map<int, cublasLtHandle_t> handles;
};

ffi::ErrorOr<cublasLtHandle_t> lt_handle(int device) {
  LtHandles& h = per_process<LtHandles>();
  std::lock_guard<std::mutex> lock(h.mu);
  auto it = h.handles.find(device);
  if (it != h.handles.end()) return it->second;
  ScopedDevice scoped(device);
  JCM_RETURN_IF_ERROR(scoped.status());
  cublasLtHandle_t handle = nullptr;
  JCM_CUBLAS("cublasLtCreate", cublasLtCreate(&handle));
  h.handles[device] = handle;
  return handle;
}

// cuBLAS handles for the fallback: a handle is bound to one stream at a time, so each call
// borrows one from its device's pool for its duration (created on demand, then reused; a
// device's pool holds at most as many as calls ran on it at once).
class BorrowedBlas {
 public:
  static ffi::ErrorOr<BorrowedBlas> Borrow(int device) {
    Pools& p = per_process<Pools>();
    std::lock_guard<std::mutex> lock(p.mu);
    DevicePool& pool = p.devices[device];
    if (!pool.idle.empty()) {
      cublasHandle_t handle = pool.idle.back();
      pool.idle.pop_back();
      return BorrowedBlas(device, handle);
    }
    // Room for its return first, so returning never allocates.
    pool.idle.reserve(pool.created + 1);
    ScopedDevice scoped(device);
    JCM_RETURN_IF_ERROR(scoped.status());
    cublasHandle_t handle = nullptr;
    JCM_CUBLAS("cublasCreate", cublasCreate(&handle));
    ++pool.created;
    return BorrowedBlas(device, handle);
  }
  BorrowedBlas(BorrowedBlas&& other) noexcept : device_(other.device_), handle_(other.handle_) {
    other.handle_ = nullptr;
  }
  BorrowedBlas(const BorrowedBlas&) = delete;
  ~BorrowedBlas() {
    if (handle_ == nullptr) return;
    Pools& p = per_process<Pools>();
    std::lock_guard<std::mutex> lock(p.mu);
    p.devices[device_].idle.push_back(handle_);  // within the capacity reserved by Borrow
  }
  cublasHandle_t get() const { return handle_; }

  // Handles created for `device` (resource counts).
  static size_t created(int device) {
    Pools& p = per_process<Pools>();
    std::lock_guard<std::mutex> lock(p.mu);
    auto it = p.devices.find(device);
    return it == p.devices.end() ? 0 : it->second.created;
  }

 private:
  struct DevicePool {
    std::vector<cublasHandle_t> idle;
    size_t created = 0;
  };
  struct Pools {
    std::mutex mu;
    std::unordered_map<int, DevicePool> devices;
  };
  BorrowedBlas(int device, cublasHandle_t handle) : device_(device), handle_(handle) {}
  int device_;
  cublasHandle_t handle_;
};

// --- Plans --------------------------------------------------------------------------------------

// Everything cuBLASLt needs for one call shape, built once. `has_algo` false: cuBLASLt has no
// algorithm for it, the fallback runs.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  bool has_algo = false;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  // The bias pointer is a descriptor attribute: calls with a bias set it and run under this lock.
  std::mutex bias_mu;

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  ~LtPlan() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

// The pointers and settings of one call.
struct MatmulCall {
  cudaStream_t stream;
  int device;
  MatmulTypes types;
  Problem problem;
  Activation activation;
  int32_t algorithm;
  const void* a;
  const void* b;
  const void* bias;  // null: none
  void* out;
  size_t operand_bytes, result_bytes;  // element sizes
};

template <typename T>
ffi::Error set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, T value,
                    const char* name) {
  JCM_CUBLAS(std::string("cublasLtMatmulDescSetAttribute(") + name + ")",
             cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)));
  return ffi::Error::Success();
}

ffi::ErrorOr<cublasLtMatrixLayout_t> make_layout(cudaDataType type, int64_t rows, int64_t cols,
                                                 int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  JCM_CUBLAS("cublasLtMatrixLayoutCreate",
             cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    cublasStatus_t status = cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
    if (status == CUBLAS_STATUS_SUCCESS) {
      status = cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
    }
    if (status != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatrixLayoutDestroy(layout);
      JCM_CUBLAS("cublasLtMatrixLayoutSetAttribute", status);
    }
  }
  return layout;
}

// cuBLAS's own GEMM (cublasGemmStridedBatchedEx), then the epilogue as a kernel.
ffi::Error run_fallback(const MatmulCall& call, ffi::ScratchAllocator& scratch) {
  const Problem& p = call.problem;
  const MatmulTypes& t = call.types;
  JCM_ASSIGN_OR_RETURN(BorrowedBlas blas, BorrowedBlas::Borrow(call.device));
  // A workspace of this call (stream-ordered by XLA) rather than the handle's default one,
  // which a previous call on another stream might still be using.
  JCM_ASSIGN_OR_RETURN(std::byte * workspace,
                       allocate_scratch(scratch, kMaxWorkspaceBytes, "matmul (cuBLAS)"));
  JCM_CUBLAS("cublasSetStream", cublasSetStream(blas.get(), call.stream));
  JCM_CUBLAS("cublasSetWorkspace",
             cublasSetWorkspace(blas.get(), workspace, kMaxWorkspaceBytes));
  const Scalars scalars(t.scale);
  JCM_CUBLAS("cublasGemmStridedBatchedEx",
             cublasGemmStridedBatchedEx(
                 blas.get(), p.op_b, p.op_a, static_cast<int>(p.cols), static_cast<int>(p.rows),
                 static_cast<int>(p.inner), scalars.one, call.b, t.operand,
                 static_cast<int>(p.ldb), p.stride_b, call.a, t.operand, static_cast<int>(p.lda),
                 p.stride_a, scalars.zero, call.out, t.result, static_cast<int>(p.ldd),
                 p.stride_d, static_cast<int>(p.batch), t.compute, CUBLAS_GEMM_DEFAULT));
  if (call.bias != nullptr || call.activation != Activation::kNone) {
    JCM_CUDA(bias_activation(call.stream, t.result, call.out, call.bias, p.batch * p.rows,
                             p.cols, call.activation));
  }
  return ffi::Error::Success();
}

ffi::Error run_lt(cublasLtHandle_t handle, LtPlan& plan, const MatmulCall& call, void* workspace,
                  const cublasLtMatmulAlgo_t& algo, size_t workspace_bytes) {
  const Scalars scalars(call.types.scale);
  auto matmul = [&]() {
    // cuBLAS's A is our b, its B our a (see the top of this file).
    return cublasLtMatmul(handle, plan.desc, scalars.one, call.b, plan.b, call.a, plan.a,
                          scalars.zero, call.out, plan.d, call.out, plan.d, &algo, workspace,
                          workspace_bytes, call.stream);
  };
  if (call.bias == nullptr) {
    JCM_CUBLAS("cublasLtMatmul", matmul());
    return ffi::Error::Success();
  }
  std::lock_guard<std::mutex> lock(plan.bias_mu);
  JCM_RETURN_IF_ERROR(set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, call.bias,
                               "BIAS_POINTER"));
  JCM_CUBLAS("cublasLtMatmul", matmul());
  return ffi::Error::Success();
}

// Two timing events, destroyed with the object.
class EventPair {
 public:
  static ffi::ErrorOr<std::unique_ptr<EventPair>> Create() {
    auto events = std::unique_ptr<EventPair>(new EventPair());
    JCM_CUDA(cudaEventCreate(&events->start));
    JCM_CUDA(cudaEventCreate(&events->stop));
    return events;
  }
  ~EventPair() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
  cudaEvent_t start = nullptr, stop = nullptr;

 private:
  EventPair() = default;
};

// Device milliseconds of kAutotuneRuns back-to-back runs after one warm-up; infinity when the
// library refuses the warm-up (a candidate that cannot run here is skipped, not an error).
template <typename Run>
ffi::ErrorOr<float> time_runs(cudaStream_t stream, const EventPair& events, Run&& run) {
  if (run().failure()) return std::numeric_limits<float>::infinity();
  JCM_CUDA(cudaEventRecord(events.start, stream));
  for (int r = 0; r < kAutotuneRuns; ++r) JCM_RETURN_IF_ERROR(run());
  JCM_CUDA(cudaEventRecord(events.stop, stream));
  JCM_CUDA(cudaEventSynchronize(events.stop));
  float ms = 0;
  JCM_CUDA(cudaEventElapsedTime(&ms, events.start, events.stop));
  return ms;
}

// Times each cuBLASLt candidate, and cuBLAS's own GEMM (plus the epilogue kernel), on the call's
// own operands and returns the fastest: a candidate's index, or nullopt for cuBLAS's GEMM. Runs
// once per plan; blocks the host until the runs finish.
ffi::ErrorOr<std::optional<size_t>> autotune(
    cublasLtHandle_t handle, LtPlan& plan, const MatmulCall& call,
    const std::vector<cublasLtMatmulHeuristicResult_t>& candidates,
    ffi::ScratchAllocator& scratch) {
  size_t workspace_bytes = 0;
  for (const auto& c : candidates) workspace_bytes = std::max(workspace_bytes, c.workspaceSize);
  JCM_ASSIGN_OR_RETURN(std::byte * workspace,
                       allocate_scratch(scratch, workspace_bytes, "matmul autotuning"));
  JCM_ASSIGN_OR_RETURN(std::unique_ptr<EventPair> events, EventPair::Create());
  JCM_ASSIGN_OR_RETURN(float gemm_ms, time_runs(call.stream, *events, [&]() {
                         return run_fallback(call, scratch);
                       }));
  // cuBLASLt wins ties within timing noise: its calls need less workspace and host work.
  float best_ms = gemm_ms * 1.02f;
  std::optional<size_t> best;
  for (size_t i = 0; i < candidates.size(); ++i) {
    JCM_ASSIGN_OR_RETURN(float ms, time_runs(call.stream, *events, [&]() {
                           return run_lt(handle, plan, call, workspace, candidates[i].algo,
                                         candidates[i].workspaceSize);
                         }));
    if (ms < best_ms) {
      best_ms = ms;
      best = i;
    }
  }
  return best;
}

ffi::ErrorOr<std::unique_ptr<LtPlan>> build_plan(cublasLtHandle_t handle, const MatmulCall& call,
                                                 ffi::ScratchAllocator& scratch) {
  const Problem& p = call.problem;
  const MatmulTypes& t = call.types;
  auto plan = std::make_unique<LtPlan>();
  JCM_CUBLAS("cublasLtMatmulDescCreate",
             cublasLtMatmulDescCreate(&plan->desc, t.compute, t.scale));
  // cuBLAS's A is our b (TRANSA = op_b), its B our a.
  JCM_RETURN_IF_ERROR(set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                               static_cast<int32_t>(p.op_b), "TRANSA"));
  JCM_RETURN_IF_ERROR(set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                               static_cast<int32_t>(p.op_a), "TRANSB"));
  const bool has_bias = call.bias != nullptr;
  // Bias epilogues want a 16-byte aligned vector (XLA's buffers are); else the fallback runs.
  if (has_bias && alignment(call.bias, 0) < 16) return plan;
  // cuBLASLt's GELU epilogue on float64 results misses float64 accuracy (H100, cuBLAS 13.1:
  // test_epilogues); the fallback's own epilogue kernel computes it in double.
  if (call.activation == Activation::kGelu && t.result == CUDA_R_64F) return plan;
  JCM_RETURN_IF_ERROR(set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                               static_cast<uint32_t>(epilogue_of(has_bias, call.activation)),
                               "EPILOGUE"));
  if (has_bias) {
    // The bias runs along D's rows, i.e. along the result's columns: one value per column of
    // the row-major result, broadcast over its rows (and over the batch: batch stride 0).
    JCM_RETURN_IF_ERROR(set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                 static_cast<int32_t>(t.result), "BIAS_DATA_TYPE"));
    JCM_RETURN_IF_ERROR(set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, call.bias,
                                 "BIAS_POINTER"));  // the heuristic reads its alignment
  }
  const bool n_a = p.op_a == CUBLAS_OP_N, n_b = p.op_b == CUBLAS_OP_N;
  JCM_ASSIGN_OR_RETURN(plan->a, make_layout(t.operand, n_a ? p.inner : p.rows,
                                            n_a ? p.rows : p.inner, p.lda, p.batch, p.stride_a));
  JCM_ASSIGN_OR_RETURN(plan->b, make_layout(t.operand, n_b ? p.cols : p.inner,
                                            n_b ? p.inner : p.cols, p.ldb, p.batch, p.stride_b));
  JCM_ASSIGN_OR_RETURN(plan->d, make_layout(t.result, p.cols, p.rows, p.ldd, p.batch,
                                            p.stride_d));

  cublasLtMatmulPreference_t pref = nullptr;
  JCM_CUBLAS("cublasLtMatmulPreferenceCreate", cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      pref_guard(pref, cublasLtMatmulPreferenceDestroy);
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, auto value) {
    return check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
                        "cublasLtMatmulPreferenceSetAttribute", __FILE__, __LINE__);
  };
  JCM_RETURN_IF_ERROR(set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kMaxWorkspaceBytes));
  // cuBLASLt assumes 256-byte aligned matrices unless told otherwise.
  JCM_RETURN_IF_ERROR(set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                               alignment(call.b, p.stride_b * call.operand_bytes)));
  JCM_RETURN_IF_ERROR(set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               alignment(call.a, p.stride_a * call.operand_bytes)));
  const uint32_t d_align = alignment(call.out, p.stride_d * call.result_bytes);
  JCM_RETURN_IF_ERROR(set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, d_align));
  JCM_RETURN_IF_ERROR(set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, d_align));

  const int wanted = call.algorithm == kAutotune ? kAutotuneCandidates : call.algorithm + 1;
  std::vector<cublasLtMatmulHeuristicResult_t> results(wanted);
  int returned = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle, plan->desc, plan->b, plan->a, plan->d, plan->d, pref, wanted, results.data(),
      &returned);
  // NOT_SUPPORTED (no kernel for this configuration) and INVALID_VALUE (a combination this
  // library version refuses, e.g. an epilogue for a type): the fallback runs. Anything else fails.
  const bool no_lt_kernel = status == CUBLAS_STATUS_NOT_SUPPORTED ||
                            status == CUBLAS_STATUS_INVALID_VALUE;
  if (!no_lt_kernel) JCM_CUBLAS("cublasLtMatmulAlgoGetHeuristic", status);
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  for (int i = 0; status == CUBLAS_STATUS_SUCCESS && i < returned; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS) candidates.push_back(results[i]);
  }
  if (candidates.empty()) return plan;
  size_t chosen = 0;
  if (call.algorithm == kAutotune) {
    JCM_ASSIGN_OR_RETURN(std::optional<size_t> fastest,
                         autotune(handle, *plan, call, candidates, scratch));
    if (!fastest.has_value()) return plan;  // cuBLAS's own GEMM was faster
    chosen = *fastest;
  } else if (static_cast<size_t>(call.algorithm) < candidates.size()) {
    chosen = call.algorithm;
  } else {
    return invalid_argument("matmul: algorithm " + std::to_string(call.algorithm) +
                            " requested, but cuBLASLt's heuristic offers " +
                            std::to_string(candidates.size()) + " for this call (0 to " +
                            std::to_string(candidates.size() - 1) + ")");
  }
  plan->has_algo = true;
  plan->algo = candidates[chosen].algo;
  plan->workspace = candidates[chosen].workspaceSize;
  return plan;
}

// Everything a plan depends on; built on every call, so kept to plain integers (no strings).
struct PlanKey {
  std::array<int64_t, 19> parts;
  bool operator==(const PlanKey& other) const { return parts == other.parts; }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the parts
    for (int64_t part : key.parts) h = (h ^ static_cast<uint64_t>(part)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

PlanKey plan_key(const MatmulCall& call) {
  const Problem& p = call.problem;
  return PlanKey{{call.device, call.types.operand, call.types.result, call.types.scale,
                  call.types.compute, p.op_a, p.op_b, p.rows, p.cols, p.inner, p.batch,
                  p.stride_a, p.stride_b,
                  static_cast<int64_t>(epilogue_of(call.bias != nullptr, call.activation)),
                  call.algorithm, alignment(call.a, p.stride_a * call.operand_bytes),
                  alignment(call.b, p.stride_b * call.operand_bytes),
                  alignment(call.out, p.stride_d * call.result_bytes),
                  call.bias == nullptr ? 0 : alignment(call.bias, 0)}};
}

// Plans, least recently used evicted past kMaxPlans (call shapes are unbounded). A call holds a
// shared_ptr to its plan, so eviction never frees a plan a running call uses.
constexpr size_t kMaxPlans = 1024;

struct PlanCache {
  struct Entry {
    std::shared_ptr<LtPlan> plan;
    std::list<PlanKey>::iterator age;  // its place in `order`
  };
  std::mutex mu;
  std::list<PlanKey> order;  // most recently used first
  std::unordered_map<PlanKey, Entry, PlanKeyHash> plans;
};

// The plan of a call shape, built on first use. Two threads meeting a new shape at once may both
// build it; the first stored wins.
ffi::ErrorOr<std::shared_ptr<LtPlan>> find_plan(cublasLtHandle_t handle, const MatmulCall& call,
                                                ffi::ScratchAllocator& scratch) {
  PlanCache& cache = per_process<PlanCache>();
  const PlanKey key = plan_key(call);
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.plans.find(key);
    if (it != cache.plans.end()) {
      cache.order.splice(cache.order.begin(), cache.order, it->second.age);
      return it->second.plan;
    }
  }
  JCM_ASSIGN_OR_RETURN(std::unique_ptr<LtPlan> built, build_plan(handle, call, scratch));
  std::shared_ptr<LtPlan> plan(std::move(built));
  std::lock_guard<std::mutex> lock(cache.mu);
  auto it = cache.plans.find(key);
  if (it != cache.plans.end()) return it->second.plan;
  if (cache.plans.size() >= kMaxPlans) {
    cache.plans.erase(cache.order.back());
    cache.order.pop_back();
  }
  cache.order.push_front(key);
  cache.plans.emplace(key, PlanCache::Entry{plan, cache.order.begin()});
  return plan;
}

size_t plan_count(int device) {
  PlanCache& cache = per_process<PlanCache>();
  std::lock_guard<std::mutex> lock(cache.mu);
  size_t n = 0;
  for (const auto& entry : cache.plans) n += entry.first.parts[0] == device;
  return n;
}

ffi::ErrorOr<cublasOperation_t> parse_op(int32_t code, const char* name) {
  switch (code) {
    case 0: return CUBLAS_OP_N;
    case 1: return CUBLAS_OP_T;
    case 2: return CUBLAS_OP_C;
    default:
      return invalid_argument(std::string("matmul: ") + name +
                              " must be 0 (none), 1 (transpose) or 2 (conjugate transpose), got " +
                              std::to_string(code));
  }
}

}  // namespace

ffi::Error matmul_handler(cudaStream_t stream, ffi::ScratchAllocator scratch, int32_t device,
                          ffi::AnyBuffer a, ffi::AnyBuffer b, std::optional<ffi::AnyBuffer> bias,
                          ffi::Result<ffi::AnyBuffer> out, int32_t transpose_a,
                          int32_t transpose_b, int32_t activation, int32_t allow_tf32,
                          int32_t algorithm) {
  JCM_ASSIGN_OR_RETURN(cublasOperation_t op_a, parse_op(transpose_a, "transpose_a"));
  JCM_ASSIGN_OR_RETURN(cublasOperation_t op_b, parse_op(transpose_b, "transpose_b"));
  if (activation < 0 || activation > static_cast<int32_t>(Activation::kGelu)) {
    return invalid_argument("matmul: activation must be 0 (none), 1 (relu) or 2 (gelu), got " +
                            std::to_string(activation));
  }
  if (algorithm < kCublasGemm || algorithm > kMaxAlgorithm) {
    return invalid_argument("matmul: algorithm must be -1 (autotune), -2 (cuBLAS's GEMM) or a "
                            "cuBLASLt candidate index 0.." + std::to_string(kMaxAlgorithm) +
                            ", got " + std::to_string(algorithm));
  }
  if (a.element_type() != b.element_type()) {
    return invalid_argument("matmul: a and b must have the same dtype, got " +
                            dtype_name(a.element_type()) + " and " +
                            dtype_name(b.element_type()));
  }
  JCM_ASSIGN_OR_RETURN(MatmulTypes types,
                       matmul_types(a.element_type(), out->element_type(), allow_tf32 != 0));
  JCM_ASSIGN_OR_RETURN(MatmulShape shape, matmul_shape(a.dimensions(), b.dimensions(),
                                                       out->dimensions(), op_a != CUBLAS_OP_N,
                                                       op_b != CUBLAS_OP_N));
  const Activation act = static_cast<Activation>(activation);
  if (is_complex(types.operand) && act != Activation::kNone) {
    return invalid_argument("matmul: activations are not defined for complex dtypes");
  }
  if (bias.has_value()) {
    if (bias->element_type() != out->element_type()) {
      return invalid_argument("matmul: bias must have the result's dtype " +
                              dtype_name(out->element_type()));
    }
    JCM_RETURN_IF_ERROR(check_dims(bias->dimensions(), {shape.cols}, "matmul", "bias"));
  }
  if (shape.batch == 0 || shape.rows == 0 || shape.cols == 0) return ffi::Error::Success();

  MatmulCall call{stream,
                  device,
                  types,
                  make_problem(shape, op_a, op_b),
                  act,
                  algorithm,
                  a.untyped_data(),
                  b.untyped_data(),
                  bias.has_value() ? bias->untyped_data() : nullptr,
                  out->untyped_data(),
                  ffi::ByteWidth(a.element_type()),
                  ffi::ByteWidth(out->element_type())};
  if (shape.inner == 0) {  // an empty sum: zeros, then the bias and activation
    JCM_CUDA(cudaMemsetAsync(call.out, 0, out->size_bytes(), stream));
    if (call.bias != nullptr) {
      JCM_CUDA(bias_activation(stream, types.result, call.out, call.bias,
                               shape.batch * shape.rows, shape.cols, act));
    }
    return ffi::Error::Success();
  }
  if (algorithm == kCublasGemm) return run_fallback(call, scratch);
  JCM_ASSIGN_OR_RETURN(cublasLtHandle_t handle, lt_handle(device));
  JCM_ASSIGN_OR_RETURN(std::shared_ptr<LtPlan> plan, find_plan(handle, call, scratch));
  if (!plan->has_algo) return run_fallback(call, scratch);
  JCM_ASSIGN_OR_RETURN(std::byte * workspace,
                       allocate_scratch(scratch, plan->workspace, "matmul"));
  return run_lt(handle, *plan, call, workspace, plan->algo, plan->workspace);
}

size_t matmul_plan_count(int device) { return plan_count(device); }

size_t matmul_handle_count(int device) {
  size_t lt = 0;
  {
    LtHandles& h = per_process<LtHandles>();
    std::lock_guard<std::mutex> lock(h.mu);
    lt = h.handles.count(device);
  }
  return lt + BorrowedBlas::created(device);
}

}  // namespace jcm

// Bindings: one .Arg/.Ret/.Attr per line; attribute names equal the Python keyword names.
JCM_HANDLER(jcm_matmul, matmul_handler,
            xla::ffi::Ffi::Bind()
                .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()
                .Ctx<xla::ffi::ScratchAllocator>()
                .Ctx<xla::ffi::DeviceOrdinal>()
                .Arg<xla::ffi::AnyBuffer>()          // a
                .Arg<xla::ffi::AnyBuffer>()          // b
                .OptionalArg<xla::ffi::AnyBuffer>()  // bias
                .Ret<xla::ffi::AnyBuffer>()          // out
                .Attr<int32_t>("transpose_a")
                .Attr<int32_t>("transpose_b")
                .Attr<int32_t>("activation")
                .Attr<int32_t>("allow_tf32")
                .Attr<int32_t>("algorithm"));
