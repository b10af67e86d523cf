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
#define PURLIN_VERSION_MINOR 2
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

/* The size of purlinUniqueId_t, fixed so that it can be sent as bytes. */
#define PURLIN_UNIQUE_ID_BYTES 128

/*
 * Names one rendezvous of purlinCommInitRank: where rank 0 listens (a Unix
 * domain socket in the abstract namespace of this server; nothing is created
 * on disk) and a random 64-bit magic that every rank must present. Opaque
 * bytes: copy it whole from the process that made it to every rank (MPI
 * broadcast, a file, a key-value store). It grants entry to the
 * communicator, so keep it among the job's processes.
 */
typedef struct purlinUniqueId_t {
  char internal[PURLIN_UNIQUE_ID_BYTES];
} purlinUniqueId_t;

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
  /* CTAs a session's persistent megakernel holds on each rank's GPU (one SM
   * each) while the session is open. 0 (the default) chooses from the
   * placement: a quarter of the GPU's SMs shared by the ranks on it, at
   * least 8 a rank (as the SMs allow) and at most 32 -- 32 with one rank
   * a GPU, 16 with two, 8 with 4 or 8 on a 132-SM H100/H200;
   * purlinCommMegakernelCtas tells the choice. 1..1024 fixes it: the
   * ranks placed on one GPU times this value must not exceed the GPU's SM
   * count, because every rank's CTAs must be resident at the same time; a
   * session runs at most 32, and purlinSessionBegin also needs 2 SMs per
   * rank for its nodes: ranks on one GPU x (this + 2) <= its SMs. */
  int megakernelCtas;
  /* Bound on every device-side wait, in milliseconds; a wait that exceeds it
   * aborts the communicator with purlinTimeout. Also bounds the whole
   * rendezvous of purlinCommInitRank. 1 .. 3600000. */
  int timeoutMs;
  /* Bytes of each half of a rank's latency (push) staging buffer. Rounded up
   * to 64 KiB. 64 KiB .. 1 GiB. */
  size_t latencyBufferBytes;
  /* Bytes of each half of a rank's throughput (pull) staging buffer. Rounded
   * up to 64 KiB. 64 KiB .. 16 GiB. */
  size_t throughputBufferBytes;
  /* Which SNAC path collectives take: purlinPathAuto (the tuning policy
   * chooses per call), purlinPathLatency or purlinPathThroughput (forced;
   * for tests and benchmarks). A forced latency path refuses calls whose
   * blocks exceed the latency buffer (purlinInvalidUsage). */
  int path;
  /* CTAs each rank's collective kernels use: 0 lets the tuning policy
   * choose; 1..32 forces the count (tests use it to check that results do
   * not depend on it), capped on the throughput path at the GPU's SMs
   * divided among the ranks on it (all ranks' CTAs must be resident at
   * once) and by what the staging buffer holds. */
  int collectiveCtas;
  /* Bytes of address space of each rank's window for symmetric buffers
   * (purlinMemAlloc, purlinCommRegister): the most symmetric memory a rank
   * can hold at once. Address space only, reserved at init (no memory
   * behind it): each process reserves one window per rank of its
   * communicator. Rounded up to the GPUs' allocation granularity. 0
   * disables symmetric buffers. 0 .. 1 TiB. A config of the size before
   * this field (older headers) gets the default. */
  size_t windowBytes;
} purlinConfig_t;

/* Values of purlinConfig_t.path. */
#define purlinPathAuto 0
#define purlinPathLatency 1
#define purlinPathThroughput 2

#define PURLIN_CONFIG_INITIALIZER                                            \
  {                                                                          \
    sizeof(purlinConfig_t), PURLIN_CONFIG_MAGIC, PURLIN_CONFIG_VERSION,      \
        0,                 /* megakernelCtas: from the placement */          \
        10000,             /* timeoutMs */                                   \
        (size_t)4160 << 10, /* latencyBufferBytes: 4 MiB + 64 KiB per half */\
        (size_t)256 << 20, /* throughputBufferBytes: 256 MiB per half */     \
        0,                 /* path: purlinPathAuto */                        \
        0,                 /* collectiveCtas: tuned */                       \
        (size_t)64 << 30   /* windowBytes: 64 GiB of address space */        \
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
 * or a call given an invalid handle). Returns "" if there was none. With a
 * communicator the text is copied for the calling thread and stays valid
 * until its next purlinGetLastError; with NULL, until the thread's next
 * failing call. Thread-safe.
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

/*
 * Makes a new purlinUniqueId_t for purlinCommInitRank: a random socket name
 * (from the caller's pid and 128 bits from getrandom) and a random magic.
 * Call it once, in one process (usually the one that will be rank 0), and
 * pass the id to every rank. Creates nothing: rank 0 starts listening inside
 * purlinCommInitRank. Touches no GPU; thread-safe.
 *
 * id  written on success
 *
 * Returns purlinSuccess; purlinInvalidArgument (id is NULL);
 * purlinSystemError (the system has no randomness). Details:
 * purlinGetLastError(NULL).
 */
PURLIN_API purlinResult_t purlinGetUniqueId(purlinUniqueId_t* id);

/*
 * Creates this process's rank of a communicator whose ranks are separate
 * processes of this server, one GPU each (the one-process-per-GPU mode of
 * torchrun and mpirun). Every rank calls it with the same nranks, id and
 * configuration, and its own rank; the rank runs on the calling thread's
 * current CUDA device (cudaSetDevice before the call). The call returns
 * when every rank has joined and mapped every peer's heap, or when the
 * rendezvous fails; config->timeoutMs bounds the whole rendezvous.
 *
 * How: rank 0 listens at the id's socket and the others connect to it; the
 * ranks exchange a description (version, nranks, configuration, GPU UUID)
 * and check it, then each creates its symmetric heap, exports it as a file
 * descriptor and receives every peer's descriptor (SCM_RIGHTS); each maps
 * every peer's heap for its own GPU, and the device peer table holds those
 * local mappings. Received descriptors are closed before the call returns;
 * on failure the sockets too, and on success they stay open (one per peer
 * on rank 0, one on the others) for purlinMemAlloc and purlinCommRegister
 * until the communicator is destroyed. Every process must see every GPU
 * of the communicator (do not narrow CUDA_VISIBLE_DEVICES to one GPU per
 * process), the GPUs need peer-to-peer access, and all ranks must run as
 * the same user (checked with SO_PEERCRED: what they exchange gives access
 * to GPU memory).
 *
 * Not stream-ordered and not capturable: it allocates, synchronises and
 * waits for the other processes. Thread-safe; the calling thread's current
 * device is left as it was. Unlike purlinCommInitAll, several ranks of
 * different processes on one GPU are refused (DESIGN.md section 8: their
 * kernels would be time-sliced, not concurrent).
 *
 * comm    written on success; untouched on failure
 * nranks  1 .. PURLIN_MAX_RANKS, the same on every rank
 * id      from purlinGetUniqueId, the same on every rank
 * rank    0 .. nranks-1, each passed by exactly one process
 * config  NULL for PURLIN_CONFIG_INITIALIZER; the same on every rank
 *
 * Returns purlinSuccess; purlinInvalidArgument (NULL comm, nranks or rank out
 * of range, an id not made by purlinGetUniqueId, an invalid config);
 * purlinInvalidUsage (ranks disagree on nranks, configuration or purlin
 * version, two processes pass one rank, two ranks of different processes
 * use one GPU, a peer's GPU is not visible or not reachable peer-to-peer,
 * rank 0 refused this rank's id, a rank runs as another user,
 * megakernelCtas exceeds the GPU's SMs);
 * purlinTimeout (a rank, named in the message, did not arrive in time);
 * purlinRemoteError (a rank, named, exited or failed during the rendezvous;
 * its own error is quoted); purlinNoDevice; purlinOutOfMemory;
 * purlinSystemError; purlinUnhandledCudaError. When one rank fails after
 * all have joined, every rank fails. Details: purlinGetLastError(NULL).
 */
PURLIN_API purlinResult_t purlinCommInitRank(purlinComm_t* comm, int nranks, purlinUniqueId_t id,
                                             int rank, const purlinConfig_t* config);

/*
 * purlinCommInitRank with rank, nranks, device and id taken from the
 * launcher's environment, so that a program started by torchrun, mpirun or
 * srun needs no code to share an id:
 *   torchrun  RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; job id
 *             TORCHELASTIC_RUN_ID (with MASTER_ADDR, MASTER_PORT and
 *             TORCHELASTIC_RESTART_COUNT when set)
 *   Open MPI  OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE; job id
 *             PMIX_NAMESPACE, else OMPI_MCA_ess_base_jobid, else
 *             OMPI_MCA_orte_hnp_uri
 *   Slurm     SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (one node); job id
 *             SLURM_JOB_ID with SLURM_STEP_ID
 * The first launcher found in this order is used (torchrun inside a Slurm
 * job is torchrun). The rank runs on CUDA device LOCAL_RANK (the launcher's
 * local rank). PURLIN_ID, when set, replaces the job id: set it to the same
 * value in every process, and to different values for communicators that
 * initialise at the same time. Every process derives the same socket name
 * and magic from the job id, its size and the user id, so ranks meet
 * without exchanging anything first; such an id keeps other jobs out but is
 * no secret. One communicator per job id may be initialising at a time.
 * Not stream-ordered, not capturable, thread-safe; the current device is
 * left as it was.
 *
 * comm    written on success; untouched on failure
 * config  NULL for PURLIN_CONFIG_INITIALIZER; the same on every rank
 *
 * Returns what purlinCommInitRank returns, and purlinInvalidArgument (comm
 * is NULL); purlinInvalidUsage with a message naming the variables when no
 * launcher is found, one is missing or malformed, values contradict each
 * other (rank >= size, ranks on several nodes), or the local rank has no
 * GPU. Details: purlinGetLastError(NULL).
 */
PURLIN_API purlinResult_t purlinCommInitRankFromEnv(purlinComm_t* comm,
                                                    const purlinConfig_t* config);

/* Number of ranks in the communicator's group. Returns purlinInvalidArgument
 * for a NULL or dead handle or a NULL count. */
PURLIN_API purlinResult_t purlinCommCount(purlinComm_t comm, int* count);

/* This communicator's rank, 0 .. count-1. Errors as purlinCommCount. */
PURLIN_API purlinResult_t purlinCommUserRank(purlinComm_t comm, int* rank);

/* The CUDA device ordinal this rank runs on. Errors as purlinCommCount. */
PURLIN_API purlinResult_t purlinCommCuDevice(purlinComm_t comm, int* device);

/* The CTAs (one SM each) a session's megakernel holds on this rank's GPU:
 * config.megakernelCtas, or the automatic choice where that is 0 (always
 * 1..32, and fits beside the nodes of every rank on the GPU). The same on
 * every rank of the group. A configured count above 32 is returned as set,
 * and purlinSessionBegin refuses it. Errors as purlinCommCount, and
 * purlinUnhandledCudaError. */
PURLIN_API purlinResult_t purlinCommMegakernelCtas(purlinComm_t comm, int* ctas);

/*
 * Releases one rank's communicator. Device memory shared by the group (every
 * rank's heap is mapped by every peer) is released when the last rank of the
 * group is destroyed or aborted. For a rank made by purlinCommInitRank the
 * group is this process's part: its mappings of the peers' heaps are
 * released (in reverse order of mapping), then its own heap, whose memory
 * the driver frees once every peer process has released its mapping too.
 * No communication: peers are not told. NULL is a no-op returning
 * purlinSuccess. A handle that is not live (never created, or already
 * destroyed) returns purlinInvalidArgument and changes nothing. Not
 * stream-ordered, not capturable. Like NCCL's, it first waits for the
 * rank's queued uncaptured calls to finish (each is bounded by the
 * timeout); graphs holding captured calls must not be launched after it,
 * nor be running. With a session open it returns
 * purlinInvalidUsage and changes nothing (end the session first).
 * Thread-safe: any thread may call it at any time, also while other
 * threads make calls on the same communicator (those finish first, or are
 * refused with purlinInvalidArgument). A handle is never valid again after
 * its destroy or abort, however purlin reuses its memory: calls with it
 * return purlinInvalidArgument.
 */
PURLIN_API purlinResult_t purlinCommDestroy(purlinComm_t comm);

/*
 * Aborts the communicator: raises the group's abort word, so that every
 * device-side wait of every rank in the group leaves its loop, records the
 * abort as the asynchronous error of the other ranks (purlinRemoteError),
 * and releases this rank as purlinCommDestroy does. The CUDA context stays
 * usable. NULL is a no-op; a dead handle returns purlinInvalidArgument.
 * For a rank made by purlinCommInitRank the abort word is this process's
 * only; the abort also raises the group's failure word in rank 0's heap,
 * so that peer processes' waits stop within microseconds with
 * purlinRemoteError naming this rank (their host calls are not told).
 * Waits for the rank's queued calls as destroy does. An open session's
 * megakernel exits (within microseconds of the abort word) before the
 * rank's memory is released. Not stream-ordered, not capturable;
 * thread-safe as purlinCommDestroy is: a watchdog thread may abort while
 * other threads issue collectives.
 */
PURLIN_API purlinResult_t purlinCommAbort(purlinComm_t comm);

/*
 * Stores in *asyncError the first asynchronous failure of the communicator's
 * group (purlinSuccess if none): a device-side timeout, a mismatch between
 * ranks, or a peer's abort. The detail text is purlinGetLastError(comm).
 * Returns purlinInvalidArgument for a NULL or dead handle or NULL asyncError.
 * In a group of several processes each process reports its own ranks'
 * failures, and a rank whose peer in another process failed first reports
 * purlinRemoteError naming it. Thread-safe; any thread, any time.
 */
PURLIN_API purlinResult_t purlinCommGetAsyncError(purlinComm_t comm, purlinResult_t* asyncError);

/* --- Collectives ---------------------------------------------------------
 *
 * Argument order and semantics follow NCCL. Every collective is
 * stream-ordered on `stream` (a cudaStream_t) and capturable in CUDA Graphs:
 * nothing inside synchronises with the host, and a captured call replays
 * correctly any number of times. Every rank of the communicator must call
 * the same collectives in the same order with matching counts, datatype and
 * op; a mismatch is detected on the device and reported through
 * purlinCommGetAsyncError (the communicator is then aborted), never a hang.
 *
 * Buffers are device memory of the rank's GPU (cudaMalloc, memory pools,
 * managed memory), aligned to their datatype's size (what cudaMalloc and
 * PyTorch give; any further alignment is handled). In place: AllReduce with sendbuff == recvbuff;
 * AllGather(V) with sendbuff == recvbuff + (offset of this rank's block);
 * ReduceScatter(V) with recvbuff == sendbuff + (offset of this rank's block).
 * Other overlaps are refused (purlinInvalidUsage).
 *
 * Reductions are deterministic: every element is reduced over ranks
 * 0, 1, ..., nranks-1 in that order (fp16/bf16/fp8 accumulate in fp32), so
 * the same inputs give the same bits for every size, path, CTA count and
 * placement of ranks on GPUs.
 *
 * Errors returned before anything is launched, with a message in
 * purlinGetLastError(comm): purlinInvalidArgument (datatype, op, counts
 * whose buffers exceed 2^62 bytes, NULL or host buffers holding data,
 * buffers not aligned to their datatype's size, NULL counts), purlinInvalidUsage (bad overlap, forced latency path too small),
 * purlinAborted (the communicator was aborted), purlinUnhandledCudaError
 * (the launch failed). */

struct CUstream_st; /* cudaStream_t is struct CUstream_st* */

/* recvbuff[i] = op over ranks r of sendbuff_r[i], i < count. */
PURLIN_API purlinResult_t purlinAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                          purlinDataType_t datatype, purlinRedOp_t op,
                                          purlinComm_t comm, struct CUstream_st* stream);

/* recvbuff[r * sendcount + i] = sendbuff_r[i], i < sendcount. */
PURLIN_API purlinResult_t purlinAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                          purlinDataType_t datatype, purlinComm_t comm,
                                          struct CUstream_st* stream);

/* recvbuff_r[i] = op over ranks q of sendbuff_q[r * recvcount + i]. */
PURLIN_API purlinResult_t purlinReduceScatter(const void* sendbuff, void* recvbuff,
                                              size_t recvcount, purlinDataType_t datatype,
                                              purlinRedOp_t op, purlinComm_t comm,
                                              struct CUstream_st* stream);

/* recvbuff_d[s * count + i] = sendbuff_s[d * count + i]: `count` elements
 * from every rank to every rank. */
PURLIN_API purlinResult_t purlinAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                                         purlinDataType_t datatype, purlinComm_t comm,
                                         struct CUstream_st* stream);

/* Variable-length forms. `counts` may live in host memory (pageable or
 * pinned; read during the call, and free to change after it) or in device
 * memory (cudaMalloc, or managed): device counts are read by the GPU when
 * the collective runs, so a kernel earlier on the stream may write them and
 * a captured graph needs no host round trip. Every rank must pass the same
 * counts. With device counts the host cannot see the sizes: the throughput
 * path runs, buffers must hold what the counts say, and counts whose sum
 * overflows are reported through purlinCommGetAsyncError.
 *
 * AllGatherV: rank r sends counts[r] elements; recvbuff receives the blocks
 * of ranks 0..nranks-1 packed in rank order. */
PURLIN_API purlinResult_t purlinAllGatherV(const void* sendbuff, void* recvbuff,
                                           const size_t* counts, purlinDataType_t datatype,
                                           purlinComm_t comm, struct CUstream_st* stream);

/* ReduceScatterV: sendbuff holds nranks blocks packed in rank order, block
 * r of counts[r] elements; rank r receives the reduction of block r. */
PURLIN_API purlinResult_t purlinReduceScatterV(const void* sendbuff, void* recvbuff,
                                               const size_t* counts, purlinDataType_t datatype,
                                               purlinRedOp_t op, purlinComm_t comm,
                                               struct CUstream_st* stream);

/* AllToAllV: counts is an nranks x nranks matrix, counts[s * nranks + d]
 * elements go from rank s to rank d. Rank s's sendbuff holds its blocks for
 * d = 0..nranks-1 packed in order; rank d's recvbuff receives the blocks
 * from s = 0..nranks-1 packed in order. */
PURLIN_API purlinResult_t purlinAllToAllV(const void* sendbuff, void* recvbuff,
                                          const size_t* counts, purlinDataType_t datatype,
                                          purlinComm_t comm, struct CUstream_st* stream);

/* --- AllReduce fused with residual add and RMSNorm --------------------------
 *
 * The epilogue of every tensor-parallel transformer layer fused with its
 * AllReduce (the argument set of FlashInfer's / TensorRT-LLM's allreduce
 * fusion): on the latency path (decode sizes) one kernel per rank where
 * the AllReduce's CTAs hold whole 1024-element blocks of the rows (1-8
 * tokens of 4096 at 8 ranks on one GPU), else the AllReduce's kernel and
 * the epilogue's, which measured as fast; so too on the throughput path
 * (snac/fused.h says why). `count` = tokens x `hidden` elements, row t at t * hidden:
 *
 *   s           = AllReduce(in), sum            (the same bits as purlinAllReduce)
 *   residualOut = round(s + residualIn)
 *   r           = 1 / sqrt(mean over the row of residualOut^2 + eps)
 *   out         = round(residualOut * r * weight)   (weight: hidden elements)
 *
 * in fp32, each step one IEEE operation rounded to nearest, and the sum of
 * squares in one fixed order (snac/fused.h), so the results are a function
 * of the inputs alone: they do not change with the size, the path, the CTA
 * count or the placement of ranks, and equal an unfused AllReduce followed
 * by the same epilogue. Datatype purlinFloat16 or purlinBfloat16; any
 * hidden >= 1 (rows up to 16384 elements stay in registers with 8-byte
 * aligned buffers, up to 8192 otherwise; longer ones read residualOut
 * back). Eps >= 0 and finite.
 *
 * Buffers as for purlinAllReduce (device memory of the rank's GPU, aligned
 * to the datatype). In place: out == in, and residualOut == residualIn or
 * == in; `out` must not overlap residualIn, residualOut or weight, and
 * residualOut must not overlap weight (purlinInvalidUsage). Inside a
 * session the AllReduce runs in the megakernel and the epilogue as a kernel
 * after its wait (the same bits). If the call fails on the device
 * (purlinCommGetAsyncError), out and residualOut are undefined, as every
 * failed collective's output is; in place, residualIn with them. */
PURLIN_API purlinResult_t purlinAllReduceResidualRMSNorm(
    const void* in, const void* residualIn, const void* weight, float eps, void* out,
    void* residualOut, size_t count, size_t hidden, purlinDataType_t datatype,
    purlinComm_t comm, struct CUstream_st* stream);

/* The same, and also outFp8[i] = fp8 e4m3 of (residualOut * r * weight)[i] *
 * scale, before `out`'s rounding, saturated to +-448 (NaN stays NaN):
 * `out` is still written (the call uses it for the AllReduce's sums).
 * outFp8 holds count bytes, distinct from every other buffer; scale is
 * finite. */
PURLIN_API purlinResult_t purlinAllReduceResidualRMSNormFp8(
    const void* in, const void* residualIn, const void* weight, float eps, float scale,
    void* out, void* residualOut, void* outFp8, size_t count, size_t hidden,
    purlinDataType_t datatype, purlinComm_t comm, struct CUstream_st* stream);

/* --- Sessions: the persistent megakernel ---------------------------------
 *
 * Inside a session, a rank's collectives are run by its megakernel: a
 * kernel of purlinCommMegakernelCtas CTAs (1..32 for sessions) resident on
 * the rank's GPU for the whole session, which takes each call as a
 * descriptor from the rank's ring queue. A call then costs its stream one
 * small node (enqueue, and wait for completion) instead of a kernel that
 * the GPU must schedule, and results are the same bits as in eager mode.
 * Outside a session every call launches its own kernel (eager mode); any
 * mix of the two keeps the ranks in step.
 *
 * Rules. Every rank of the group opens and ends its sessions in the same
 * order and makes the same collective calls inside each (a graph that
 * records a session must record the same calls on every rank). Calls on
 * one communicator run in call order whatever their streams. While a
 * megakernel is resident, cudaDeviceSynchronize, cudaFree, cudaFreeHost
 * and the first launch of a kernel not yet loaded wait for it to exit
 * (CUDA's rule for resident kernels): end the session first, or load your
 * kernels beforehand (purlinPreloadKernel, or CUDA_MODULE_LOADING=EAGER).
 * A megakernel that has nothing to run for 4 x config.timeoutMs retires by
 * itself and the group reports purlinInvalidUsage (a session never ended);
 * so do enqueues with no megakernel serving. Not thread-safe for one
 * communicator (use each from one thread at a time, as its collectives).
 */

/*
 * Opens a session on `stream`: forks a side stream from it, launches the
 * rank's megakernel there, and makes `stream` wait until every megakernel
 * CTA is resident (so later work on `stream` never holds the SMs it
 * needs; the group reports purlinTimeout when the GPU cannot
 * hold them within timeoutMs). The first session of a communicator also
 * allocates its session resources (a side stream, events, a small V-count
 * block) and loads the kernels it launches. Stream-ordered; capturable (a
 * captured session's megakernel lives for each replay).
 *
 * Returns purlinSuccess; purlinInvalidArgument (dead handle);
 * purlinInvalidUsage (a session is already open on this rank,
 * megakernelCtas above 32); purlinAborted; purlinUnhandledCudaError.
 */
PURLIN_API purlinResult_t purlinSessionBegin(purlinComm_t comm, struct CUstream_st* stream);

/*
 * Ends the rank's open session on `stream` (any stream: it is ordered after
 * the session's last call): enqueues a retire descriptor after everything
 * the session was given, and joins the megakernel's side stream back into
 * `stream`, which continues once the megakernel has exited.
 * Stream-ordered; capturable.
 *
 * Returns purlinSuccess; purlinInvalidArgument (dead handle);
 * purlinInvalidUsage (no session open); purlinUnhandledCudaError.
 */
PURLIN_API purlinResult_t purlinSessionEnd(purlinComm_t comm, struct CUstream_st* stream);

/*
 * Groups, as NCCL's: calls made between purlinGroupStart and
 * purlinGroupEnd on this thread are issued together. In a session, each
 * call of a group is enqueued without its wait, so that the megakernel
 * runs the group's calls back to back while the GPU launches the next
 * enqueue; purlinGroupEnd records, per communicator, one node that waits
 * for all of them, on every stream they were made on. A group's outputs
 * are therefore ready for work on those streams after purlinGroupEnd, not
 * after each call (the same contract as NCCL's). In eager mode a group
 * changes nothing: every call launches its kernel when made. Groups nest
 * (the outermost end issues the waits); ending a session inside a group
 * waits for its calls first. Thread-local; capturable.
 *
 * purlinGroupStart returns purlinSuccess. purlinGroupEnd returns
 * purlinSuccess; purlinInvalidUsage (no group open on this thread);
 * purlinUnhandledCudaError (a wait could not be recorded: that
 * communicator's calls are then unwaited, and its last error says so).
 */
PURLIN_API purlinResult_t purlinGroupStart(void);
PURLIN_API purlinResult_t purlinGroupEnd(void);

/* --- Symmetric buffers -----------------------------------------------------
 *
 * A collective whose sendbuff and recvbuff are both symmetric buffers runs
 * in place on the throughput path: peers read and write them directly
 * (over NVLink, in any process layout), with no copy through the staging
 * buffers. Each rank has a window of config.windowBytes of address space,
 * and every process maps each symmetric buffer of a peer at the same
 * offset of its view of that peer's window, so a peer reaches it by its
 * offset. The latency path (small calls) is
 * unchanged: its packets carry their own flags, and writing in place would
 * cost a separate flag round trip. Nothing else changes: a symmetric
 * buffer is ordinary device memory of the rank's GPU, valid for every
 * collective, kernel and copy; a collective on other memory still works
 * (staged), captured or not; purlin never registers anything itself.
 *
 * Rules. These calls are not stream-ordered and must not be made while the
 * calling thread captures a CUDA Graph (they allocate and map memory).
 * purlinMemAlloc and purlinCommRegister are collective for a communicator
 * of one process per GPU (purlinCommInitRank): every rank makes the same
 * calls, with the same sizes, in the same order, and each blocks until
 * every rank has made it (bounded by config.timeoutMs; after an exchange
 * that failed, a timeout or a peer process gone, the communicator can
 * share no more buffers between processes); with purlinCommInitAll each
 * rank's call is local. purlinMemFree and
 * purlinCommDeregister are local; make them on every rank, in the same
 * order as the allocations they undo, once no collective that uses the
 * buffer runs any more: like ncclMemFree, they wait for the rank's queued
 * uncaptured calls, but a CUDA Graph holding a call on the buffer must not
 * be launched after it. Buffers still allocated or registered when the
 * communicator's group is released (its last rank destroyed or aborted)
 * are released then. Not thread-safe for one communicator, like its
 * collectives.
 */

/*
 * Allocates `bytes` of device memory on the rank's GPU as a symmetric
 * buffer and stores its address in *ptr (aligned to the allocation
 * granularity, 2 MiB on current GPUs; the size is rounded up to it).
 * Collective between processes (see the rules above): every rank must
 * pass the same `bytes`; ranks that made different calls all fail with
 * purlinInvalidUsage naming them, and nothing is allocated.
 *
 * Returns purlinSuccess; purlinInvalidArgument (dead handle, NULL ptr,
 * bytes 0); purlinInvalidUsage (config.windowBytes is 0; out of window:
 * the buffer does not fit in what is left of the rank's window, the message
 * names the sizes; ranks disagree; the GPU cannot export memory to another
 * process); purlinOutOfMemory; purlinTimeout, purlinRemoteError (a peer
 * process did not call in time, or failed: its error is quoted);
 * purlinUnhandledCudaError; purlinSystemError. On failure *ptr is untouched.
 */
PURLIN_API purlinResult_t purlinMemAlloc(purlinComm_t comm, size_t bytes, void** ptr);

/*
 * Frees a buffer of purlinMemAlloc on this communicator (ptr exactly as
 * it returned). Local, no communication; waits for the rank's queued
 * uncaptured calls first. NULL is a no-op.
 *
 * Returns purlinSuccess; purlinInvalidArgument (dead handle; ptr is not a
 * buffer purlinMemAlloc returned for this rank, or points inside one).
 */
PURLIN_API purlinResult_t purlinMemFree(purlinComm_t comm, void* ptr);

/*
 * Makes memory the caller already has symmetric: [ptr, ptr + bytes) must
 * lie in one allocation of the CUDA driver's virtual memory API
 * (cuMemCreate on the rank's GPU, mapped whole with cuMemMap at offset 0
 * and accessible to the rank's GPU); the whole allocation is mapped a
 * second time into the rank's window, and collectives on any buffer inside
 * it then run in place. Between processes (purlinCommInitRank) the
 * allocation must have been created with requestedHandleTypes including
 * CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, every rank must register an
 * allocation of the same size, and the call is collective. Registering an
 * allocation that is registered already returns the same handle (each
 * registration needs its deregistration). Memory of cudaMalloc,
 * cudaMallocAsync or memory pools cannot be registered: use purlinMemAlloc.
 * Collectives whose counts are in device memory run in place only on
 * buffers of purlinMemAlloc (the host cannot check their extent). The
 * allocation must stay mapped until the registration is undone.
 *
 * handle  written on success: pass it to purlinCommDeregister
 *
 * Returns purlinSuccess; purlinInvalidArgument (dead handle, NULL ptr or
 * handle, bytes 0, memory that is not of the virtual memory API, not of
 * the rank's GPU, or spans several allocations, memory already in the
 * window); purlinInvalidUsage (config.windowBytes is 0; out of window; the
 * allocation is not exportable between processes; it overlaps another
 * registration; ranks disagree); purlinTimeout, purlinRemoteError (as
 * purlinMemAlloc); purlinUnhandledCudaError; purlinSystemError. On
 * failure *handle is untouched.
 */
PURLIN_API purlinResult_t purlinCommRegister(purlinComm_t comm, void* ptr, size_t bytes,
                                             void** handle);

/*
 * Undoes one purlinCommRegister: with its last registration, the
 * allocation's alias in the window is unmapped (the caller's own mapping
 * and memory are untouched). Local, no communication; waits for the rank's
 * queued uncaptured calls first. NULL is a no-op.
 *
 * Returns purlinSuccess; purlinInvalidArgument (dead handle; handle is not
 * a live registration of this rank).
 */
PURLIN_API purlinResult_t purlinCommDeregister(purlinComm_t comm, void* handle);

/* --- Device enqueue --------------------------------------------------------
 *
 * A kernel of yours can hand a collective to the session's megakernel
 * itself, so that the collective costs the graph no node: a producing
 * kernel enqueues at its end, a consuming kernel waits in its prologue
 * (purlinDevEnqueue, purlinDevWait and purlinDevWaitAll in
 * <purlin/device.cuh>). The host prepares each call once (its plan for the
 * megakernel, the same as a host call in a session would get) and passes
 * the kernels the rank's queue and the prepared calls as arguments. Every
 * rank must enqueue the same calls in the same order (device enqueues and
 * host calls in a session share one queue per rank, in the order they
 * reach it), and only while a session is open on the rank: an enqueue with
 * no megakernel serving is reported (purlinInvalidUsage) and not run.
 */

/* A rank's descriptor queue as device code sees it. */
typedef struct purlinDevQueue_t {
  void* control; /* the rank's control region (opaque) */
} purlinDevQueue_t;

/* One collective call prepared for a rank's megakernel: 64 opaque bytes,
 * valid on the communicator it was made for, for any number of enqueues
 * (so a captured graph replays it). */
typedef struct purlinDevColl_t {
  unsigned long long words[8];
} purlinDevColl_t;

/* The collectives, for purlinDevCollPrepare. */
typedef enum purlinCollKind_t {
  purlinKindAllReduce = 0,
  purlinKindAllGather = 1,
  purlinKindReduceScatter = 2,
  purlinKindAllToAll = 3,
  purlinKindAllGatherV = 4,
  purlinKindReduceScatterV = 5,
  purlinKindAllToAllV = 6
} purlinCollKind_t;

/* The queue of `comm`'s rank, for its kernels. Not stream-ordered. Returns
 * purlinSuccess; purlinInvalidArgument (dead handle, NULL queue). */
PURLIN_API purlinResult_t purlinSessionQueue(purlinComm_t comm, purlinDevQueue_t* queue);

/*
 * Prepares collective `kind` with the arguments its host call takes
 * (`count` for the uniform forms; `deviceCounts` for the V forms: counts
 * in device memory, as their host calls accept, read when the megakernel
 * runs the call, so they must stay valid until it completes) for the
 * megakernel of `comm`'s rank. Checked as the host call is: every error a
 * host call would report for these arguments is reported here, nothing on
 * the device. Not stream-ordered; makes the communicator's session
 * resources at its first use (as purlinSessionBegin does).
 *
 * Returns purlinSuccess; purlinInvalidArgument (dead handle, NULL coll,
 * bad kind, buffers or counts, host counts for a V form); purlinInvalidUsage
 * (sessions unsupported on this GPU); purlinUnhandledCudaError.
 */
PURLIN_API purlinResult_t purlinDevCollPrepare(purlinComm_t comm, purlinCollKind_t kind,
                                               const void* sendbuff, void* recvbuff,
                                               size_t count, const size_t* deviceCounts,
                                               purlinDataType_t datatype, purlinRedOp_t op,
                                               purlinDevColl_t* coll);

/*
 * Loads kernel `fn` (a __global__ function's address) on the current
 * device now, so that its first launch while a megakernel is resident does
 * not wait for the megakernel to exit; and raises the device's stack limit
 * (cudaLimitStackSize) to the kernel's stack frame when below it, since a
 * launch past the limit also waits for the resident kernels (the raise
 * itself waits for the device's running kernels: call it before the
 * session). Not stream-ordered; thread-safe.
 * Returns purlinSuccess; purlinInvalidArgument (NULL, or not a kernel of
 * this program); purlinUnhandledCudaError.
 */
PURLIN_API purlinResult_t purlinPreloadKernel(const void* fn);

/* --- Device-side collectives ------------------------------------------------
 *
 * A kernel of yours can run a whole collective on some of its own CTAs
 * (purlinDevAllReduce and the others in <purlin/device.cuh>) while its other
 * CTAs keep computing: the same SNAC routines as the host calls, so the
 * same bits. The host hands the kernel each rank's communicator as a
 * purlinDevCommHandle_t. Rules (the host API's, seen from a kernel):
 *   - every rank runs the same collectives in the same order, each with a
 *     team of the same shape (CTAs, threads per CTA) on every rank;
 *   - the kernel is ordered with the rank's other collectives: launch it on
 *     the stream of the communicator's calls (it is then in call order like
 *     a host call), and not while a session is open on the rank (reported,
 *     purlinInvalidUsage: inside a session, use purlinDevEnqueue);
 *   - one team at a time runs the rank's collectives, and every CTA of
 *     every rank's team must be resident at once (waits are bounded by
 *     config.timeoutMs and report purlinTimeout rather than hang).
 * Calls refused on the device (a team out of range, a NULL buffer) and
 * every failure are reported through purlinCommGetAsyncError.
 */

/* A rank's communicator as device code sees it: opaque, valid for the
 * communicator's life, passed to kernels by value. */
typedef struct purlinDevCommHandle_t {
  void* control;                   /* the rank's control region */
  unsigned long long latencyLimit; /* largest block the device sends on the latency path */
  int direct;                      /* peers read this rank's buffers by address */
  int nranks;
  unsigned long long latencyLimitAllReduce; /* the same for AllReduce (one-shot: larger) */
} purlinDevCommHandle_t;

/*
 * The device handle of `comm`'s rank, for kernels that call device-side
 * collectives. Not stream-ordered. The handle carries the communicator's
 * path policy (config.path, the latency buffer's capacity) and whether peers
 * read this rank's buffers in place (ranks of one process on one GPU, or
 * buffers from purlinMemAlloc), so a call from a kernel takes the path and
 * staging a host call of the same size would.
 *
 * Returns purlinSuccess; purlinInvalidArgument (dead handle, NULL handle);
 * purlinUnhandledCudaError.
 */
PURLIN_API purlinResult_t purlinCommDevHandle(purlinComm_t comm, purlinDevCommHandle_t* handle);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PURLIN_H_ */
