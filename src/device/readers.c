/* readers.c — the streams that read a device slot besides its release's
** stream (device.h: stoke__readers).
**
** A DLPack consumer reads a field on the stream it names in
** __dlpack__(stream=S): stoke_batch_wait_stream makes S wait for the
** copy, and S is then a reader of the slot.  When the batch is released,
** the slot must not be rewritten before S's work queued so far is done,
** even though the release itself names another stream (cfg.cuda_stream,
** by default).  So the release records one event on every reader, and the
** next copy into the slot waits on each of them, on the GPU: the host
** never blocks.  The set is small and fixed (STOKE__READERS streams, the
** events made with the slot): a batch read on more streams than that is
** refused at the wait, before anything is queued.  The events are created
** and destroyed with the slot's others (outlet_device.c). */
#include "device/device.h"

bool stoke__same_stream(uintptr_t a, uintptr_t b) {
  /* 0 and CU_STREAM_LEGACY (1) both name the legacy default stream. */
  if (a == 0) a = 1;
  if (b == 0) b = 1;
  return a == b;
}

int stoke__readers_add(stoke__readers *r, uintptr_t stream) {
  for (size_t i = 0; i < r->n; i++)
    if (stoke__same_stream(r->stream[i], stream)) return 0;
  if (r->n == STOKE__READERS) return -1;
  r->stream[r->n++] = stream;
  return 0;
}

CUresult stoke__readers_record(const stoke__cuda *cu, stoke__readers *r,
                               const uintptr_t *streams, size_t n) {
  r->n_done = 0;
  for (size_t i = 0; i < n && i < STOKE__READERS; i++) {
    CUresult rc = cu->cuEventRecord(r->done[i], (CUstream)streams[i]);
    if (rc != 0) return rc;
    r->n_done = i + 1;
  }
  return 0;
}

void stoke__readers_sync(const stoke__cuda *cu, const stoke__readers *r) {
  for (size_t i = 0; i < r->n_done; i++) cu->cuEventSynchronize(r->done[i]);
}
