/* advice_text.c — one line of advice from its structure: the action
** (stoke_advice.kind), the settings it proposes, the predicted step and the
** numbers it rests on (stoke_advice_basis).  The sentence is the library's;
** every setting it names is the caller's words (stoke_advice_words), so
** the tool writes "-j 4" and Python "num_workers=4".  With no words, the
** line is stoke_advice.text as 0.3 defined it (legacy_words). */
#include <stdio.h>
#include <string.h>

#include "stoke.h"

/* The words of stoke_advice.text, as 0.3 wrote it and its callers read it
** (the tool's flags, with Loader's echo= beside them): kept so that the
** field means what it meant, and the tool names its settings in them
** (stoke_advice_name with no words: the one copy of the flags).  Front
** ends do not read the text: they give their words to
** stoke_advice_format. */
static void legacy_words(void *user, int setting, unsigned v,
                         unsigned workers, char *buf, size_t n) {
  (void)user;
  (void)workers;
  switch (setting) {
  case STOKE_SETTING_WORKERS: snprintf(buf, n, "-j %u", v); break;
  case STOKE_SETTING_PREFETCH: snprintf(buf, n, "--prefetch %u", v); break;
  case STOKE_SETTING_SAME_WORKERS: snprintf(buf, n, "with that -j"); break;
  case STOKE_SETTING_ECHO:
    snprintf(buf, n, "--echo %u (Loader(echo=%u))", v, v);
    break;
  case STOKE_SETTING_PIN_MEMORY:
    snprintf(buf, n, "pin_memory 1, --pin-memory");
    break;
  case STOKE_SETTING_DEVICE_PREFETCH:
    snprintf(buf, n, "--device-prefetch %u", v);
    break;
  case STOKE_SETTING_MAX_SIDE:
    snprintf(buf, n, "stoke pack DATA -o OUT --max-side %u", v);
    break;
  case STOKE_SETTING_ONE_THREAD: snprintf(buf, n, "OMP_NUM_THREADS=1"); break;
  case STOKE_SETTING_C_TRANSFORMS:
    snprintf(buf, n, "stoke.Loader(path, transform=...)");
    break;
  case STOKE_SETTING_IO_CONCURRENCY:
    snprintf(buf, n, "--io-concurrency %u", v);
    break;
  case STOKE_SETTING_CACHE: snprintf(buf, n, "--cache DIR"); break;
  case STOKE_SETTING_PROCESSES:
    snprintf(buf, n, "%u worker processes (torch's DataLoader)", v);
    break;
  default: snprintf(buf, n, "?");
  }
}

static const stoke_advice_words library_words = {legacy_words, NULL};

void stoke_advice_name(const stoke_advice_words *words, int setting,
                       unsigned value, unsigned workers, char *buf, size_t n) {
  if (!buf || n == 0) return;
  const stoke_advice_words *w = words && words->name ? words : &library_words;
  w->name(w->user, setting, value, workers, buf, n);
  buf[n - 1] = '\0';
}

/* A setting in the caller's words (at most 255 bytes). */
typedef struct word {
  char s[256];
} word;

static word say(const stoke_advice_words *w, const stoke_advice *a,
               int setting, unsigned v) {
  word out;
  out.s[0] = '\0';
  stoke_advice_name(w, setting, v, a->n_workers, out.s, sizeof out.s);
  return out;
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

static const char *stage_remedy(int stage) {
  switch (stage) {
  case STOKE_STAGE_PYTHON:
  case STOKE_STAGE_GIL_WAIT:
    return "fewer Python operations per sample, or C transforms";
  case STOKE_STAGE_COLLATE:
    return "smaller samples, or collate fewer objects in Python";
  case STOKE_STAGE_READ:
    return "pack samples into shards or a faster storage layout";
  case STOKE_STAGE_DECODE:
    /* Packed shards' JPEGs decode a crop from its own restart intervals:
    ** 1.3-1.4x less decode time than region decoding (bench/ images). */
    return "pack the images with `stoke pack` (crops then decode from "
           "their own restart intervals), or pre-resize them";
  default: return "cheaper or fused transforms";
  }
}

int stoke_advice_format(const stoke_advice *a, const stoke_advice_basis *b,
                        const stoke_advice_words *words, char *buf,
                        size_t n) {
  if (!a || !b || !buf || !n) return STOKE_EINVAL;
  const stoke_advice_words *w = words && words->name ? words : &library_words;
  double pred = ms(a->predicted_step_ns), now = ms(a->now_step_ns);
  buf[0] = '\0';
  switch (a->kind) {
  case STOKE_ADVICE_MODEL:
    snprintf(buf, n,
             "the model is the cost: the step computes %.2f ms and waits "
             "%.1f%%; a faster pipeline gains at most %.2fx",
             ms(b->compute_ns), 100 * b->wait_ratio, a->speedup);
    return 0;
  case STOKE_ADVICE_FEWER:
    if (b->variant == 0)
      snprintf(buf, n,
               "%s is enough: predicted step %.2f ms (now %.2f ms); %u "
               "workers keep up and free %u threads",
               say(w, a, STOKE_SETTING_WORKERS, a->n_workers).s, pred, now,
               a->n_workers, b->run_workers - a->n_workers);
    else
      snprintf(buf, n,
               "oversubscribed: %u workers on %.0f cores for CPU-bound "
               "samples (%.0f%% on a core); %s predicts the same step "
               "(%.2f ms, now %.2f ms)",
               b->run_workers, b->cores, 100 * b->cpu_frac,
               say(w, a, STOKE_SETTING_WORKERS, a->n_workers).s, pred, now);
    return 0;
  case STOKE_ADVICE_PIN_COPY:
    if (b->variant == 0)
      snprintf(buf, n,
               "pageable memory: pin it (%s): %llu copies to the device "
               "came from pageable memory, which the driver copies "
               "synchronously through a staging buffer (%.2f ms a batch)",
               say(w, a, STOKE_SETTING_PIN_MEMORY, 1).s,
               (unsigned long long)b->pageable_copies, ms(b->copy_mean_ns));
    else
      snprintf(buf, n,
               "pinned memory and asynchronous copies: the copy takes %.2f "
               "ms per batch; overlapped, predicted step %.2f ms (now %.2f "
               "ms), %.2fx",
               ms(b->copy_ns), pred, now, a->speedup);
    return 0;
  case STOKE_ADVICE_THREADS:
    snprintf(buf, n,
             "oversubscribed: %u workers run %u threads on %.0f cores (a "
             "threaded library: torch intra-op, OpenMP, BLAS), waiting for a "
             "core %.0f%% of their run time; one thread per worker (%s): "
             "step %.2f ms (now %.2f ms), %.2fx",
             a->n_workers, b->threads_seen, b->cores,
             100 * b->run_delay_frac, say(w, a, STOKE_SETTING_ONE_THREAD, 1).s,
             pred, now, a->speedup);
    return 0;
  case STOKE_ADVICE_C_TRANSFORMS:
    snprintf(buf, n,
             "move decode and transforms out of Python into stoke's C "
             "transforms (%s), which run without the GIL: with %s predicted "
             "step %.2f ms or less (now %.2f ms), %.1fx",
             say(w, a, STOKE_SETTING_C_TRANSFORMS, 0).s,
             say(w, a, STOKE_SETTING_WORKERS, a->n_workers).s, pred, now,
             a->speedup);
    return 0;
  case STOKE_ADVICE_PYTHON_OPS:
    snprintf(buf, n,
             "fewer Python operations per sample (%.2f ms on a core each): "
             "vectorise with NumPy/torch calls, which release the GIL, "
             "precompute what does not change per epoch; at half, "
             "predicted step %.2f ms (now %.2f ms), %.2fx",
             ms(b->gil_ns), pred, now, a->speedup);
    return 0;
  case STOKE_ADVICE_PROCESSES:
    snprintf(buf, n,
             "last resort, processes: %s run Python in parallel, at the "
             "cost of a copy of each batch and of the dataset per process: "
             "predicted step %.2f ms or less (now %.2f ms), %.1fx",
             say(w, a, STOKE_SETTING_PROCESSES, a->n_workers).s, pred, now,
             a->speedup);
    return 0;
  case STOKE_ADVICE_WORKERS: {
    int k = snprintf(buf, n, "%s: predicted step %.2f ms (now %.2f ms), %.1fx",
                     say(w, a, STOKE_SETTING_WORKERS, a->n_workers).s, pred,
                     now, a->speedup);
    if (b->cpu_frac > 0.5 && k > 0 && (size_t)k < n)
      snprintf(buf + k, n - (size_t)k,
               "; CPU-bound (%.0f%% of a sample on a core): past %.0f cores "
               "more workers do not help",
               100 * b->cpu_frac, b->cores);
    return 0;
  }
  case STOKE_ADVICE_PREFETCH: {
    char same[260] = "";
    if (a->n_workers != b->run_workers)
      snprintf(same, sizeof same, " %s",
               say(w, a, STOKE_SETTING_SAME_WORKERS, a->n_workers).s);
    snprintf(buf, n,
             "%s%s: predicted step %.2f ms (now %.2f ms), %.2fx; deeper "
             "prefetch absorbs the spread of the sample cost (sigma %.2f), "
             "not its mean",
             say(w, a, STOKE_SETTING_PREFETCH, a->prefetch).s, same, pred, now,
             a->speedup, b->sigma);
    return 0;
  }
  case STOKE_ADVICE_CHEAPER:
    if (b->variant == 1)
      snprintf(buf, n,
               "the copy is longer than the step (%.2f ms against %.2f ms): "
               "no prefetch depth hides it; copy fewer bytes (u8 images "
               "normalised on the device, a smaller dtype); hidden, "
               "predicted step %.2f ms (now %.2f ms)",
               ms(b->copy_mean_ns), ms(b->compute_ns), pred, now);
    else
      snprintf(buf, n,
               "cheaper %s (%.2f ms of %.2f ms per sample): %s; at half the "
               "cost, predicted step %.2f ms (now %.2f ms), %.2fx",
               stoke_stage_name(a->stage), ms(b->stage_ns), ms(b->sample_ns),
               stage_remedy(a->stage), pred, now, a->speedup);
    return 0;
  case STOKE_ADVICE_DEVICE_PREFETCH:
    snprintf(buf, n,
             "the copy is exposed: the stream waits %.2f ms a step for it "
             "(%.0f%% of the %.2f ms copy); raise the prefetch-to-device "
             "depth (%s): predicted step %.2f ms (now %.2f ms), %.2fx",
             ms(b->copy_ns), 100 * (1 - b->copy_overlap),
             ms(b->copy_mean_ns),
             say(w, a, STOKE_SETTING_DEVICE_PREFETCH, a->device_prefetch).s,
             pred, now, a->speedup);
    return 0;
  case STOKE_ADVICE_FEWER_CONNECTIONS:
    snprintf(buf, n,
             "throttled: the server answered %.1f%% of %u-at-once requests "
             "429 or 503 (slow down); %s asks less of it",
             100 * b->fetch_throttled_frac, b->run_io_concurrency,
             say(w, a, STOKE_SETTING_IO_CONCURRENCY, a->io_concurrency).s);
    return 0;
  case STOKE_ADVICE_IO_CONCURRENCY:
    snprintf(buf, n,
             "latency-bound: %.1f requests a step at %.1f ms each (p50), "
             "%.1f in flight, take %.2f ms a step; %s%s%s: predicted step "
             "%.2f ms (now %.2f ms), %.2fx",
             b->fetch_requests_per_step, b->fetch_latency_ms,
             b->fetch_in_flight, b->fetch_step_ms,
             say(w, a, STOKE_SETTING_IO_CONCURRENCY, a->io_concurrency).s,
             a->n_workers > b->run_workers ? " " : "",
             a->n_workers > b->run_workers
                 ? say(w, a, STOKE_SETTING_WORKERS, a->n_workers).s
                 : "",
             pred, now, a->speedup);
    return 0;
  case STOKE_ADVICE_REMOTE_CACHE:
    snprintf(buf, n,
             "bandwidth-bound: the requests spend %.0f%% of their time "
             "receiving bodies, %.1f MB/s for %.1f KB a sample, %.1f in "
             "flight; %s keeps the shards on this node after the first "
             "epoch: predicted step %.2f ms (now %.2f ms), %.2fx",
             100 * b->fetch_body_frac, b->fetch_bytes_per_s / 1e6,
             b->fetch_bytes_per_sample / 1e3, b->fetch_in_flight,
             say(w, a, STOKE_SETTING_CACHE, 0).s, pred, now, a->speedup);
    return 0;
  case STOKE_ADVICE_PRESIZE:
    if (b->variant == 1) {
      snprintf(buf, n,
               "bandwidth-bound: %s: images of %.0f px (longer side) keep "
               "%.0f%% of %.1f KB a sample; a step's bytes then take %.2f "
               "ms at %.1f MB/s: predicted step %.2f ms (now %.2f ms), %.2fx",
               say(w, a, STOKE_SETTING_MAX_SIDE, a->max_side).s,
               b->image_side_mean, 100 * b->pixels_kept_frac,
               b->fetch_bytes_per_sample / 1e3,
               b->fetch_link_step_ms * b->pixels_kept_frac,
               b->fetch_bytes_per_s / 1e6, pred, now,
               a->speedup);
      return 0;
    }
    snprintf(buf, n,
             "pre-resize once: %s: the images average %.1f MP (longer side "
             "%.0f px) and the transform keeps %u px; decoding %.1f%% of the "
             "pixels (%.2f ms of %.2f ms a sample now), predicted step %.2f "
             "ms (now %.2f ms), %.2fx",
             say(w, a, STOKE_SETTING_MAX_SIDE, a->max_side).s,
             b->image_pixels_mean / 1e6, b->image_side_mean, a->max_side,
             100 * b->pixels_kept_frac, ms(b->stage_ns), ms(b->sample_ns),
             pred, now, a->speedup);
    return 0;
  case STOKE_ADVICE_ECHO:
    snprintf(buf, n,
             "last resort, data echoing: %s: even with every core the "
             "producer needs %.2f ms per batch against a %.2f ms step; using "
             "each batch %u times predicts %.2f ms per step (now %.2f ms), "
             "%.2fx",
             say(w, a, STOKE_SETTING_ECHO, a->echo).s, ms(b->producer_batch_ns),
             ms(b->compute_ns + b->copy_ns), a->echo, pred, now, a->speedup);
    return 0;
  }
  return STOKE_EINVAL;
}
