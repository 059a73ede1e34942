/* The device layer's hooks for the layers above (INTERNAL: runtime,
 * collectives and the tests include it; never installed). Each is a no-op
 * on a host or CUDA device, so callers need no branch on the kind; on the
 * sim device they name memory for the sanitizer's reports, adopt memory
 * that came from elsewhere, and run a host task in stream order (what a
 * communicator bound to a sim stream uses to run its collectives). */
#ifndef HSR_KERNELS_SIM_H
#define HSR_KERNELS_SIM_H

#include <stdatomic.h>

#include "hsr/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Names [ptr, ptr+bytes) in reports (a ledger category, a unit). The text is
 * copied; the label lasts until the next label of that range. */
hsr_status kern_label(hsr_device *d, const void *ptr, size_t bytes, const char *label);
/* Memory from another allocator (a communicator's registered segment) that
 * the device's kernels and copies may use as device memory. */
hsr_status kern_adopt(hsr_device *d, void *ptr, size_t bytes, const char *label);
/* Before that memory goes back: a report if queued work still uses it. */
hsr_status kern_unadopt(hsr_device *d, void *ptr);
/* The stream's name in reports ("compute", "gather", ...). */
hsr_status kern_stream_label(hsr_stream *s, const char *name);
/* 1 for a stream of a sim device (the only kind kern_stream_task takes). */
int kern_stream_is_sim(const hsr_stream *s);

/* A host task in stream order (sim device only): run(arg) on the stream's
 * thread when the stream reaches it; its error fails the device (later work
 * is skipped and every later call returns it). skip(arg, why) instead, when
 * an earlier failure means it will never run. acc lists the buffers it
 * reads and writes, checked like a kernel's. */
hsr_status kern_stream_task(hsr_stream *s, const char *name, hsr_status (*run)(void *arg),
                            void (*skip)(void *arg, const char *why), void *arg, const hsr_access *acc, int nacc);

/* A device clock: *slot (written once, atomically) becomes the monotonic ns
 * at which the stream reaches this point. HSR_ERR_UNSUPPORTED on kinds that
 * cannot say (host: no streams; CUDA: not yet); 1 from kern_can_stamp where
 * it can. The slot must stay valid until the stream has passed it. */
int kern_can_stamp(const hsr_device *d);
hsr_status kern_stream_stamp(hsr_stream *s, _Atomic uint64_t *slot);

/* The host's own reads and writes of memory the device tracks (pinned
 * host memory the host updates between device copies): checked against
 * the streams' order like an operation's, as the host's (what it has
 * synchronized with orders them). NULL or empty ranges are skipped. */
hsr_status kern_host_access(hsr_device *d, const char *name, const hsr_access *acc, int nacc);

/* Stream-order reports so far (sim device with HSR_SIM_CHECK=1; 0 otherwise). */
long kern_sim_reports(const hsr_device *d);

#ifdef __cplusplus
}
#endif
#endif
