/*
 * order.c -- call order on one communicator across streams (order.h).
 */
#include "runtime/order.h"

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

purlinResult_t purlinOrderBefore(purlinOrder_t* o, cudaStream_t stream) {
  if (o->event == NULL) {
    /* Not a stream operation, but relaxed like every allocation the
     * runtime makes under a capture (session.c). */
    enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    PURLIN_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    cudaError_t err = cudaEventCreateWithFlags(&o->event, cudaEventDisableTiming);
    cudaThreadExchangeStreamCaptureMode(&mode);
    if (err != cudaSuccess) {
      o->event = NULL;
      return purlinCudaError(err, "cudaEventCreateWithFlags", __FILE__, __LINE__);
    }
  }
  PURLIN_CHECK(captureOf(stream, &o->nextCapture));
  if (o->valid && o->stream != stream && o->nextCapture == o->capture)
    PURLIN_CUDA_CHECK(cudaStreamWaitEvent(stream, o->event, 0));
  return purlinSuccess;
}

purlinResult_t purlinOrderAfter(purlinOrder_t* o, cudaStream_t stream) {
  PURLIN_CUDA_CHECK(cudaEventRecord(o->event, stream));
  o->stream = stream;
  o->capture = o->nextCapture;
  o->valid = 1;
  return purlinSuccess;
}

void purlinOrderRelease(purlinOrder_t* o) {
  if (o->event != NULL) cudaEventDestroy(o->event);
  memset(o, 0, sizeof *o);
}
