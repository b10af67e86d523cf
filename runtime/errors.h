/*
 * errors.h -- internal error recording and the checking macros used by every
 * host source of purlin. A failure is recorded once, where it is detected,
 * as "message [file:line]" in the calling thread's last-error buffer; public
 * entry points copy it into the communicator they were called on (see
 * purlinErrorToComm). Nothing here allocates.
 */
#ifndef PURLIN_RUNTIME_ERRORS_H_
#define PURLIN_RUNTIME_ERRORS_H_

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "runtime/purlin.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PURLIN_ERROR_MSG_MAX 512

#if defined(__GNUC__)
#define PURLIN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PURLIN_PRINTF(f, a)
#endif

/* Records `code` with a printf-style message in the thread's last error and
 * returns `code`, so callers can write `return purlinSetError(...)`. */
purlinResult_t purlinSetError(purlinResult_t code, const char* file, int line, const char* fmt, ...)
    PURLIN_PRINTF(4, 5);

/* The calling thread's last error text ("" if none). */
const char* purlinThreadLastError(void);

/* Clears the calling thread's last error (at the start of public calls). */
void purlinClearThreadError(void);

/* Maps a runtime or driver error to a purlin result (out of memory, no device,
 * or an unhandled CUDA error) and records it with the CUDA error's name. */
purlinResult_t purlinCudaError(cudaError_t err, const char* expr, const char* file, int line);
purlinResult_t purlinCuError(CUresult err, const char* expr, const char* file, int line);

#define PURLIN_ERROR(code, ...) purlinSetError((code), __FILE__, __LINE__, __VA_ARGS__)

/* Returns `code` with a message when `cond` holds. */
#define PURLIN_RETURN_IF(cond, code, ...)                   \
  do {                                                      \
    if (cond) return PURLIN_ERROR((code), __VA_ARGS__);     \
  } while (0)

/* Propagates a failing purlinResult_t. */
#define PURLIN_CHECK(cmd)                       \
  do {                                          \
    purlinResult_t purlinCheck_ = (cmd);        \
    if (purlinCheck_ != purlinSuccess) return purlinCheck_; \
  } while (0)

#define PURLIN_CUDA_CHECK(cmd)                                                        \
  do {                                                                                \
    cudaError_t purlinCudaErr_ = (cmd);                                               \
    if (purlinCudaErr_ != cudaSuccess)                                                \
      return purlinCudaError(purlinCudaErr_, #cmd, __FILE__, __LINE__);               \
  } while (0)

/* Variants for functions with a single cleanup label: store the result in
 * `res` and jump to `label`. */
#define PURLIN_CHECK_GOTO(cmd, res, label) \
  do {                                     \
    (res) = (cmd);                         \
    if ((res) != purlinSuccess) goto label; \
  } while (0)

#define PURLIN_CUDA_CHECK_GOTO(cmd, res, label)                             \
  do {                                                                      \
    cudaError_t purlinCudaErr_ = (cmd);                                     \
    if (purlinCudaErr_ != cudaSuccess) {                                    \
      (res) = purlinCudaError(purlinCudaErr_, #cmd, __FILE__, __LINE__);    \
      goto label;                                                           \
    }                                                                       \
  } while (0)

#define PURLIN_CU_CHECK_GOTO(cmd, res, label)                               \
  do {                                                                      \
    CUresult purlinCuErr_ = (cmd);                                          \
    if (purlinCuErr_ != CUDA_SUCCESS) {                                     \
      (res) = purlinCuError(purlinCuErr_, #cmd, __FILE__, __LINE__);        \
      goto label;                                                           \
    }                                                                       \
  } while (0)

#define PURLIN_FAIL_GOTO(res, label, code, ...)   \
  do {                                            \
    (res) = PURLIN_ERROR((code), __VA_ARGS__);    \
    goto label;                                   \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif /* PURLIN_RUNTIME_ERRORS_H_ */
