/* internal.h — TRANSITIONAL (removed once src/pipeline/ and src/device/
** include the per-layer headers): every layer's header at once, for the
** files that still include this one.  Each layer has its own header now
** (core/core.h, os/os.h, stats/stats.h, sampler/sampler.h,
** source/source.h, ...), included only by the layers above it.
** Nothing here is API: cli/ and python/ include only stoke.h. */
#ifndef STOKE_INTERNAL_H
#define STOKE_INTERNAL_H

#include "core/core.h"
#include "os/os.h"
#include "stats/stats.h"
#include "sampler/sampler.h"
#include "source/source.h"

/* TODO-merge: the loader's two declarations below belong in
** src/pipeline/'s own header. */

/* ---- the loader (src/pipeline/loader.c) ---------------------------------- */

/* stoke_loader_create with the worker threads started through sys (NULL:
** the real calls), so that tests can fail the start of any one worker. */
int stoke__loader_create(const stoke_config *cfg, const stoke__sys *sys,
                         stoke_loader **out);

/* ---- sample production (src/pipeline/produce.c) -------------------------- */

/* Fill one sample with src; when `timed`, time its stages into ps (else
** the caller accounts for it).  Returns 0 or STOKE_ESAMPLE with s->err set. */
int stoke__produce(stoke_source *src, stoke_sample *s,
                   stoke__producer_stats *ps, bool timed);

#endif /* STOKE_INTERNAL_H */
