// Checks and small steps every solver handler shares: the call's strategy checked against
// core/limits.h, operand shape checks, and the one dtype switch that builds and runs an op.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "core/driver.h"
#include "core/handlers.h"
#include "core/limits.h"
#include "core/settings.h"
#include "core/solver_api.h"
#include "core/status.h"

namespace jcm {

// A handler `Fn` made noexcept: an exception it throws (std::bad_alloc from a container, a
// std::system_error from a thread) becomes an ffi::Error naming the handler `Name` instead of
// crossing into XLA. The signature is Fn's, so the FFI binding decodes the same arguments.
template <const char* Name, auto Fn>
struct Guarded;

template <const char* Name, typename... Args, ffi::Error (*Fn)(Args...)>
struct Guarded<Name, Fn> {
  static ffi::Error Call(Args... args) noexcept {
    return catch_exceptions(Name, [&]() -> ffi::Error { return Fn(std::forward<Args>(args)...); });
  }
};

}  // namespace jcm

// Defines the FFI handler symbol `name` (at global scope) for jcm::fn, guarded: every handler of
// the module is bound through here. `...` is its binding (xla::ffi::Ffi::Bind()...).
#define JCM_HANDLER(name, fn, ...)                                                 \
  namespace jcm::handler_names {                                                  \
  inline constexpr char name[] = #name;                                           \
  }                                                                               \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(                                                  \
      name, (jcm::Guarded<jcm::handler_names::name, &jcm::fn>::Call), __VA_ARGS__)

// Bindings: what every handler of a kind shares. A solver handler (`fn` in namespace jcm) binds
// XLA's stream, the scratch allocator and the device ordinal first, then its own arguments,
// results and attributes (`bindings`: one .Arg/.Ret/.Attr per line, attribute names equal to the
// Python keyword names), and last the strategy attributes (call_config).
#define JCM_SOLVER_HANDLER(name, fn, ...)                   \
  JCM_HANDLER(                                              \
      name, fn,                                             \
      xla::ffi::Ffi::Bind()                                 \
          .Ctx<xla::ffi::PlatformStream<cudaStream_t>>()    \
          .Ctx<xla::ffi::ScratchAllocator>()                \
          .Ctx<xla::ffi::DeviceOrdinal>() __VA_ARGS__       \
          .Attr<int32_t>("strategy")                        \
          .Attr<int32_t>("lanes"))

// A one-launch kernel's handler binds XLA's stream only.
#define JCM_KERNEL_HANDLER(name, fn, ...)                   \
  JCM_HANDLER(                                              \
      name, fn,                                             \
      xla::ffi::Ffi::Bind()                                 \
          .Ctx<xla::ffi::PlatformStream<cudaStream_t>>() __VA_ARGS__)

// The int32 result every solver handler has (one info per matrix).
#define JCM_INFO_RET .Ret<xla::ffi::Buffer<xla::ffi::S32>>()

// A solve's operands and results (getrs, potrs, sytrs): the factor, its pivots where it has them
// (`pivots`: their .Arg, or nothing), b; then x (b solved in place) and info.
#define JCM_SOLVE_BINDINGS(pivots)             \
  .Arg<xla::ffi::AnyBuffer>() /* the factor */ \
  pivots                                       \
  .Arg<xla::ffi::AnyBuffer>() /* b */          \
  .Ret<xla::ffi::AnyBuffer>() /* x */          \
  JCM_INFO_RET

namespace jcm {

using limits::CallShape;
using limits::Routine;

// The call's configuration from its attributes: XLA's stream and device, and a strategy that can
// run `routine` on `shape` (core/limits.h). A strategy that cannot, or a lane count outside the
// pool's, is an InvalidArgument error: nothing is downgraded here (Python asks for feasible ones).
inline ffi::ErrorOr<CallConfig> call_config(cudaStream_t stream, int32_t device, int32_t strategy,
                                            int32_t lanes, Routine routine, CallShape shape) {
  const char* op = limits::routine_limits(routine).name;
  if (strategy < 0 || strategy >= kStrategyCount) {
    return invalid_argument(std::string(op) + ": unknown strategy " + std::to_string(strategy));
  }
  if (lanes < 1 || lanes > limits::kMaxLanesPerDevice) {
    return invalid_argument(std::string(op) + ": lanes must be in [1, " +
                            std::to_string(limits::kMaxLanesPerDevice) + "], got " +
                            std::to_string(lanes));
  }
  const Strategy s = static_cast<Strategy>(strategy);
  if (const char* why = limits::infeasible(routine, s, shape)) {
    return invalid_argument(std::string(op) + ": strategy " + kStrategyNames[strategy] +
                            " cannot run a " + std::to_string(shape.m) + " x " +
                            std::to_string(shape.n) + " matrix: " + why);
  }
  return CallConfig{stream, device, s, lanes};
}

// The leading dims of `dims` without its last `drop`, followed by `tail`.
inline std::vector<int64_t> batch_shape(ffi::AnyBuffer::Dimensions dims, size_t drop,
                                        std::initializer_list<int64_t> tail) {
  std::vector<int64_t> out(dims.begin(), dims.end() - drop);
  out.insert(out.end(), tail);
  return out;
}

inline ffi::Error check_dims(ffi::AnyBuffer::Dimensions dims, const std::vector<int64_t>& expect,
                             const char* op, const char* operand) {
  if (dims.size() == expect.size() && std::equal(dims.begin(), dims.end(), expect.begin())) {
    return ffi::Error::Success();
  }
  return invalid_argument(std::string(op) + ": " + operand +
                          " has a shape inconsistent with the other operands");
}

// `info` holds one int per matrix of the (batch..., rows, cols) operand `matrices`.
inline ffi::Error check_info(ffi::Result<ffi::Buffer<ffi::S32>>& info, ffi::AnyBuffer matrices,
                             const char* op) {
  return check_dims(info->dimensions(), batch_shape(matrices.dimensions(), 2, {}), op, "info");
}

// A result with the operand's shape and dtype (the matrix worked on in place).
inline ffi::Error check_like(ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer>& out, const char* op,
                             const char* result) {
  if (out->element_type() != a.element_type()) {
    return invalid_argument(std::string(op) + ": " + result + " must have the dtype of a");
  }
  return check_dims(out->dimensions(), batch_shape(a.dimensions(), 0, {}), op, result);
}

// A square matrix batch, checked: the factored matrices of the square-only routines.
inline ffi::ErrorOr<MatrixBatch> square_batch(ffi::AnyBuffer a, const char* op,
                                              const char* operand = "a") {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(a.dimensions(), op, operand));
  if (mb.rows != mb.cols) {
    return invalid_argument(std::string(op) + ": " + operand + " must be square");
  }
  return mb;
}

// A factorization, checked: a (batch..., m, n), its in-place result `out` like it, and info.
inline ffi::ErrorOr<MatrixBatch> factor_operands(ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer>& out,
                                                 ffi::Result<ffi::Buffer<ffi::S32>>& info,
                                                 const char* op, const char* result,
                                                 bool square) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, square ? square_batch(a, op)
                                              : split_matrix_batch(a.dimensions(), op, "a"));
  JCM_RETURN_IF_ERROR(check_like(a, out, op, result));
  JCM_RETURN_IF_ERROR(check_info(info, a, op));
  return mb;
}

// A square matrix batch with n <= max_n: the one-launch small-matrix kernels' factored matrices
// (getrf_small, getrs_small, potrf_small, potrs_small).
inline ffi::ErrorOr<MatrixBatch> small_square_batch(ffi::AnyBuffer a, int64_t max_n,
                                                    const char* op, const char* operand) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, square_batch(a, op, operand));
  if (mb.rows > max_n) {
    return invalid_argument(std::string(op) + ": " + operand + " must have n <= " +
                            std::to_string(max_n) + ", got " + std::to_string(mb.rows));
  }
  return mb;
}

// A solve's operands, checked: the square factor (batch..., n, n) with n <= max_n, b and its
// in-place result x (batch..., n, nrhs) with nrhs <= max_rhs, all of the factor's dtype. Returns
// b's batch split.
inline ffi::ErrorOr<MatrixBatch> solve_operands(ffi::AnyBuffer factor, const char* factor_name,
                                                ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer>& x,
                                                const char* op, int64_t max_n = INT32_MAX,
                                                int64_t max_rhs = INT32_MAX) {
  JCM_ASSIGN_OR_RETURN(MatrixBatch mf, small_square_batch(factor, max_n, op, factor_name));
  JCM_ASSIGN_OR_RETURN(MatrixBatch mb, split_matrix_batch(b.dimensions(), op, "b"));
  if (mb.batch != mf.batch || mb.rows != mf.rows || mb.cols > max_rhs) {
    return invalid_argument(std::string(op) + ": b must have shape batch + (n, nrhs)" +
                            (max_rhs < INT32_MAX ? " with nrhs <= " + std::to_string(max_rhs)
                                                 : std::string()));
  }
  if (b.element_type() != factor.element_type() || x->element_type() != factor.element_type()) {
    return invalid_argument(std::string(op) + ": " + factor_name +
                            ", b and x must have the same dtype");
  }
  JCM_RETURN_IF_ERROR(check_dims(x->dimensions(), batch_shape(b.dimensions(), 0, {}), op, "x"));
  return mb;
}

// A small-matrix kernel's factor: a's shape and dtype, not a itself (the kernels read a whole
// matrix into shared memory while other blocks write theirs).
inline ffi::Error check_small_result(ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer>& out,
                                     const char* op, const char* result) {
  if (out->untyped_data() == a.untyped_data() && a.size_bytes() > 0) {
    return invalid_argument(std::string(op) + ": " + result + " must not alias a");
  }
  return check_like(a, out, op, result);
}

// A pointer into a buffer that takes the element type of the typed traits it initializes.
struct AnyPtr {
  void* ptr;
  template <typename U>
  operator U*() const {  // NOLINT: the conversion is the point
    return static_cast<U*>(ptr);
  }
};
inline AnyPtr any_ptr(ffi::AnyBuffer buffer) { return {buffer.untyped_data()}; }
inline AnyPtr any_ptr(ffi::Result<ffi::AnyBuffer>& buffer) { return {buffer->untyped_data()}; }

// ... and the InPlace<T> of an op: the operand `in` (a batch split as `mb`) copied into the
// result `out`, with `info`.
struct AnyInPlace {
  int64_t items;
  const void* in;
  void* data;
  size_t bytes;
  int* info;
  bool empty;
  template <typename T>
  operator InPlace<T>() const {  // NOLINT
    return {items, in, static_cast<T*>(data), bytes, info, empty};
  }
};
inline AnyInPlace in_place(ffi::AnyBuffer in, ffi::Result<ffi::AnyBuffer>& out,
                           ffi::Result<ffi::Buffer<ffi::S32>>& info, MatrixBatch mb) {
  return {mb.batch,   in.untyped_data(), out->untyped_data(), in.size_bytes(),
          info->typed_data(), mb.rows == 0 || mb.cols == 0};
}

// The one dtype switch of the solver handlers (jaxlib's SOLVER_DISPATCH_IMPL): Traits<T>{args...}
// for the element type T of `dtype`, run by the call's strategy (driver.h run). The untyped
// arguments (AnyPtr, AnyInPlace) take their type there.
template <template <typename> class Traits, typename... Args>
ffi::Error run_typed(ffi::DataType dtype, const char* op, const CallConfig& call,
                     ffi::ScratchAllocator& scratch, const Args&... args) {
  return dispatch_solver_dtype(dtype, op, [&](auto tag) -> ffi::Error {
    using T = typename decltype(tag)::type;
    return run(call, scratch, Traits<T>{args...});
  });
}

// The one dtype switch of the one-launch kernels' handlers: launch(tag), a kernel launch on XLA's
// stream for the element type tag_type<decltype(tag)>, its AnyPtr arguments typed there.
template <typename Tag>
using tag_type = typename Tag::type;

template <typename Launch>
ffi::Error launch_typed(ffi::DataType dtype, const char* op, Launch&& launch) {
  return dispatch_solver_dtype(dtype, op, [&](auto tag) -> ffi::Error {
    JCM_CUDA(launch(tag));
    return ffi::Error::Success();
  });
}

}  // namespace jcm
