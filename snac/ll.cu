/*
 * ll.cu -- the latency path of SNAC: push of 16-byte packets carrying
 * payload and epoch (see ll.h). One kernel per rank per collective; every
 * wait polls the abort word and a timeout, and a failure is recorded in the
 * group's error record, never trapped.
 */
#include "snac/ll.h"

#include "atoms/dtype.cuh"

/* Packets: two (4-byte payload, 4-byte flag) words written by one 16-byte
 * volatile store; each 8-byte half is written whole, so a half whose flag
 * matches carries its payload. Pairs with llLoad on the consumer. */
static __device__ __forceinline__ void llStore(uint64_t* p, uint64_t v, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p),
               "r"((uint32_t)v), "r"(flag), "r"((uint32_t)(v >> 32)), "r"(flag)
               : "memory");
}

/* One volatile 16-byte load; true when both halves carry `flag`. */
static __device__ __forceinline__ bool llLoad(const uint64_t* p, uint32_t flag, uint64_t* v) {
  uint32_t a, b, c, d;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
               : "l"(p)
               : "memory");
  *v = (uint64_t)a | ((uint64_t)c << 32);
  return b == flag && d == flag;
}

static __device__ __forceinline__ uint64_t globalTimerNs(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* Up to 8 bytes at any alignment; missing bytes read as 0. */
static __device__ __forceinline__ uint64_t load8(const char* p, uint64_t n) {
  if (n == 8 && ((uintptr_t)p & 7u) == 0) return *(const uint64_t*)p;
  uint64_t v = 0;
  for (uint64_t k = 0; k < n; ++k) v |= (uint64_t)(unsigned char)p[k] << (8 * k);
  return v;
}

static __device__ __forceinline__ void store8(char* p, uint64_t v, uint64_t n) {
  if (n == 8 && ((uintptr_t)p & 7u) == 0) {
    *(uint64_t*)p = v;
    return;
  }
  for (uint64_t k = 0; k < n; ++k) p[k] = (char)(v >> (8 * k));
}

struct LLState {
  purlinDevComm_t* dc;
  volatile purlinErrorRecord_t* rec;
  uint64_t epoch;
  uint32_t flag;
  uint64_t timeoutNs;
  bool failed; /* this thread saw the abort word or raised an error */
};

/* Records the first device-side error of the group and raises the abort
 * word. The claim word lives in rank 0's heap so that exactly one rank of
 * the group writes the record. */
static __device__ void llRaise(LLState* st, uint32_t code, uint32_t what, int peer,
                               uint64_t detail) {
  unsigned int* claim = (unsigned int*)((char*)st->dc->peerHeap[0] + PURLIN_CTRL_CLAIM_OFFSET);
  if (atomicCAS_system(claim, 0u, 1u) == 0u) {
    st->rec->code = code;
    st->rec->what = what;
    st->rec->rank = st->dc->rank;
    st->rec->peer = peer;
    st->rec->epoch = st->epoch;
    st->rec->detail = detail;
    st->rec->claimed = 1u;
    /* The record before the abort word: the host reads the word with
     * acquire, then the record (purlinCommGetAsyncError). */
    __threadfence_system();
  }
  st->rec->abort = PURLIN_ABORT_DEVICE;
  __threadfence_system();
  st->failed = true;
}

/* Waits for packet `p` of `peer` with this collective's flag. Polls the
 * abort word and the clock every 1024 tries. */
static __device__ bool llWait(LLState* st, const uint64_t* p, int peer, uint64_t* v) {
  if (st->failed) return false;
  uint64_t start = 0;
  for (uint32_t spins = 1;; ++spins) {
    if (llLoad(p, st->flag, v)) return true;
    if ((spins & 1023u) == 0) {
      if (st->rec->abort != 0) {
        st->failed = true;
        return false;
      }
      uint64_t now = globalTimerNs();
      if (start == 0) {
        start = now;
      } else if (now - start > st->timeoutNs) {
        llRaise(st, (uint32_t)purlinTimeout, PURLIN_ERROR_WAIT_PACKET, peer, 0);
        return false;
      }
    }
  }
}

/* The block `s` sends `d`. The latency path runs AllReduce one-shot: every
 * rank sends its whole buffer to every peer and reduces all of them, one
 * hop instead of the two of ReduceScatter + AllGather; each element is still
 * reduced over ranks 0..n-1 in order, so the bits equal the other paths'. */
static __device__ __forceinline__ void llBlock(const purlinLayout_t* l, int s, int d,
                                               purlinBlock_t* b) {
  if (l->coll == purlinCollAllReduce) {
    b->srcOffset = b->dstOffset = 0;
    b->count = l->count;
    b->reduce = 1;
    return;
  }
  purlinLayoutBlock(l, s, d, b);
}

template <bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
static __device__ void llBody(const purlinLLArgs_t& a, const uint64_t* counts) {
  typedef purlinDtype<D> T;
  typedef typename T::raw raw;
  typedef typename T::acc acc;
  enum { E = 8 / sizeof(raw) };

  purlinDevComm_t* dc = a.devComm;
  char* myHeap = (char*)dc->peerHeap[dc->rank];
  uint64_t* epochWord = (uint64_t*)(myHeap + PURLIN_CTRL_EPOCH_OFFSET);
  LLState st;
  st.dc = dc;
  st.rec = (volatile purlinErrorRecord_t*)dc->abortWord;
  /* Every CTA reads the count of completed collectives before the last CTA
   * of this kernel advances it (below), so all agree on the epoch. */
  st.epoch = *(volatile uint64_t*)epochWord + 1;
  st.flag = (uint32_t)st.epoch;
  st.timeoutNs = (uint64_t)dc->timeoutMs * 1000000ull;
  /* The abort word is read only inside waits (every 1024 tries): it lives
   * in host memory, a PCIe round trip away. */
  st.failed = false;

  purlinLayout_t l = a.layout;
  if (purlinCollIsV(l.coll)) l.counts = counts;
  const int me = dc->rank, n = dc->nranks;
  const uint64_t eb = l.elemBytes;
  const uint64_t half = st.epoch & 1u;
  const uint64_t regionBytes = (dc->latencyBytes / (uint64_t)n) & ~(uint64_t)15;
  const uint64_t g = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
  const uint64_t G = (uint64_t)gridDim.x * blockDim.x;
#define LL_REGION(owner, src)                                                           \
  ((uint64_t*)((char*)dc->peerHeap[owner] + dc->latencyOffset + half * dc->latencyBytes + \
               (uint64_t)(src) * regionBytes))

  /* Stage + notify: push every peer its block, header first. */
  for (int k = 1; k < n && !st.failed; ++k) {
    int d = (me + k) % n;
    purlinBlock_t b;
    llBlock(&l, me, d, &b);
    uint64_t bytes = b.count * eb, P = (bytes + 7) / 8;
    uint64_t* r = LL_REGION(d, me);
    const char* src = (const char*)a.sendbuff + b.srcOffset * eb;
    if (g == 0) llStore(r, a.descriptor, st.flag);
    for (uint64_t i = g; i < P; i += G) {
      uint64_t m = bytes - 8 * i < 8 ? bytes - 8 * i : 8;
      llStore(r + 2 * (1 + i), load8(src + 8 * i, m), st.flag);
    }
  }

  /* Headers: every peer runs this same collective. */
  if (g < (uint64_t)n && (int)g != me) {
    uint64_t desc;
    if (llWait(&st, LL_REGION(me, g), (int)g, &desc) && desc != a.descriptor)
      llRaise(&st, (uint32_t)purlinInvalidUsage, PURLIN_ERROR_WAIT_MISMATCH, (int)g, desc);
  }

  /* Consume. */
  if (REDUCE) {
    purlinBlock_t mine;
    llBlock(&l, me, me, &mine);
    uint64_t bytes = mine.count * eb, P = (bytes + 7) / 8;
    char* out = (char*)a.recvbuff + mine.dstOffset * eb;
    const char* own = (const char*)a.sendbuff + mine.srcOffset * eb;
    for (uint64_t i = g; i < P && !st.failed; i += G) {
      uint64_t m = bytes - 8 * i < 8 ? bytes - 8 * i : 8;
      acc accum[E];
      for (int s = 0; s < n; ++s) {
        uint64_t v;
        if (s == me) {
          /* This rank's own contribution comes from its input; in place,
           * this thread reads element i before it writes it. */
          v = load8(own + 8 * i, m);
        } else if (!llWait(&st, LL_REGION(me, s) + 2 * (1 + i), s, &v)) {
          break;
        }
        union {
          uint64_t u;
          raw r[E];
        } x;
        x.u = v;
#pragma unroll
        for (int j = 0; j < E; ++j)
          accum[j] = s == 0 ? T::load(x.r[j]) : purlinOp<O>::apply(accum[j], T::load(x.r[j]));
      }
      if (st.failed) break;
      union {
        uint64_t u;
        raw r[E];
      } y;
#pragma unroll
      for (int j = 0; j < E; ++j) y.r[j] = T::store(accum[j]);
      store8(out + 8 * i, y.u, m);
    }
  } else {
    for (int k = 0; k < n && !st.failed; ++k) {
      int s = (me + n - k) % n;
      purlinBlock_t b;
      llBlock(&l, s, me, &b);
      uint64_t bytes = b.count * eb, P = (bytes + 7) / 8;
      char* out = (char*)a.recvbuff + b.dstOffset * eb;
      if (s == me) {
        const char* in = (const char*)a.sendbuff + b.srcOffset * eb;
        if (in == out) continue; /* in place */
        for (uint64_t i = g; i < P; i += G) {
          uint64_t m = bytes - 8 * i < 8 ? bytes - 8 * i : 8;
          store8(out + 8 * i, load8(in + 8 * i, m), m);
        }
        continue;
      }
      for (uint64_t i = g; i < P; i += G) {
        uint64_t v, m = bytes - 8 * i < 8 ? bytes - 8 * i : 8;
        if (!llWait(&st, LL_REGION(me, s) + 2 * (1 + i), s, &v)) break;
        store8(out + 8 * i, v, m);
      }
    }
  }
#undef LL_REGION

  /* The last CTA to finish advances the epoch for the next collective on
   * this rank (stream order makes it visible to the next kernel). */
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned int* done = (unsigned int*)(myHeap + PURLIN_CTRL_DONE_OFFSET);
    __threadfence();
    if (atomicAdd(done, 1u) == gridDim.x - 1) {
      *done = 0;
      *(volatile uint64_t*)epochWord = st.epoch;
      __threadfence();
    }
  }
}

template <bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
__global__ void __launch_bounds__(PURLIN_LL_THREADS)
    purlinLLKernel(const __grid_constant__ purlinLLArgs_t a) {
  llBody<REDUCE, D, O>(a, NULL);
}

/* V forms: the counts travel in the kernel's parameters (up to 8 KiB), so
 * a captured graph replays them without any host copy. */
struct purlinLLVArgs_t {
  purlinLLArgs_t a;
  uint64_t counts[PURLIN_CTRL_COUNTS_MAX];
};

template <bool REDUCE, purlinDataType_t D, purlinRedOp_t O>
__global__ void __launch_bounds__(PURLIN_LL_THREADS)
    purlinLLKernelV(const __grid_constant__ purlinLLVArgs_t v) {
  llBody<REDUCE, D, O>(v.a, v.counts);
}

namespace {
struct LLLaunch {
  const purlinLLArgs_t* args;
  const uint64_t* hostCounts;
  int ctas;
  cudaStream_t stream;
  bool reduce;
  template <purlinDataType_t D, purlinRedOp_t O>
  void run() {
    if (reduce) go<true, D, O>();
    else go<false, purlinFloat32, purlinSum>();
  }
  template <bool R, purlinDataType_t D, purlinRedOp_t O>
  void go() {
    if (!purlinCollIsV(args->layout.coll)) {
      purlinLLKernel<R, D, O><<<ctas, PURLIN_LL_THREADS, 0, stream>>>(*args);
      return;
    }
    purlinLLVArgs_t v;
    v.a = *args;
    int n = args->layout.nranks;
    int k = args->layout.coll == purlinCollAllToAllV ? n * n : n;
    for (int i = 0; i < k; ++i) v.counts[i] = hostCounts[i];
    purlinLLKernelV<R, D, O><<<ctas, PURLIN_LL_THREADS, 0, stream>>>(v);
  }
};
}  // namespace

extern "C" cudaError_t purlinLLLaunch(const purlinLLArgs_t* args, const uint64_t* hostCounts,
                                      int ctas, cudaStream_t stream) {
  LLLaunch l = {args, hostCounts, ctas, stream, purlinCollReduces(args->layout.coll) != 0};
  if (!purlinDispatchDtypeOp(args->dtype, args->op, l)) return cudaErrorInvalidValue;
  return cudaGetLastError();
}

extern "C" uint64_t purlinLLBlockCapacity(uint64_t latencyBytes, int nranks) {
  uint64_t region = (latencyBytes / (uint64_t)nranks) & ~(uint64_t)15;
  return region / 16 < 1 ? 0 : (region / 16 - 1) * 8;
}

extern "C" uint64_t purlinLLMaxBlockBytes(const purlinLayout_t* layout, const uint64_t* hostCounts) {
  purlinLayout_t l = *layout;
  if (purlinCollIsV(l.coll)) l.counts = hostCounts;
  if (l.coll == purlinCollAllReduce) return l.count * l.elemBytes;
  uint64_t worst = 0;
  for (int s = 0; s < l.nranks; ++s)
    for (int d = 0; d < l.nranks; ++d) {
      purlinBlock_t b;
      purlinLayoutBlock(&l, s, d, &b);
      if (b.count * l.elemBytes > worst) worst = b.count * l.elemBytes;
    }
  return worst;
}

extern "C" uint64_t purlinLLDescriptor(const purlinLayout_t* layout, const uint64_t* hostCounts,
                                       purlinDataType_t dtype, purlinRedOp_t op) {
  /* FNV-1a over the call's shape; the top byte keeps the collective, so a
   * mismatch message can name it. */
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t x) {
    for (int k = 0; k < 8; ++k) {
      h ^= (x >> (8 * k)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  mix((uint64_t)dtype);
  mix((uint64_t)op);
  mix((uint64_t)layout->nranks);
  mix(layout->count);
  if (purlinCollIsV(layout->coll)) {
    int n = layout->nranks;
    int k = layout->coll == purlinCollAllToAllV ? n * n : n;
    for (int i = 0; i < k; ++i) mix(hostCounts[i]);
  }
  return (h & 0x00ffffffffffffffull) | ((uint64_t)layout->coll << 56);
}

extern "C" int purlinLLCtas(uint64_t maxBlockBytes) {
  uint64_t packets = (maxBlockBytes + 7) / 8;
  uint64_t ctas = (packets + PURLIN_LL_THREADS - 1) / PURLIN_LL_THREADS;
  if (ctas < 1) ctas = 1;
  if (ctas > PURLIN_LL_MAX_CTAS) ctas = PURLIN_LL_MAX_CTAS;
  return (int)ctas;
}
