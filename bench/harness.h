/*
 * harness.h -- what the benchmarks under bench/ share, so that a new timing
 * mode or column is written once: the GPU-absent skip line and the check
 * macros; the collectives, their shapes in nccl-tests' convention and the
 * size sweep; the options every collective benchmark takes; the ranks'
 * streams, events and buffers; inputs that are a function of (seed, rank,
 * index) and the exact check of every output element against a host
 * reference; the timing modes, as a table; a session recorded two ways;
 * and the pieces of nccl-tests style tables, JSON and summary lines. What one benchmark alone measures
 * (paths, libraries, floors, ceilings, its own columns) stays in it.
 */
#ifndef PURLIN_BENCH_HARNESS_H_
#define PURLIN_BENCH_HARNESS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "runtime/purlin.h"

enum { kBenchMaxRanks = PURLIN_MAX_RANKS };

/* ------------------------------------------------------------------------ */
/* GPU helpers                                                               */

/* Returns the number of CUDA devices, or prints one line saying why the
 * benchmark is skipped and returns 0. */
int benchDeviceCount(const char* benchmark);

/* A 64-bit -> 32-bit hash (the MurmurHash3 finaliser): inputs are a
 * function of (seed, rank, index), so expected outputs are computed, never
 * stored. */
static inline uint32_t benchMix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return (uint32_t)(x ^ (x >> 33));
}

/* A CUDA or purlin failure outside a measured call ends the benchmark:
 * later numbers would only report its consequences. The names and bodies
 * are those of tests/gpu/gpu_test.h, so that the benchmarks' call sites read
 * as the tests' do. */
#define GPU_CUDA_OK(cmd)                                                              \
  do {                                                                                \
    cudaError_t gpuErr_ = (cmd);                                                      \
    if (gpuErr_ != cudaSuccess) {                                                     \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #cmd,             \
              cudaGetErrorString(gpuErr_));                                           \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

#define GPU_PURLIN_OK(cmd)                                                            \
  do {                                                                                \
    purlinResult_t gpuRes_ = (cmd);                                                   \
    if (gpuRes_ != purlinSuccess) {                                                   \
      fprintf(stderr, "%s:%d: %s failed: %s\n  %s\n", __FILE__, __LINE__, #cmd,       \
              purlinGetErrorName(gpuRes_), purlinGetLastError(NULL));                 \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

/* ------------------------------------------------------------------------ */
/* Collectives and shapes                                                    */

/* A benchmark that runs fewer collectives runs the first ones of this list
 * (BenchCli.colls). */
enum {
  kBenchAllReduce,
  kBenchAllGather,
  kBenchReduceScatter,
  kBenchAllToAll,
  kBenchAllGatherV,
  kBenchReduceScatterV,
  kBenchAllToAllV,
  kBenchColls
};
extern const char* const kBenchCollKey[kBenchColls];   /* "allreduce": options, JSON */
extern const char* const kBenchCollTitle[kBenchColls]; /* "AllReduce": tables, messages */
extern const char* const kBenchDtypeName[purlinNumDataTypes];
extern const char* const kBenchOpName[purlinNumRedOps];

/* What each rank sends and receives at one size of the sweep. */
typedef struct BenchShape {
  int coll;
  size_t target;              /* the sweep's size, before rounding to whole blocks */
  size_t bytes;               /* nccl-tests' size column */
  size_t count;               /* bytes / element size */
  size_t c;                   /* count, sendcount, recvcount or count per pair */
  std::vector<size_t> counts; /* V forms: nranks, or nranks x nranks */
  size_t sendElems[kBenchMaxRanks], recvElems[kBenchMaxRanks];
} BenchShape;

/* Fills `s` for collective `coll` at sweep size `target`, in nccl-tests'
 * convention (AllReduce: buffer bytes; AllGather: bytes received;
 * ReduceScatter: bytes sent; AllToAll: bytes sent per rank; the V forms the
 * same with their uneven blocks, AllToAllV the mean per rank). Returns
 * false when a block would hold no element. */
bool benchMakeShape(int coll, size_t target, int n, size_t es, BenchShape* s);
bool benchReduces(int coll);
/* nccl-tests' bus bandwidth factor. */
double benchBusFactor(int coll, int n);

/* ------------------------------------------------------------------------ */
/* Options                                                                   */

/* Bits of BenchOptions.given: options set on the command line. */
enum { kBenchGivenMaxBytes = 1, kBenchGivenStepFactor = 2, kBenchGivenIters = 4 };

/* The options every collective benchmark takes. */
typedef struct BenchOptions {
  const char* jsonPath;
  int ranks; /* 0: the benchmark's default placement */
  bool colls[kBenchColls];
  purlinDataType_t dtype;
  purlinRedOp_t op;
  size_t minBytes, maxBytes, stepFactor;
  int iters;
  unsigned given;
} BenchOptions;

/* A --dtype spelling. */
typedef struct BenchSpelling {
  const char* name;
  purlinDataType_t dtype;
} BenchSpelling;

/* What a benchmark's own options return, and the common ones too. */
enum { kBenchOptUnknown, kBenchOptOk, kBenchOptBad, kBenchOptFlag /* ok, took no value */ };

/* How one benchmark's command line differs from the others'. */
typedef struct BenchCli {
  const char* program; /* prefix of the error messages */
  void (*usage)(FILE* f);
  int colls; /* --colls and the default take the first `colls` collectives */
  const BenchSpelling* dtypes;
  int ndtypes;
  /* The benchmark's own options; v is NULL for the last argument. */
  int (*option)(void* ctx, BenchOptions* o, const char* a, const char* v);
  void* ctx;
} BenchCli;

/* A byte count with an optional binary K, M or G suffix (and optional B). */
bool benchParseBytes(const char* s, size_t* out);
bool benchParseInt(const char* s, int lo, int hi, int* out);
/* Parses argv (a first argument not starting with -- is the JSON path).
 * Returns 0 to run, 1 after --help, 2 on a bad option (message printed). */
int benchParseArgs(const BenchCli* cli, int argc, char** argv, BenchOptions* o);

/* ------------------------------------------------------------------------ */
/* Ranks                                                                     */

/* Inputs repeat every kBenchPeriod elements. A prime, so that a block
 * misplaced by any multiple of a power-of-two chunk lands on other values. */
static const size_t kBenchPeriod = 65521;
/* Poisoned bytes after every output, checked for stray writes. */
static const size_t kBenchGuardBytes = 256;
/* Pinned host window through which outputs are checked. */
static const size_t kBenchStageBytes = (size_t)64 << 20;
static const unsigned char kBenchPoison = 0xA5;

/* The ranks, and the streams, events and buffers every timing mode and the
 * check use. Buffers hold the largest shape of the sweep, allocated before
 * anything is timed. */
typedef struct BenchRanks {
  int n;
  int devices[kBenchMaxRanks];
  bool oneGpu;
  size_t es; /* element size */
  cudaStream_t mainStream; /* on devices[0]: fork/join graphs are captured from it */
  cudaStream_t streams[kBenchMaxRanks];
  cudaEvent_t fork, join[kBenchMaxRanks]; /* fork/join edges, no timing */
  cudaEvent_t start, stop;                /* on main */
  cudaEvent_t rankStart[kBenchMaxRanks], rankStop[kBenchMaxRanks];
  char* send[kBenchMaxRanks];
  char* recv[kBenchMaxRanks];
  char* table[kBenchMaxRanks]; /* one period of the rank's input pattern */
  size_t sendCap, recvCap;     /* elements per rank */
  char* stage;                 /* pinned host window */
} BenchRanks;

/* Ranks r on devices r % ndev. */
void benchPlace(BenchRanks* R, int n, int ndev, size_t es);
/* Every size of the sweep for `coll` (sizes that round to a size already
 * listed are dropped); grows R's buffer capacities to hold them. */
void benchPlanSweep(BenchRanks* R, const BenchOptions* o, int coll, std::vector<BenchShape>* out);
/* Rank r's stream, events and buffers; then the main stream, its events and
 * the host window. A benchmark allocating more per rank does it after
 * benchSetupRank(r), so that allocations stay in the order they always had. */
void benchSetupRank(BenchRanks* R, int r);
void benchSetupShared(BenchRanks* R);
/* The reverse of the two above; what was never made is skipped. */
void benchFreeRank(BenchRanks* R, int r);
void benchFreeShared(BenchRanks* R);
void benchSyncRanks(const BenchRanks* R);

/* ------------------------------------------------------------------------ */
/* Inputs and the exact check                                                */

/* How input values are drawn for one check. Sums: 0 .. values-1 from a
 * hash of (seed, rank, index), bounded so that n of them add up exactly in
 * the datatype (e4m3: 0..2 for 8 ranks, sums <= 16; e5m2: 0..1, sums <=
 * 8); with more ranks than the bound allows, only every sparse-th rank
 * holds a nonzero value at an index. Max and min with pickWinner: at each
 * index one rank, chosen by the hash, holds a value `top` drawn from 0 ..
 * values-1 and the others lie at or below it (max) or at or above it (min),
 * so the result is as varied as the inputs and a value taken from the wrong
 * rank or index shows; without it every rank draws alone, as for sums. */
typedef struct BenchValueRule {
  int n, values;
  size_t sparse;
  purlinRedOp_t op;
  uint64_t seed;
  bool pickWinner;
} BenchValueRule;

BenchValueRule benchValueRule(int n, purlinDataType_t dtype, purlinRedOp_t op, uint64_t seed,
                              bool pickWinner);

/* The reference of one check: pattern[r] is rank r's input, pattern[n] the
 * op over all ranks; each holds two periods of raw elements, so that any
 * run of up to kBenchPeriod elements starting in the first period is
 * contiguous. Rank r's input element j is pattern[r][j % kBenchPeriod]. */
typedef struct BenchTables {
  std::vector<char> pattern[kBenchMaxRanks + 1];
} BenchTables;

/* Builds T from `rule`, puts every rank's inputs in its send buffer and
 * poisons its output and guard; returns when all of it is in place. */
void benchPrepareInputs(BenchRanks* R, const BenchShape* s, const BenchValueRule* rule,
                        purlinDataType_t dtype, BenchTables* T);
/* Compares every rank's output and guard with T, printing the first wrong
 * elements (labelled `what`) and a total; returns the wrong count. */
size_t benchCheckOutputs(BenchRanks* R, const BenchShape* s, const BenchTables* T,
                         const char* what);

/* ------------------------------------------------------------------------ */
/* Timing modes                                                              */

/* What a mode times: one call on rank r's stream (the rank's device is
 * current), or one step, a call on every rank. Without `step`, a step is
 * `call` on every rank in turn. Both print what failed and return false. */
typedef struct BenchWork {
  const char* lib;          /* in failure messages: "purlin", "nccl" */
  const BenchShape* shape;  /* in the graph mode's failure messages; NULL for other work */
  bool (*call)(void* ctx, int rank, cudaStream_t stream, const char* when);
  bool (*step)(void* ctx, const char* when);
  void* ctx;
} BenchWork;

/* Times `reps` repetitions of `steps` steps after one warm-up; stores the
 * median us per step. False when a call or a capture failed. */
typedef bool (*BenchTimer)(BenchRanks* R, const BenchWork* w, int steps, int reps, double* us);

/* A way of launching and timing the work: a column group of a table and a
 * JSON key. `probe` times a one-step first guess of the step time. */
typedef struct BenchMode {
  const char* key;
  BenchTimer time;
  BenchTimer probe;
} BenchMode;

/* Eager: every rank's start event, the steps, every rank's stop event; a
 * repetition lasts as long as its slowest rank. Graph: every rank captures
 * its steps into its own graph (no cross-device edges inside a graph: those
 * cost about 125 us per step on 2xH200 and would swamp small sizes), each
 * replay launches every rank's graph between that rank's events. Fork/join:
 * each step forks every rank's call from the main stream through events and
 * joins them, all steps in one graph captured from the main stream and
 * timed there; `call` only. */
enum { kBenchEager, kBenchGraph, kBenchForkJoin, kBenchModes };
extern const BenchMode kBenchMode[kBenchModes];

/* A repetition should last about this long, with 1..kBenchMaxSteps steps. */
static const double kBenchRepTargetUs = 5000.0;
enum { kBenchMaxSteps = 100, kBenchProbeReps = 2 };

/* The step count that makes a repetition of steps of `estimateUs` last
 * about kBenchRepTargetUs, 1..kBenchMaxSteps. */
int benchStepsFor(double estimateUs);

/* Runs w through `mode` with the step count chosen so that a repetition
 * lasts about kBenchRepTargetUs: from `estimateUs` (the previous size's
 * time) when positive, else from the mode's probe. */
bool benchMeasure(BenchRanks* R, int mode, const BenchWork* w, double estimateUs, int reps,
                  double* us, int* steps);
/* One step, outside any timing. */
bool benchStep(BenchRanks* R, const BenchWork* w, const char* when);

/* One graph of every rank's work: captured from `main`, which forks every
 * rank's stream through `fork`, records rank r's part with
 * record(r, streams[r]) and joins it back through join[r]. */
template <typename F>
static cudaGraphExec_t benchCaptureForked(cudaStream_t main, cudaEvent_t fork, int n,
                                          const cudaStream_t* streams, const cudaEvent_t* join,
                                          F record) {
  cudaGraph_t g;
  cudaGraphExec_t x;
  GPU_CUDA_OK(cudaStreamBeginCapture(main, cudaStreamCaptureModeGlobal));
  GPU_CUDA_OK(cudaEventRecord(fork, main));
  for (int r = 0; r < n; ++r) {
    GPU_CUDA_OK(cudaStreamWaitEvent(streams[r], fork, 0));
    record(r, streams[r]);
    GPU_CUDA_OK(cudaEventRecord(join[r], streams[r]));
    GPU_CUDA_OK(cudaStreamWaitEvent(main, join[r], 0));
  }
  GPU_CUDA_OK(cudaStreamEndCapture(main, &g));
  GPU_CUDA_OK(cudaGraphInstantiate(&x, g, 0));
  GPU_CUDA_OK(cudaGraphDestroy(g));
  return x;
}

/* The median of `reps` replays of graph x on `stream`, after one warm-up
 * replay, in microseconds (events around each replay). */
double benchGraphMedianUs(cudaGraphExec_t x, cudaStream_t stream, int reps);

/* ------------------------------------------------------------------------ */
/* Sessions                                                                  */

/* What benchSession was doing when it failed. */
enum { kBenchSessionBegin, kBenchSessionCall, kBenchSessionGroupEnd, kBenchSessionEnd };
extern const char* const kBenchSessionStep[4]; /* "purlinSessionBegin", "a call", ... */

/* One session of `comm` on `stream`, the two ways a session is timed:
 * purlinSessionBegin, `calls` calls call(k) (each returns a
 * purlinResult_t), purlinSessionEnd. Not grouped, each call is its
 * enqueue-and-wait node: the latency a dependent kernel sees. Grouped, the
 * calls are made inside purlinGroupStart/End, enqueued back to back with
 * one wait at the end: the megakernel's rate. A session that began is
 * always ended, after a failed call too, so that the communicator has no
 * session left open; the first failure is returned, and what failed in
 * *failedAt when it is not NULL (the message stays in
 * purlinGetLastError(comm)). Eager or under a capture, as the calls. */
template <typename F>
static purlinResult_t benchSession(purlinComm_t comm, cudaStream_t stream, int calls,
                                   bool grouped, F call, int* failedAt) {
  int at = kBenchSessionBegin;
  purlinResult_t res = purlinSessionBegin(comm, stream);
  if (res == purlinSuccess) {
    at = kBenchSessionCall;
    if (grouped) (void)purlinGroupStart();
    for (int k = 0; k < calls && res == purlinSuccess; ++k) res = call(k);
    if (grouped) {
      purlinResult_t g = purlinGroupEnd();
      if (res == purlinSuccess && g != purlinSuccess) res = g, at = kBenchSessionGroupEnd;
    }
    purlinResult_t e = purlinSessionEnd(comm, stream);
    if (res == purlinSuccess && e != purlinSuccess) res = e, at = kBenchSessionEnd;
  }
  if (failedAt != NULL) *failedAt = at;
  return res;
}

/* The time per call of a session of `calls` calls replayed in `graphUs`,
 * less the session's own cost (`emptyUs`: the same graph with no call). */
static inline double benchSessionCallUs(double graphUs, double emptyUs, int calls) {
  return (graphUs - emptyUs) / calls;
}

/* The two ways a session cell is timed (benchSession): each call waited
 * for, or all in one group. Keys for JSON, titles for tables. */
enum { kBenchSessionWait, kBenchSessionGroup, kBenchSessionWays };
extern const char* const kBenchSessionWayKey[kBenchSessionWays];   /* "session_wait", ... */
extern const char* const kBenchSessionWayTitle[kBenchSessionWays]; /* "sess+wait", ... */

/* What the session steps below need of a benchmark: each rank's
 * communicator, one call of shape s on rank r, how a failed session is
 * printed (`at`: a kBenchSession* step; s NULL for a session with no
 * call), whether no rank has an asynchronous error (printing any), and
 * the timing mode of the session graphs (kBenchMode). */
typedef struct BenchSessions {
  purlinComm_t const* comms;
  purlinResult_t (*call)(void* ctx, const BenchShape* s, int r, cudaStream_t stream);
  void (*report)(void* ctx, const BenchShape* s, int r, purlinResult_t res, int at,
                 const char* when);
  bool (*healthy)(void* ctx);
  void* ctx;
  int mode;
} BenchSessions;

/* Rank r's whole session (benchSession) of `calls` calls of s (none: s
 * may be NULL), waited for or grouped, on `stream`; a failure printed. */
bool benchRankSession(const BenchSessions* S, int r, cudaStream_t stream, const BenchShape* s,
                      int calls, bool grouped, const char* when);

/* The median replay (us) of `reps` replays of one graph step of every
 * rank's whole session, `calls` calls of s each (none: s may be NULL),
 * waited for or grouped. False after a failed session (printed). */
bool benchSessionGraphUs(BenchRanks* R, const BenchSessions* S, const BenchShape* s, int calls,
                         bool grouped, int reps, double* us);

/* Every rank's first session, eager and uncaptured (it makes the rank's
 * session resources, which allocates: no capture may see it), then the
 * median replay of a session with no call (*emptyUs), which the cells
 * subtract. Returns kBenchDone; kBenchRefused when purlinSessionBegin
 * refused (no megakernel for this GPU, too few CUDA hardware queues:
 * `why` says which); kBenchFailed after a failed session or an
 * asynchronous error (printed; `why` points there). */
int benchStartSessions(BenchRanks* R, const BenchSessions* S, int reps, double* emptyUs,
                       char* why, size_t whySize);

/* ------------------------------------------------------------------------ */
/* Tables, JSON and summary lines                                            */

enum { kBenchNotRun, kBenchDone, kBenchRefused, kBenchFailed };
extern const char* const kBenchStateKey[4]; /* "not_run", "ok", "refused", "failed" */

/* Column widths of one benchmark's tables. */
typedef struct BenchTableFormat {
  int type;   /* the type column */
  bool redop; /* a redop column after it */
  int time, algbw, busbw;
} BenchTableFormat;

/* The leading columns: size, count, type (and redop). */
void benchPrintLeadTitles(const BenchTableFormat* f, const char* size, const char* count,
                          const char* type, const char* redop);
void benchPrintLead(const BenchTableFormat* f, size_t bytes, size_t count, const char* type,
                    const char* redop);
/* One time, algbw, busbw group: titles, units, values, or `mark` in all three. */
void benchPrintTimeTitles(const BenchTableFormat* f);
void benchPrintTimeUnits(const BenchTableFormat* f);
void benchPrintTime(const BenchTableFormat* f, double us, size_t bytes, double busFactor);
void benchPrintTimeMark(const BenchTableFormat* f, const char* mark);
/* A ratio with printf format `fmt` (" %*.2f": a space, then the value in
 * `width` columns), "-" when negative. */
void benchPrintRatio(double v, int width, const char* fmt);
void benchPrintCentered(const char* s, int width);

void benchJsonString(FILE* f, const char* s);
/* "key": v then sep; null when negative or not finite. */
void benchJsonNumber(FILE* f, const char* key, double v, const char* sep);
/* "cuda_driver": "12.8", "cuda_runtime": "12.8" */
void benchJsonCudaVersions(FILE* f);
/* A row's opening, up to its "redop" (none where the collective does not
 * reduce); `first` leaves out the comma before it. */
void benchJsonRowLead(FILE* f, bool first, int coll, size_t bytes, size_t count,
                      purlinDataType_t dtype, purlinRedOp_t op);
/* , "time_us": .., "algbw_GBps": .., "busbw_GBps": .. */
void benchJsonTime(FILE* f, double us, size_t bytes, double busFactor);

/* "#   what  value (target <= t)" against a target, "n/a" when negative;
 * `at` > 0 adds the size it was seen at. */
void benchPrintTarget(int width, const char* what, double v, double target, bool atMost,
                      size_t at);
/* The closing lines: wrong elements, failed calls, the JSON path and PASS
 * or FAIL. Returns whether it passed. */
bool benchPrintVerdict(int width, size_t wrong, int failures, const char* jsonPath);

#endif /* PURLIN_BENCH_HARNESS_H_ */
