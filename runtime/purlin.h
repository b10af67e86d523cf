/*
 * purlin.h -- the public host API of purlin, GPU collectives for one NVLink
 * server. C99, usable from C and C++. Everything a host program may call is
 * declared here; the device API lives in purlin/device.cuh. Names, argument
 * order and semantics follow NCCL's nccl.h where the two overlap, so that a
 * serving engine can switch with little change.
 *
 * Thread safety: functions that take a communicator may be called from any
 * thread, but calls on the same communicator must not overlap (as in NCCL).
 * Functions that create or destroy communicators are safe to call
 * concurrently on different communicators.
 */
#ifndef PURLIN_H_
#define PURLIN_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PURLIN_API __attribute__((visibility("default")))
#else
#define PURLIN_API
#endif

#define PURLIN_VERSION_MAJOR 0
#define PURLIN_VERSION_MINOR 1
#define PURLIN_VERSION_PATCH 0
/* One integer that orders versions: major * 10000 + minor * 100 + patch. */
#define PURLIN_VERSION_CODE \
  (PURLIN_VERSION_MAJOR * 10000 + PURLIN_VERSION_MINOR * 100 + PURLIN_VERSION_PATCH)

/* The largest number of ranks in one communicator. A server has at most 8
 * GPUs on one NVLink domain; several ranks may share a GPU. */
#define PURLIN_MAX_RANKS 32

/*
 * Result codes. The numeric values are fixed and never reused. The list below
 * is the single source of the enum, of the names returned by
 * purlinGetErrorName and of the messages returned by purlinGetErrorString.
 */
#define PURLIN_RESULT_MAP(X)                                                     \
  X(purlinSuccess, 0, "no error")                                                \
  X(purlinUnhandledCudaError, 1, "a call to the CUDA runtime or driver failed")  \
  X(purlinSystemError, 2, "a system call failed")                                \
  X(purlinInternalError, 3, "internal error in purlin")                          \
  X(purlinInvalidArgument, 4, "invalid argument")                                \
  X(purlinInvalidUsage, 5, "invalid usage")                                      \
  X(purlinRemoteError, 6, "a peer rank failed or aborted")                       \
  X(purlinInProgress, 7, "operation in progress")                                \
  X(purlinNoDevice, 8, "no usable CUDA device or driver")                        \
  X(purlinOutOfMemory, 9, "out of device or host memory")                        \
  X(purlinTimeout, 10, "a wait timed out")                                       \
  X(purlinAborted, 11, "the communicator was aborted")

typedef enum purlinResult_t {
#define PURLIN_RESULT_ENUM_(name, value, message) name = value,
  PURLIN_RESULT_MAP(PURLIN_RESULT_ENUM_)
#undef PURLIN_RESULT_ENUM_
#define PURLIN_RESULT_ONE_(name, value, message) +1
  /* The number of result codes; the values above are 0 .. purlinNumResults-1. */
  purlinNumResults = 0 PURLIN_RESULT_MAP(PURLIN_RESULT_ONE_)
#undef PURLIN_RESULT_ONE_
} purlinResult_t;

/* Element types of collectives and Atoms. Reductions of 16-bit and 8-bit
 * types accumulate in fp32 and round once when stored. */
typedef enum purlinDataType_t {
  purlinFloat32 = 0,
  purlinFloat16 = 1,  /* IEEE binary16 */
  purlinBfloat16 = 2, /* bfloat16 */
  purlinFp8E4M3 = 3,  /* OCP fp8 e4m3; results saturate to +-448 */
  purlinFp8E5M2 = 4,  /* OCP fp8 e5m2; results saturate to +-57344 */
  purlinInt32 = 5,    /* two's complement; sums wrap around */
  purlinNumDataTypes = 6
} purlinDataType_t;

/* Reduction operations. Max and min keep the earlier operand unless the
 * later one compares greater (smaller), so the result is the same on every
 * path. */
typedef enum purlinRedOp_t {
  purlinSum = 0,
  purlinMax = 1,
  purlinMin = 2,
  purlinNumRedOps = 3
} purlinRedOp_t;

/* Opaque communicator handle: one rank of a group of ranks. */
typedef struct purlinComm* purlinComm_t;

/*
 * Communicator configuration. Always start from PURLIN_CONFIG_INITIALIZER and
 * change the fields you need; `size`, `magic` and `version` let the library
 * detect a struct from another header version or an uninitialised one.
 */
#define PURLIN_CONFIG_MAGIC 0x70726c6eu /* "prln" */
#define PURLIN_CONFIG_VERSION 1u

typedef struct purlinConfig_t {
  size_t size;          /* sizeof(purlinConfig_t) */
  unsigned int magic;   /* PURLIN_CONFIG_MAGIC */
  unsigned int version; /* PURLIN_CONFIG_VERSION */
  /* CTAs reserved on each rank's GPU for the persistent megakernel. The ranks
   * placed on one GPU times this value must not exceed the GPU's SM count,
   * because every rank's CTAs must be resident at the same time. 1..1024. */
  int megakernelCtas;
  /* Bound on every device-side wait, in milliseconds; a wait that exceeds it
   * aborts the communicator with purlinTimeout. 1 .. 3600000. */
  int timeoutMs;
  /* Bytes of each half of a rank's latency (push) staging buffer. Rounded up
   * to 64 KiB. 64 KiB .. 1 GiB. */
  size_t latencyBufferBytes;
  /* Bytes of each half of a rank's throughput (pull) staging buffer. Rounded
   * up to 64 KiB. 64 KiB .. 16 GiB. */
  size_t throughputBufferBytes;
} purlinConfig_t;

#define PURLIN_CONFIG_INITIALIZER                                            \
  {                                                                          \
    sizeof(purlinConfig_t), PURLIN_CONFIG_MAGIC, PURLIN_CONFIG_VERSION,      \
        8,                 /* megakernelCtas */                              \
        10000,             /* timeoutMs */                                   \
        (size_t)2 << 20,   /* latencyBufferBytes: 2 MiB per half */          \
        (size_t)256 << 20  /* throughputBufferBytes: 256 MiB per half */     \
  }

/* --- Version and errors -------------------------------------------------- */

/* Stores PURLIN_VERSION_CODE of the library in *version.
 * Returns purlinInvalidArgument if version is NULL. */
PURLIN_API purlinResult_t purlinGetVersion(int* version);

/* A static message for a result code ("unknown result code" for values
 * outside the enum). Never NULL. */
PURLIN_API const char* purlinGetErrorString(purlinResult_t result);

/* The enum name of a result code, e.g. "purlinInvalidArgument"
 * ("purlinUnknownResult" for values outside the enum). Never NULL. */
PURLIN_API const char* purlinGetErrorName(purlinResult_t result);

/*
 * The detail text of the last failure: which argument, which rank, which
 * limit, and where in purlin it was detected. With a live communicator, the
 * last failure of a call on that communicator; with NULL, the last failure of
 * any purlin call made by the calling thread (use this after a failed init,
 * or a call given an invalid handle). Returns "" if there was none. The text
 * stays valid until the next failing call on the same communicator/thread.
 */
PURLIN_API const char* purlinGetLastError(purlinComm_t comm);

/* --- Communicators ------------------------------------------------------- */

/*
 * Creates `nranks` communicators, one per rank, driven by this process.
 * Rank i runs on CUDA device devices[i]; with devices == NULL rank i runs on
 * device i. Any mapping is allowed, several ranks on one GPU included (each
 * rank gets its own buffers; see the megakernelCtas limit in purlinConfig_t).
 * Ranks on different GPUs need peer-to-peer access between those GPUs.
 *
 * Each rank receives a symmetric heap (staging buffers) allocated with the
 * CUDA driver's virtual memory API and mapped for every GPU in the group.
 * Not stream-ordered and not capturable: it allocates and synchronises.
 * On failure nothing is written to comms and everything acquired is released.
 *
 * comms   array of nranks handles, written on success
 * nranks  1 .. PURLIN_MAX_RANKS
 * devices nranks CUDA device ordinals, or NULL
 *
 * Returns purlinSuccess; purlinInvalidArgument (NULL comms, nranks out of
 * range, a device ordinal that does not exist); purlinInvalidUsage (ranks ×
 * megakernelCtas exceed a GPU's SMs, two GPUs without peer access);
 * purlinNoDevice (no GPU or driver); purlinOutOfMemory;
 * purlinUnhandledCudaError. Details: purlinGetLastError(NULL).
 */
PURLIN_API purlinResult_t purlinCommInitAll(purlinComm_t* comms, int nranks, const int* devices);

/*
 * purlinCommInitAll with an explicit configuration. config == NULL means
 * PURLIN_CONFIG_INITIALIZER. A config with a wrong size, magic or version,
 * or a field outside its documented range, returns purlinInvalidArgument.
 */
PURLIN_API purlinResult_t purlinCommInitAllConfig(purlinComm_t* comms, int nranks,
                                                  const int* devices,
                                                  const purlinConfig_t* config);

/* Number of ranks in the communicator's group. Returns purlinInvalidArgument
 * for a NULL or dead handle or a NULL count. */
PURLIN_API purlinResult_t purlinCommCount(purlinComm_t comm, int* count);

/* This communicator's rank, 0 .. count-1. Errors as purlinCommCount. */
PURLIN_API purlinResult_t purlinCommUserRank(purlinComm_t comm, int* rank);

/* The CUDA device ordinal this rank runs on. Errors as purlinCommCount. */
PURLIN_API purlinResult_t purlinCommCuDevice(purlinComm_t comm, int* device);

/*
 * Releases one rank's communicator. Device memory shared by the group (every
 * rank's heap is mapped by every peer) is released when the last rank of the
 * group is destroyed or aborted. NULL is a no-op returning purlinSuccess.
 * A handle that is not live (never created, or already destroyed) returns
 * purlinInvalidArgument and changes nothing. Not stream-ordered.
 */
PURLIN_API purlinResult_t purlinCommDestroy(purlinComm_t comm);

/*
 * Aborts the communicator: raises the group's abort word, so that every
 * device-side wait of every rank in the group leaves its loop, records the
 * abort as the asynchronous error of the other ranks (purlinRemoteError),
 * and releases this rank as purlinCommDestroy does. The CUDA context stays
 * usable. NULL is a no-op; a dead handle returns purlinInvalidArgument.
 */
PURLIN_API purlinResult_t purlinCommAbort(purlinComm_t comm);

/*
 * Stores in *asyncError the first asynchronous failure of the communicator's
 * group (purlinSuccess if none): a device-side timeout, a mismatch between
 * ranks, or a peer's abort. The detail text is purlinGetLastError(comm).
 * Returns purlinInvalidArgument for a NULL or dead handle or NULL asyncError.
 */
PURLIN_API purlinResult_t purlinCommGetAsyncError(purlinComm_t comm, purlinResult_t* asyncError);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PURLIN_H_ */
