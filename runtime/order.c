/*
 * order.c -- call order on one communicator across streams (order.h).
 */
#include "runtime/order.h"

#include <stdint.h>
#include <string.h>

#include "runtime/errors.h"

static purlinResult_t captureOf(cudaStream_t stream, unsigned long long* id) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  *id = 0;
  PURLIN_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, id, NULL, NULL, NULL, NULL));
  PURLIN_RETURN_IF(status == cudaStreamCaptureStatusInvalidated, purlinInvalidUsage,
                   "the stream's capture was invalidated by an earlier error; end it "
                   "(cudaStreamEndCapture) and capture again");
  if (status != cudaStreamCaptureStatusActive) *id = 0;
  return purlinSuccess;
}

static purlinResult_t makeEvent(cudaEvent_t* e) {
  if (*e != NULL) return purlinSuccess;
  /* Not a stream operation, but relaxed like every allocation the runtime
   * makes under a capture (session.c). */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  PURLIN_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  cudaError_t err = cudaEventCreateWithFlags(e, cudaEventDisableTiming);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (err != cudaSuccess) {
    *e = NULL;
    return purlinCudaError(err, "cudaEventCreateWithFlags", __FILE__, __LINE__);
  }
  return purlinSuccess;
}

/* The record of the world `capture` names; NULL for a capture that has no
 * record (a new one). */
static purlinOrderLast_t* worldOf(purlinOrder_t* o, unsigned long long capture) {
  if (capture == 0) return &o->eager;
  if (o->captured.valid && o->captured.capture == capture) return &o->captured;
  return NULL;
}

purlinResult_t purlinOrderBefore(purlinOrder_t* o, cudaStream_t stream) {
  PURLIN_CHECK(makeEvent(&o->eager.event));
  PURLIN_CHECK(makeEvent(&o->captured.event));
  PURLIN_CHECK(captureOf(stream, &o->nextCapture));
  /* CUDA refuses cudaStreamGetId on a capturing stream; inside a capture
   * the handle serves (a capture's streams live until it ends). */
  if (o->nextCapture != 0)
    o->nextStream = (unsigned long long)(uintptr_t)stream;
  else
    PURLIN_CUDA_CHECK(cudaStreamGetId(stream, &o->nextStream));
  const purlinOrderLast_t* last = worldOf(o, o->nextCapture);
  if (last != NULL && last->valid && last->stream != o->nextStream)
    PURLIN_CUDA_CHECK(cudaStreamWaitEvent(stream, last->event, 0));
  return purlinSuccess;
}

purlinResult_t purlinOrderAfter(purlinOrder_t* o, cudaStream_t stream) {
  purlinOrderLast_t* last = o->nextCapture == 0 ? &o->eager : &o->captured;
  PURLIN_CUDA_CHECK(cudaEventRecord(last->event, stream));
  last->stream = o->nextStream;
  last->handle = stream;
  last->capture = o->nextCapture;
  last->valid = 1;
  return purlinSuccess;
}

const purlinOrderLast_t* purlinOrderLastOf(const purlinOrder_t* o, cudaStream_t stream) {
  unsigned long long capture = 0;
  if (captureOf(stream, &capture) != purlinSuccess) return NULL;
  const purlinOrderLast_t* last = worldOf((purlinOrder_t*)o, capture);
  return last != NULL && last->valid ? last : NULL;
}

void purlinOrderRelease(purlinOrder_t* o) {
  if (o->eager.event != NULL) cudaEventDestroy(o->eager.event);
  if (o->captured.event != NULL) cudaEventDestroy(o->captured.event);
  memset(o, 0, sizeof *o);
}
