/*
 * errors.c -- result names and messages (generated from PURLIN_RESULT_MAP),
 * the thread's last-error buffer, and the mapping of CUDA errors to purlin
 * results. Per-communicator error text lives in comm.c.
 */
#include "runtime/errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runtime/cudawrap.h"

/* The enum values must be 0..purlinNumResults-1 so that the tables below can
 * be indexed by value. */
#define PURLIN_RESULT_CHECK_(name, value, message) \
  _Static_assert((int)name < (int)purlinNumResults, #name " is not dense");
PURLIN_RESULT_MAP(PURLIN_RESULT_CHECK_)
#undef PURLIN_RESULT_CHECK_

static const char* const resultNames[purlinNumResults] = {
#define PURLIN_RESULT_NAME_(name, value, message) [value] = #name,
    PURLIN_RESULT_MAP(PURLIN_RESULT_NAME_)
#undef PURLIN_RESULT_NAME_
};

static const char* const resultMessages[purlinNumResults] = {
#define PURLIN_RESULT_MESSAGE_(name, value, message) [value] = message,
    PURLIN_RESULT_MAP(PURLIN_RESULT_MESSAGE_)
#undef PURLIN_RESULT_MESSAGE_
};

static _Thread_local char threadError[PURLIN_ERROR_MSG_MAX];

PURLIN_API const char* purlinGetErrorString(purlinResult_t result) {
  if ((unsigned)result >= (unsigned)purlinNumResults) return "unknown result code";
  return resultMessages[result];
}

PURLIN_API const char* purlinGetErrorName(purlinResult_t result) {
  if ((unsigned)result >= (unsigned)purlinNumResults) return "purlinUnknownResult";
  return resultNames[result];
}

const char* purlinThreadLastError(void) { return threadError; }

void purlinClearThreadError(void) { threadError[0] = '\0'; }

purlinResult_t purlinSetError(purlinResult_t code, const char* file, int line, const char* fmt, ...) {
  char msg[PURLIN_ERROR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char* base = strrchr(file, '/');
  /* Keep "runtime/comm.c" rather than the full build path. */
  if (base != NULL && base != file) {
    const char* dir = base - 1;
    while (dir > file && dir[-1] != '/') --dir;
    base = dir;
  } else {
    base = file;
  }
  snprintf(threadError, sizeof threadError, "%s: %s [%s:%d]", purlinGetErrorName(code), msg, base,
           line);
  return code;
}

purlinResult_t purlinCudaError(cudaError_t err, const char* expr, const char* file, int line) {
  purlinResult_t code = purlinUnhandledCudaError;
  if (err == cudaErrorMemoryAllocation) code = purlinOutOfMemory;
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) code = purlinNoDevice;
  return purlinSetError(code, file, line, "%s failed: %s (%s)", expr, cudaGetErrorName(err),
                        cudaGetErrorString(err));
}

purlinResult_t purlinCuError(CUresult err, const char* expr, const char* file, int line) {
  purlinResult_t code = purlinUnhandledCudaError;
  if (err == CUDA_ERROR_OUT_OF_MEMORY) code = purlinOutOfMemory;
  if (err == CUDA_ERROR_NO_DEVICE) code = purlinNoDevice;
  const char* text = "(no description)";
  if (purlinDriver.getErrorString != NULL) purlinDriver.getErrorString(err, &text);
  return purlinSetError(code, file, line, "%s failed: CUresult %d (%s)", expr, (int)err, text);
}
