/* format.c — the canonical text of what a run was: durations, shapes and
** bytes, the synthetic source ("sleep:5ms"), its cost distribution
** ("lognormal:0.5"), the consumer's step ("sleep:12ms") and the source as
** the headline names it.  The tool parses the same words (cli/run.c), so
** that the text of a spec reads back as the spec. */
#include <stdarg.h>
#include <string.h>

#include "report.h"

void report_errorf(report_err *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  va_end(ap);
}

void report_fmt_duration(int64_t ns, char *buf, size_t n) {
  if (ns == 0)
    snprintf(buf, n, "0");
  else if (ns % 1000000000 == 0)
    snprintf(buf, n, "%llds", (long long)(ns / 1000000000));
  else if (ns % 1000000 == 0)
    snprintf(buf, n, "%lldms", (long long)(ns / 1000000));
  else if (ns % 1000 == 0)
    snprintf(buf, n, "%lldus", (long long)(ns / 1000));
  else
    snprintf(buf, n, "%lldns", (long long)ns);
}

void report_fmt_shape(int ndim, const int64_t *shape, char *buf, size_t n) {
  size_t used = 0;
  buf[0] = '\0';
  for (int d = 0; d < ndim && used < n; d++) {
    int w = snprintf(buf + used, n - used, "%s%lld", d ? "x" : "",
                     (long long)shape[d]);
    if (w < 0)
      break;
    used += (size_t)w;
  }
}

void report_fmt_bytes(char *buf, size_t n, uint64_t b) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  size_t u = 0;
  while (v >= 1024 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, n, "%llu B", (unsigned long long)b);
  else
    snprintf(buf, n, "%.1f %s", v, units[u]);
}

const char *report_synth_kind_name(int kind) {
  switch (kind) {
  case STOKE_SYNTH_SLEEP:
    return "sleep";
  case STOKE_SYNTH_SPIN:
    return "spin";
  case STOKE_SYNTH_TENSOR:
    return "tensor";
  }
  return "?";
}

void report_fmt_synthetic(const stoke_synthetic_config *synth, char *buf,
                          size_t n) {
  if (synth->kind == STOKE_SYNTH_TENSOR) {
    snprintf(buf, n, "tensor");
    return;
  }
  char d[32], w[32];
  report_fmt_duration(synth->cost_ns, d, sizeof(d));
  if (synth->wait_ns > 0) {
    report_fmt_duration(synth->wait_ns, w, sizeof(w));
    snprintf(buf, n, "%s:%s+sleep:%s", report_synth_kind_name(synth->kind), d, w);
  } else {
    snprintf(buf, n, "%s:%s", report_synth_kind_name(synth->kind), d);
  }
}

void report_fmt_source(const report_spec *spec, size_t n_samples, char *buf,
                       size_t n) {
  if (spec->source_label) {
    snprintf(buf, n, "%s (%zu samples)", spec->source_label, n_samples);
    return;
  }
  if (spec->data) {
    char shown[1024];
    stoke_path_shown(spec->data, shown, sizeof shown);
    snprintf(buf, n, "images %s (%zu samples, transform %s)", shown,
             n_samples, spec->image.transform);
    return;
  }
  char src[64], dist[64];
  report_fmt_synthetic(&spec->synth, src, sizeof(src));
  report_fmt_cost_dist(&spec->synth, dist, sizeof(dist));
  snprintf(buf, n, "synthetic %s (%s) x %zu samples", src, dist, n_samples);
}

void report_fmt_cost_dist(const stoke_synthetic_config *synth, char *buf,
                          size_t n) {
  switch (synth->dist) {
  case STOKE_COST_EXP:
    snprintf(buf, n, "exp");
    break;
  case STOKE_COST_LOGNORMAL:
    snprintf(buf, n, "lognormal:%g", synth->sigma);
    break;
  case STOKE_COST_RARE:
    snprintf(buf, n, "rare:%g:%g", synth->rare_frac, synth->rare_factor);
    break;
  default:
    snprintf(buf, n, "fixed");
  }
}

/* The consumer's step as the reports name it. */
void report_fmt_step(const report_spec *spec, char *buf, size_t n) {
  if (spec->compute_label)
    snprintf(buf, n, "%s", spec->compute_label);
  else
    report_fmt_compute(spec->compute_kind, spec->compute_ns, buf, n);
}

void report_fmt_compute(int kind, int64_t ns, char *buf, size_t n) {
  char d[32];
  report_fmt_duration(ns, d, sizeof(d));
  if (kind == REPORT_COMPUTE_SLEEP)
    snprintf(buf, n, "sleep:%s", d);
  else if (kind == REPORT_COMPUTE_SPIN)
    snprintf(buf, n, "spin:%s", d);
  else if (kind == REPORT_COMPUTE_GPU_SLEEP)
    snprintf(buf, n, "gpu-sleep:%s", d);
  else
    snprintf(buf, n, "none");
}

