// Every FFI handler symbol the module registers (defined next to its op's traits).
#pragma once

#include <cstddef>

#include "xla/ffi/api/c_api.h"

#define JCM_HANDLERS(X) \
  X(jcm_getrf)          \
  X(jcm_getrf_small)    \
  X(jcm_getrs)          \
  X(jcm_getrs_small)    \
  X(jcm_potrf)          \
  X(jcm_potrf_small)    \
  X(jcm_potrs)          \
  X(jcm_potrs_small)    \
  X(jcm_geqrf)          \
  X(jcm_orgqr)          \
  X(jcm_ormqr)          \
  X(jcm_sytrf)          \
  X(jcm_sytrs)          \
  X(jcm_syevd)          \
  X(jcm_sygvd)          \
  X(jcm_geev)           \
  X(jcm_gesvd)          \
  X(jcm_gesvdj)         \
  X(jcm_trsm)           \
  X(jcm_trsm_small)     \
  X(jcm_matmul)         \
  X(jcm_timer_stamp)

#define JCM_DECLARE_HANDLER(name) extern "C" XLA_FFI_Error* name(XLA_FFI_CallFrame* call_frame);
JCM_HANDLERS(JCM_DECLARE_HANDLER)
#undef JCM_DECLARE_HANDLER

namespace jcm {

// What the matmul holds for `device` (the module's resource counts).
size_t matmul_plan_count(int device);
size_t matmul_handle_count(int device);

}  // namespace jcm
