/* html.c — `stoke report`'s page (and Python's stoke.doctor's): one
** self-contained HTML page from the JSON of "stoke bench", "stoke profile"
** and "stoke tune".
**
** The page has no script, no stylesheet, font or image outside itself and
** no network reference (the only URL is the SVG namespace), so it can be
** mailed, attached to a ticket or opened offline.  Each input's kind is told
** by its keys (a tune has "points", a profile a "diagnosis" object, a bench
** "summary" or "epochs"); every key is optional, so older JSON draws the
** sections it has.  Every string from the input is escaped.
**
** Order of the page: what was run and where, the verdict and the advice
** (a tune's knee), then per run the wait/compute split per epoch, the wait
** distribution, the stage breakdown and the what-if table, then per tune the
** curve and the table.  The charts are drawn by chart.c; the tune
** curve reuses tune_chart.c's chart, recoloured to the same colour-blind-safe
** palette.
*/
#define _POSIX_C_SOURCE 200809L /* open_memstream, gmtime_r */

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "chart.h"
#include "report.h"
#include "tune_chart.h"

/* Inputs larger than this are not a stoke report. */
#define MAX_INPUT_BYTES (64u << 20)
/* Epoch bars drawn at most; the rest are summarised in the caption. */
#define MAX_EPOCH_ROWS 200

enum { K_BENCH, K_PROFILE, K_TUNE };

static const char *const kind_names[] = {"bench", "profile", "tune"};

typedef struct input {
  const char *path;
  int kind;
  cJSON *root;
  time_t mtime;
} input;

/* ---- reading the inputs -------------------------------------------------- */

static char *read_all(const char *path, size_t *len, report_err *e) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    report_errorf(e, "cannot read '%s': %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 0, n = 0;
  char *buf = NULL;
  for (;;) {
    if (n == cap) {
      if (cap >= MAX_INPUT_BYTES) {
        report_errorf(e, "'%s' is over %u MiB: not a stoke report", path,
                  MAX_INPUT_BYTES >> 20);
        goto fail;
      }
      cap = cap ? 2 * cap : 1 << 16;
      char *nb = realloc(buf, cap + 1);
      if (!nb) {
        report_errorf(e, "%s", stoke_strerror(STOKE_ENOMEM));
        goto fail;
      }
      buf = nb;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0)
      break;
  }
  if (ferror(f)) {
    report_errorf(e, "cannot read '%s': %s", path, strerror(errno));
    goto fail;
  }
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
fail:
  free(buf);
  fclose(f);
  return NULL;
}

static const cJSON *obj(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsObject(v) ? v : NULL;
}

static const cJSON *arr(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsArray(v) ? v : NULL;
}

/* A number, or NaN when absent or not a number. */
static double num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* A string, or NULL. */
static const char *str(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int flag(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsTrue(v) ? 1 : cJSON_IsFalse(v) ? 0 : -1;
}

static int load(input *in, report_err *e) {
  size_t len = 0;
  char *text = read_all(in->path, &len, e);
  if (!text)
    return -1;
  struct stat st;
  in->mtime = stat(in->path, &st) == 0 ? st.st_mtime : (time_t)-1;
  const char *end = NULL;
  in->root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (!in->root) {
    const char *at = cJSON_GetErrorPtr();
    size_t line = 1;
    if (at && at >= text && at <= text + len)
      for (const char *p = text; p < at; p++)
        line += *p == '\n';
    report_errorf(e, "'%s' is not JSON (error at line %zu)", in->path, line);
    free(text);
    return -1;
  }
  /* Only whitespace may follow the value. */
  for (; end && end < text + len; end++)
    if (!strchr(" \t\r\n", *end) || *end == '\0') {
      report_errorf(e, "'%s' is not JSON (text after the value)", in->path);
      free(text);
      return -1;
    }
  free(text);
  const cJSON *r = in->root;
  if (cJSON_IsObject(r) && arr(r, "points"))
    in->kind = K_TUNE;
  else if (cJSON_IsObject(r) && obj(r, "diagnosis") &&
           (obj(r, "summary") || arr(r, "epochs")))
    in->kind = K_PROFILE;
  else if (cJSON_IsObject(r) && (obj(r, "summary") || arr(r, "epochs")))
    in->kind = K_BENCH;
  else {
    report_errorf(e, "'%s' is not the JSON of stoke bench, profile or tune",
              in->path);
    return -1;
  }
  return 0;
}

/* ---- HTML helpers -------------------------------------------------------- */

#define esc rc_escape

/* printf, escaped. */
static void escf(FILE *f, const char *fmt, ...) REPORT_PRINTF(2, 3);
static void escf(FILE *f, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  esc(f, buf);
}

static void fmt_bytes(char *buf, size_t n, double b) {
  if (!isfinite(b) || b < 0 || b >= 1.8e19) /* JSON: anything; u64 below */
    snprintf(buf, n, "-");
  else
    report_fmt_bytes(buf, n, (uint64_t)b);
}

static void fmt_time(char *buf, size_t n, time_t t) {
  struct tm tm;
  if (t == (time_t)-1 || !gmtime_r(&t, &tm) ||
      !strftime(buf, n, "%Y-%m-%d %H:%M UTC", &tm))
    snprintf(buf, n, "unknown");
}

/* "73.9%" or "-". */
static void fmt_pct(char *buf, size_t n, double ratio) {
  if (isfinite(ratio))
    snprintf(buf, n, "%.1f%%", 100 * ratio);
  else
    snprintf(buf, n, "-");
}

/* A number with `digits` decimals, or "-". */
static void fmt_num(char *buf, size_t n, double v, int digits,
                    const char *unit) {
  if (isfinite(v))
    snprintf(buf, n, "%.*f%s%s", digits, v, unit && *unit ? " " : "",
             unit ? unit : "");
  else
    snprintf(buf, n, "-");
}

/* The file's name without its folders, for headings. */
static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s && s[1] ? s + 1 : path;
}

static const char *verdict_of(const input *in) {
  const char *v = str(obj(in->root, "diagnosis"), "verdict");
  if (!v)
    v = str(obj(in->root, "summary"), "verdict");
  return v;
}

/* A CSS class suffix for a verdict: only known names pass. */
static const char *verdict_class(const char *v) {
  static const char *const known[] = {"starving", "variance", "busy",
                                      "python-bound"};
  for (size_t i = 0; v && i < sizeof known / sizeof known[0]; i++)
    if (strcmp(v, known[i]) == 0)
      return known[i];
  return "unknown";
}

static void section_head(FILE *f, const char *title, const input *in,
                         int many) {
  fputs("<h2>", f);
  esc(f, title);
  if (many) {
    fputs(" <span class=\"file\">", f);
    esc(f, base_name(in->path));
    fputs("</span>", f);
  }
  fputs("</h2>\n", f);
}

static const char css[] =
    "*{box-sizing:border-box}"
    "body{margin:0;background:#eef0f3;color:#1d1d1f;"
    "font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,"
    "'Helvetica Neue',Arial,sans-serif}"
    "main{max-width:1000px;margin:0 auto;padding:22px 30px 40px;"
    "background:#fff}"
    "h1{font-size:26px;margin:0 0 2px}"
    "h2{font-size:20px;margin:30px 0 10px;padding-bottom:4px;"
    "border-bottom:2px solid #e3e5e8}"
    "h3{font-size:16px;margin:16px 0 6px}"
    ".file{font-size:13px;font-weight:normal;color:#666}"
    ".sub{color:#555;margin:0 0 10px}"
    "dl.meta{display:grid;grid-template-columns:max-content 1fr;"
    "gap:2px 18px;margin:6px 0 12px}"
    "dl.meta dt{color:#555}dl.meta dd{margin:0}"
    ".verdict{border-left:12px solid #999;background:#f8f9fa;"
    "padding:14px 22px 10px;margin:14px 0 20px}"
    ".v-starving{border-color:#D55E00}.v-variance{border-color:#E69F00}"
    ".v-python-bound{border-color:#CC79A7}"
    ".v-busy{border-color:#009E73}.v-knee{border-color:#0072B2}"
    ".badge{display:inline-block;font-size:13px;font-weight:700;"
    "letter-spacing:.06em;text-transform:uppercase;color:#fff;"
    "background:#777;border-radius:4px;padding:1px 8px}"
    ".v-starving .badge{background:#D55E00}"
    ".v-python-bound .badge{background:#a0487f}"
    ".v-variance .badge{background:#9a6a00}"
    ".v-busy .badge{background:#007a5a}.v-knee .badge{background:#0072B2}"
    ".big{font-size:25px;font-weight:700;line-height:1.25;margin:6px 0 10px}"
    "ul.kpis{display:flex;flex-wrap:wrap;gap:6px 30px;list-style:none;"
    "padding:0;margin:8px 0}"
    "ul.kpis li{color:#555;font-size:13px}"
    "ul.kpis b{display:block;color:#1d1d1f;font-size:20px}"
    "ol.advice{font-size:17px;padding-left:26px;margin:4px 0 8px}"
    "ol.advice li{margin:4px 0}"
    ".gain{display:inline-block;background:#0072B2;color:#fff;"
    "border-radius:10px;padding:0 9px;font-weight:700;font-size:14px;"
    "margin-left:8px}"
    ".model{color:#333}"
    "code{font-family:ui-monospace,'DejaVu Sans Mono',Menlo,Consolas,"
    "monospace;font-size:.92em;background:#eef0f3;padding:1px 5px;"
    "border-radius:3px}"
    "table{border-collapse:collapse;font-variant-numeric:tabular-nums;"
    "margin:6px 0 10px}"
    "th,td{padding:3px 12px;border-bottom:1px solid #e3e5e8;"
    "text-align:right}"
    "th{background:#f0f2f4;font-weight:600}"
    ".l{text-align:left}"
    "tr.knee td{background:#dcebf6;font-weight:700}"
    "tr.best td{background:#f3f7fb}"
    "tr.skip td{color:#888}"
    "td.now{outline:2px solid #D55E00;outline-offset:-2px;font-weight:700}"
    "td.good{background:#e3f3ec}"
    "td.adv{background:#cfe3f3;font-weight:700}"
    "figure{margin:8px 0 20px}"
    "svg{display:block;max-width:100%;height:auto}"
    "figcaption{color:#555;font-size:13.5px;margin-top:4px}"
    ".note{color:#555;font-size:13.5px}"
    "footer{margin-top:30px;color:#777;font-size:12.5px}";

/* ---- header: what was run and where -------------------------------------- */

static void run_description(FILE *f, const input *in) {
  const cJSON *c = obj(in->root, "config");
  if (!c) {
    fputs("<dd>no config in the file</dd>\n", f);
    return;
  }
  const char *syn = str(c, "synthetic"), *dist = str(c, "cost_dist");
  double samples = num(c, "samples");
  fputs("<dt>source</dt><dd>", f);
  if (str(c, "data")) {
    escf(f, "images %s", str(c, "data"));
    if (str(c, "transform"))
      escf(f, " (transform %s)", str(c, "transform"));
  } else if (syn) {
    escf(f, "%s %s", str(c, "source") ? str(c, "source") : "synthetic",
         syn);
    if (dist)
      escf(f, " (%s)", dist);
  } else if (str(c, "source")) {
    esc(f, str(c, "source"));
  } else {
    fputs("-", f);
  }
  if (isfinite(samples))
    escf(f, " \xc3\x97 %.0f samples", samples);
  if (str(c, "shape"))
    escf(f, ", shape %s", str(c, "shape"));
  fputs("</dd>\n<dt>loader</dt><dd>", f);
  if (in->kind == K_TUNE) {
    escf(f, "batch %.0f, swept up to %.0f workers, tolerance %.0f%%",
         num(c, "batch_size"), num(c, "max_workers"),
         100 * num(c, "tolerance"));
  } else {
    double warm = num(c, "warmup_epochs");
    escf(f, "batch %.0f, %.0f workers, prefetch %.0f", num(c, "batch_size"),
         num(c, "workers"), num(c, "prefetch"));
    if (flag(c, "shuffle") >= 0)
      escf(f, ", shuffle %s", flag(c, "shuffle") ? "on" : "off");
    if (isfinite(num(c, "epochs")))
      escf(f, ", %.0f epochs", num(c, "epochs"));
    if (isfinite(warm))
      escf(f, " (%.0f warm-up)", warm);
    if (isfinite(num(c, "world")) && num(c, "world") > 1)
      escf(f, ", rank %.0f of %.0f", num(c, "rank"), num(c, "world"));
  }
  fputs("</dd>\n<dt>consumer step</dt><dd>", f);
  esc(f, str(c, "compute") ? str(c, "compute") : "-");
  fputs("</dd>\n", f);
}

static void machine_description(FILE *f, const cJSON *m) {
  char mem[32];
  fmt_bytes(mem, sizeof mem, num(m, "memory_bytes"));
  fputs("<dl class=\"meta\">\n<dt>cpu</dt><dd>", f);
  esc(f, str(m, "cpu") ? str(m, "cpu") : "-");
  fputs("</dd>\n<dt>cores</dt><dd>", f);
  if (isfinite(num(m, "cores")))
    escf(f, "%.0f", num(m, "cores"));
  else
    fputs("-", f);
  fputs("</dd>\n<dt>memory</dt><dd>", f);
  esc(f, mem);
  fputs("</dd>\n<dt>kernel</dt><dd>", f);
  esc(f, str(m, "kernel") ? str(m, "kernel") : "-");
  if (str(m, "arch"))
    escf(f, " (%s)", str(m, "arch"));
  fputs("</dd>\n<dt>stoke</dt><dd>", f);
  esc(f, str(m, "stoke_version") ? str(m, "stoke_version") : "-");
  if (str(m, "compiler"))
    escf(f, ", built with %s", str(m, "compiler"));
  fputs("</dd>\n</dl>\n", f);
}

static void write_header(FILE *f, const input *ins, size_t n) {
  char when[64];
  fputs("<header>\n<h1>stoke report</h1>\n<p class=\"sub\">", f);
  for (size_t i = 0; i < n; i++) {
    fmt_time(when, sizeof when, ins[i].mtime);
    escf(f, "%s%s (%s, written %s)", i ? "; " : "", base_name(ins[i].path),
         kind_names[ins[i].kind], when);
  }
  fputs("</p>\n", f);
  for (size_t i = 0; i < n; i++) {
    fputs("<h3>", f);
    escf(f, "stoke %s", kind_names[ins[i].kind]);
    if (n > 1) {
      fputs(" <span class=\"file\">", f);
      esc(f, base_name(ins[i].path));
      fputs("</span>", f);
    }
    fputs("</h3>\n<dl class=\"meta\">\n", f);
    run_description(f, &ins[i]);
    fputs("</dl>\n", f);
  }
  /* The machine, once per distinct machine. */
  for (size_t i = 0; i < n; i++) {
    const cJSON *m = obj(ins[i].root, "machine");
    if (!m)
      continue;
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++) {
      const cJSON *o = obj(ins[j].root, "machine");
      seen = o && cJSON_Compare(o, m, 1);
    }
    if (seen)
      continue;
    fputs("<h3>machine", f);
    if (n > 1) {
      fputs(" <span class=\"file\">", f);
      esc(f, base_name(ins[i].path));
      fputs("</span>", f);
    }
    fputs("</h3>\n", f);
    machine_description(f, m);
  }
  fputs("</header>\n", f);
}

/* ---- the verdict and the advice ------------------------------------------ */

/* The fetch stage of a run over remote shards (summary.fetch since 0.6;
** nothing for a local run or an older file). */
static void fetch_block(FILE *f, const cJSON *s) {
  const cJSON *x = obj(s, "fetch");
  if (!x || !isfinite(num(x, "requests"))) return;
  fputs("<p class=\"model\"><b>Fetch</b> ", f);
  escf(f, "%.0f requests (%.0f retries, %.0f throttled), %.1f MB at %.1f "
          "MB/s; latency p50 %.1f ms, p95 %.1f ms; %.1f in flight of "
          "io_concurrency %.0f",
       num(x, "requests"), num(x, "retries"), num(x, "throttled"),
       num(x, "bytes") / 1e6, num(x, "bytes_per_s") / 1e6,
       num(x, "latency_p50_ms"), num(x, "latency_p95_ms"),
       num(x, "in_flight"), num(x, "io_concurrency"));
  /* body_frac since the bandwidth-bound verdict: absent in older files. */
  if (isfinite(num(x, "body_frac")))
    escf(f, "; %.0f%% receiving bodies", 100 * num(x, "body_frac"));
  const char *v = str(x, "verdict");
  if (v && strcmp(v, "none") != 0) escf(f, "; %s", v);
  fputs(".</p>\n", f);
}

/* The remote shard cache (summary.remote_cache since 0.6: a source opened
** with a cache; nothing otherwise), as the text report's line says it. */
static void rcache_block(FILE *f, const cJSON *s) {
  const cJSON *x = obj(s, "remote_cache");
  if (!x || !isfinite(num(x, "hits"))) return;
  fputs("<p class=\"model\"><b>Remote cache</b> ", f);
  escf(f, "%.0f shards from the cache (%.1f MB), %.0f fetched into it "
          "(%.1f MB)",
       num(x, "hits"), num(x, "bytes_cached") / 1e6, num(x, "misses"),
       num(x, "bytes_fetched") / 1e6);
  if (num(x, "uncached") > 0)
    escf(f, ", %.0f read remotely (no ETag)", num(x, "uncached"));
  if (num(x, "evicted") > 0)
    escf(f, ", %.0f evicted (%.1f MB)", num(x, "evicted"),
         num(x, "bytes_evicted") / 1e6);
  fputs(".</p>\n", f);
}

/* Echo's steps and fresh samples, and what the wait costs (bench and
** profile files since 0.3; nothing for older ones). */
static void rungs_block(FILE *f, const cJSON *s) {
  fetch_block(f, s);
  rcache_block(f, s);
  double echo = num(s, "echo");
  if (isfinite(echo) && echo > 1) {
    char st[32], fr[32];
    fmt_num(st, sizeof st, num(s, "steps_per_s"), 1, NULL);
    fmt_num(fr, sizeof fr, num(s, "fresh_samples_per_s"), 1, NULL);
    fputs("<p class=\"model\"><b>Data echoing</b> ", f);
    escf(f, "x%.0f (%s): %s steps per second, %s fresh samples per second.",
         echo, str(s, "echo_mode") ? str(s, "echo_mode") : "batch", st, fr);
    fputs("</p>\n", f);
  }
  const cJSON *c = obj(s, "cost");
  if (!c || !isfinite(num(c, "seconds_per_epoch"))) return;
  char ps[32], pe[32], we[32], wr[32];
  fmt_num(ps, sizeof ps, 1e3 * num(c, "seconds_per_sample"), 3, "ms");
  fmt_num(pe, sizeof pe, num(c, "seconds_per_epoch"), 3, "s");
  fmt_num(we, sizeof we, num(c, "wait_seconds_per_epoch"), 3, "s");
  fmt_pct(wr, sizeof wr, num(c, "wait_share"));
  fputs("<p class=\"model\"><b>What the wait costs</b>: ", f);
  escf(f, "%s per sample, %s per epoch, of which the consumer waits %s (%s)",
       ps, pe, we, wr);
  double price = num(c, "gpu_price_per_hour");
  if (isfinite(price) && price > 0)
    escf(f, "; at $%.2f an hour the epoch costs $%.4f and the waiting costs "
            "$%.4f of it ($%.2f per million samples)",
         price, num(c, "per_epoch"), num(c, "wait_per_epoch"),
         num(c, "wait_per_million_samples"));
  fputs(".</p>\n", f);
}

static void verdict_block(FILE *f, const input *in, int many) {
  const cJSON *d = obj(in->root, "diagnosis");
  const cJSON *s = obj(in->root, "summary");
  const char *v = verdict_of(in);
  const char *reason = str(d, "reason");
  if (!reason)
    reason = str(s, "verdict_reason");
  char buf[64];
  fprintf(f, "<section class=\"verdict v-%s\">\n<span class=\"badge\">",
          verdict_class(v));
  esc(f, v ? v : "no verdict");
  fputs("</span>", f);
  if (many) {
    fputs(" <span class=\"file\">", f);
    esc(f, base_name(in->path));
    fputs("</span>", f);
  }
  fputs("\n<p class=\"big\">", f);
  /* "starving: waiting 74% ..." reads "starving — waiting 74% ...". */
  size_t vl = v ? strlen(v) : 0;
  if (reason && v && strncmp(reason, v, vl) == 0 && reason[vl] == ':') {
    esc(f, v);
    fputs(" \xe2\x80\x94 ", f);
    esc(f, reason + vl + 1 + (reason[vl + 1] == ' '));
  } else if (reason) {
    if (v) {
      esc(f, v);
      fputs(" \xe2\x80\x94 ", f);
    }
    esc(f, reason);
  } else {
    esc(f, v ? v : "no verdict in the file");
  }
  fputs("</p>\n<ul class=\"kpis\">\n", f);
  double wr = num(s, "wait_ratio");
  if (!isfinite(wr))
    wr = num(d, "wait_ratio");
  double qe = num(s, "queue_empty_frac");
  if (!isfinite(qe))
    qe = num(d, "queue_empty_frac");
  fmt_pct(buf, sizeof buf, wr);
  fprintf(f, "<li><b>%s</b>of the step waiting for data</li>\n", buf);
  fmt_pct(buf, sizeof buf, qe);
  fprintf(f, "<li><b>%s</b>of next() calls found the queue empty</li>\n",
          buf);
  fmt_num(buf, sizeof buf, num(s, "samples_per_s"), 1, NULL);
  fprintf(f, "<li><b>%s</b>samples per second</li>\n", buf);
  fmt_num(buf, sizeof buf, num(s, "wait_p95_ms"), 2, "ms");
  fprintf(f, "<li><b>%s</b>wait p95 per step</li>\n", buf);
  if (isfinite(num(d, "tail_ratio"))) {
    fmt_num(buf, sizeof buf, num(d, "tail_ratio"), 2, NULL);
    fprintf(f, "<li><b>%s</b>tail ratio (p99 / step p50)</li>\n", buf);
  }
  fputs("</ul>\n", f);
  rungs_block(f, s);

  if (!d) {
    fputs("<p class=\"note\">No diagnosis in this file: run <code>stoke "
          "profile</code> for the queue model, the what-if table and "
          "advice.</p>\n</section>\n",
          f);
    return;
  }
  const cJSON *adv = arr(d, "advice");
  fputs("<h3>advice</h3>\n", f);
  if (!adv || cJSON_GetArraySize(adv) == 0) {
    fputs("<p>No change is predicted to gain 5% or more.</p>\n", f);
  } else {
    fputs("<ol class=\"advice\">\n", f);
    const cJSON *a;
    cJSON_ArrayForEach(a, adv) {
      const char *t = str(a, "text");
      fputs("<li>", f);
      const char *colon = t ? strstr(t, ": ") : NULL;
      if (t && colon && t[0] == '-') {
        /* "-j 8: predicted ..." : the flags in code. */
        fputs("<code>", f);
        char head[256];
        size_t hl = (size_t)(colon - t) < sizeof head - 1
                        ? (size_t)(colon - t)
                        : sizeof head - 1;
        memcpy(head, t, hl);
        head[hl] = '\0';
        esc(f, head);
        fputs("</code>", f);
        esc(f, colon);
      } else {
        esc(f, t ? t : str(a, "kind") ? str(a, "kind") : "-");
      }
      double sp = num(a, "speedup");
      if (isfinite(sp) && sp > 0)
        fprintf(f, "<span class=\"gain\">step %+.0f%%</span>",
                100 * (1 / sp - 1));
      fputs("</li>\n", f);
    }
    fputs("</ol>\n", f);
  }
  const cJSON *p = obj(d, "prediction");
  if (p) {
    char pred[32], meas[32], err[32], pe[32], me[32], ee[32];
    fmt_num(pred, sizeof pred, num(p, "predicted_step_ns") / 1e6, 3, "ms");
    fmt_num(meas, sizeof meas, num(p, "measured_step_ns") / 1e6, 3, "ms");
    fmt_num(err, sizeof err, 100 * num(p, "step_error"), 1, "%");
    fmt_num(pe, sizeof pe, num(p, "predicted_epoch_s"), 4, "s");
    fmt_num(me, sizeof me, num(p, "measured_epoch_s"), 4, "s");
    fmt_num(ee, sizeof ee, 100 * num(p, "epoch_error"), 1, "%");
    fputs("<p class=\"model\"><b>The queue model</b> (docs/diagnosis.md): "
          "predicted step ",
          f);
    escf(f, "%s, measured %s (error %s); epoch predicted %s, measured %s "
            "(error %s)",
         pred, meas, err, pe, me, ee);
    if (str(p, "bound")) {
      fputs("; the step is bound by <b>", f);
      esc(f, str(p, "bound"));
      fputs("</b>", f);
    }
    fputs(".</p>\n", f);
  }
  fputs("</section>\n", f);
}

static void knee_block(FILE *f, const input *in, int many) {
  const cJSON *k = obj(in->root, "knee");
  fputs("<section class=\"verdict v-knee\">\n<span class=\"badge\">tune"
        "</span>",
        f);
  if (many) {
    fputs(" <span class=\"file\">", f);
    esc(f, base_name(in->path));
    fputs("</span>", f);
  }
  fputs("\n<p class=\"big\">", f);
  if (!k) {
    fputs("no knee \xe2\x80\x94 no point was measured</p>\n", f);
  } else {
    char sps[32], best[32], wr[32];
    fmt_num(sps, sizeof sps, num(k, "samples_per_s"), 1, NULL);
    fmt_pct(best, sizeof best,
            num(k, "samples_per_s") / num(k, "best_samples_per_s"));
    fmt_pct(wr, sizeof wr, num(k, "wait_ratio"));
    fputs("knee: ", f);
    esc(f, str(k, "flags") ? str(k, "flags") : "-");
    escf(f, " \xe2\x80\x94 %s samples/s, %s of the best, waiting %s", sps,
         best, wr);
    fputs("</p>\n", f);
    if (str(k, "reason")) {
      fputs("<p>", f);
      esc(f, str(k, "reason"));
      fputs("</p>\n", f);
    }
    const char *call = str(obj(k, "pytorch"), "call");
    fputs("<ul class=\"kpis\">\n", f);
    fputs("<li><b><code>", f);
    esc(f, str(k, "flags") ? str(k, "flags") : "-");
    fputs("</code></b>stoke flags</li>\n", f);
    if (call) {
      fputs("<li><b><code>", f);
      esc(f, call);
      fputs("</code></b>PyTorch</li>\n", f);
    }
    fputs("</ul>\n", f);
  }
  if (flag(in->root, "interrupted") == 1)
  {
    fputs("<p class=\"note\">", f);
    escf(f, "interrupted: %.0f of %.0f points measured",
         num(in->root, "points_done"), num(in->root, "points_planned"));
    fputs("</p>\n", f);
  }
  fputs("</section>\n", f);
}

/* ---- per run: epochs, waits, stages, what-if ----------------------------- */

static int epochs_figure(FILE *f, const input *in, int many) {
  const cJSON *ea = arr(in->root, "epochs");
  int n = ea ? cJSON_GetArraySize(ea) : 0;
  if (n <= 0)
    return 0;
  size_t nr = (size_t)n < MAX_EPOCH_ROWS ? (size_t)n : MAX_EPOCH_ROWS;
  rc_row *rows = calloc(nr, sizeof *rows);
  double(*vals)[2] = calloc(nr, sizeof *vals);
  char(*labels)[32] = calloc(nr, sizeof *labels);
  char(*notes)[48] = calloc(nr, sizeof *notes);
  if (!rows || !vals || !labels || !notes) {
    free(rows);
    free(vals);
    free(labels);
    free(notes);
    return -1;
  }
  size_t i = 0, n_warm = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, ea) {
    if (i == nr)
      break;
    double w = num(e, "wait_s"), c = num(e, "compute_s");
    double idx = num(e, "index");
    int warm = flag(e, "warmup") == 1;
    n_warm += warm;
    vals[i][0] = w;
    vals[i][1] = c;
    snprintf(labels[i], sizeof labels[i], "epoch %.0f%s",
             isfinite(idx) ? idx : (double)i, warm ? " (warm-up)" : "");
    double tot = (isfinite(w) ? w : 0) + (isfinite(c) ? c : 0);
    if (tot > 0)
      snprintf(notes[i], sizeof notes[i], "%.1f%% waiting, %.3f s",
               100 * (isfinite(w) ? w : 0) / tot, tot);
    rows[i] = (rc_row){labels[i], vals[i], warm, notes[i][0] ? notes[i]
                                                             : NULL};
    i++;
  }
  static const char *const seg[] = {"waiting for data (inside next())",
                                    "computing (the consumer step)"};
  static const int colors[] = {RC_VERMILION, RC_BLUE};
  rc_bars c = {.title = "Wait and compute per epoch",
               .x_label = "seconds",
               .unit = "s",
               .stacked = 1,
               .seg_labels = seg,
               .seg_colors = colors,
               .n_seg = 2,
               .rows = rows,
               .n_rows = nr,
               .faded_label = n_warm ? "faded: warm-up" : NULL};
  section_head(f, "Wait and compute per epoch", in, many);
  fputs("<figure>\n", f);
  int rc = rc_write_bars(f, &c);
  fputs("<figcaption>Each bar is one epoch: the time the training loop "
        "waited inside <code>next()</code> (vermillion) and the time it "
        "computed (blue).",
        f);
  if (n_warm)
    fputs(" Warm-up epochs are faded and labelled; they are left out of the "
          "verdict.",
          f);
  if ((size_t)n > nr)
    escf(f, " The first %zu of %d epochs are drawn.", nr, n);
  fputs("</figcaption>\n</figure>\n", f);
  free(rows);
  free(vals);
  free(labels);
  free(notes);
  return rc;
}

/* Buckets, when the JSON has them: summary.wait_histogram, an array of
** {"lo_ms", "hi_ms", "count"}.  Returns the number read (0: none). */
static size_t read_histogram(const cJSON *s, double **lo, double **hi,
                             double **cnt) {
  const cJSON *h = arr(s, "wait_histogram");
  int n = h ? cJSON_GetArraySize(h) : 0;
  *lo = *hi = *cnt = NULL;
  if (n <= 0)
    return 0;
  *lo = malloc((size_t)n * sizeof **lo);
  *hi = malloc((size_t)n * sizeof **hi);
  *cnt = malloc((size_t)n * sizeof **cnt);
  if (!*lo || !*hi || !*cnt)
    return 0;
  size_t i = 0;
  const cJSON *b;
  cJSON_ArrayForEach(b, h) {
    double l = num(b, "lo_ms"), u = num(b, "hi_ms"), c = num(b, "count");
    if (!isfinite(l) || !isfinite(u) || !isfinite(c) || u < l)
      return 0; /* malformed: fall back to the strip */
    (*lo)[i] = l;
    (*hi)[i] = u;
    (*cnt)[i] = c;
    i++;
  }
  return i;
}

static int waits_figure(FILE *f, const input *in, int many) {
  const cJSON *s = obj(in->root, "summary");
  double p50 = num(s, "wait_p50_ms"), p95 = num(s, "wait_p95_ms");
  double p99 = num(s, "wait_p99_ms"), mx = num(s, "wait_max_ms");
  if (!isfinite(p50) && !isfinite(p95) && !isfinite(p99) && !isfinite(mx))
    return 0;
  double steps = num(s, "steps"), wait = num(s, "wait_s");
  double mean = steps > 0 && isfinite(wait) ? 1e3 * wait / steps : NAN;
  double *lo, *hi, *cnt;
  size_t nb = read_histogram(s, &lo, &hi, &cnt);
  section_head(f, "Wait per step", in, many);
  fputs("<figure>\n", f);
  int rc;
  if (nb) {
    rc_hist h = {"Wait per step: histogram", "ms", lo, hi, cnt, nb,
                 p50, p95, p99};
    rc = rc_write_hist(f, &h);
    fputs("<figcaption>Histogram of the wait inside <code>next()</code> per "
          "measured step, from the JSON's buckets; p50, p95 and p99 are "
          "dashed lines.",
          f);
  } else {
    rc_strip st = {"Wait per step: percentiles", "ms", p50, p95, p99, mx,
                   mean};
    rc = rc_write_strip(f, &st);
    fputs("<figcaption>Percentile strip of the wait inside "
          "<code>next()</code> per measured step: the JSON has p50, p95, "
          "p99 and max but no histogram buckets, so this is drawn from "
          "those four values (log-bucket percentiles, within 1.6%).",
          f);
  }
  char a[32], b[32], c[32], d[32];
  fmt_num(a, sizeof a, p50, 3, "ms");
  fmt_num(b, sizeof b, p95, 3, "ms");
  fmt_num(c, sizeof c, p99, 3, "ms");
  fmt_num(d, sizeof d, mx, 3, "ms");
  escf(f, " p50 %s, p95 %s, p99 %s, max %s", a, b, c, d);
  if (isfinite(mean))
    escf(f, ", mean %.3f ms over %.0f steps", mean, steps);
  fputs(".</figcaption>\n</figure>\n", f);
  free(lo);
  free(hi);
  free(cnt);
  return rc;
}

static int stages_figure(FILE *f, const input *in, int many) {
  const cJSON *sa = arr(in->root, "stages");
  int n = sa ? cJSON_GetArraySize(sa) : 0;
  if (n <= 0)
    return 0;
  size_t nr = (size_t)n < 32 ? (size_t)n : 32;
  rc_row rows[32];
  double vals[32][2];
  char labels[32][48];
  double vmax = 0;
  size_t i = 0;
  const cJSON *st;
  cJSON_ArrayForEach(st, sa) {
    if (i == nr)
      break;
    double mean = num(st, "mean_us"), p95 = num(st, "p95_us");
    if (isfinite(p95) && p95 > vmax)
      vmax = p95;
    if (isfinite(mean) && mean > vmax)
      vmax = mean;
    i++;
  }
  int in_ms = vmax >= 1000;
  double scale = in_ms ? 1e-3 : 1;
  i = 0;
  cJSON_ArrayForEach(st, sa) {
    if (i == nr)
      break;
    const char *name = str(st, "name");
    double count = num(st, "count");
    snprintf(labels[i], sizeof labels[i], "%s%s", name ? name : "?",
             count == 0 ? " (none)" : "");
    vals[i][0] = num(st, "mean_us") * scale;
    vals[i][1] = num(st, "p95_us") * scale;
    rows[i] = (rc_row){labels[i], vals[i], count == 0, NULL};
    i++;
  }
  static const char *const seg[] = {"mean", "p95"};
  static const int colors[] = {RC_BLUE, RC_ORANGE};
  rc_bars c = {.title = "Time per sample in each stage",
               .x_label = in_ms ? "milliseconds per sample"
                                : "microseconds per sample",
               .unit = in_ms ? "ms" : "\xc2\xb5s",
               .stacked = 0,
               .seg_labels = seg,
               .seg_colors = colors,
               .n_seg = 2,
               .rows = rows,
               .n_rows = nr,
               .faded_label = "faded: stage not measured in this run"};
  section_head(f, "Stage breakdown", in, many);
  fputs("<figure>\n", f);
  int rc = rc_write_bars(f, &c);
  fputs("<figcaption>Per-sample time of each stage of the workers (read, "
        "decode, transform), the wait for a free batch slot and the copy: "
        "mean and p95.</figcaption>\n</figure>\n",
        f);
  fputs("<table>\n<tr><th class=\"l\">stage</th><th>samples</th>"
        "<th>total s</th><th>mean \xc2\xb5s</th><th>p95 \xc2\xb5s</th></tr>\n",
        f);
  cJSON_ArrayForEach(st, sa) {
    char cnt[32], tot[32], mean[32], p95[32];
    fmt_num(cnt, sizeof cnt, num(st, "count"), 0, NULL);
    fmt_num(tot, sizeof tot, num(st, "total_s"), 4, NULL);
    fmt_num(mean, sizeof mean, num(st, "mean_us"), 2, NULL);
    fmt_num(p95, sizeof p95, num(st, "p95_us"), 2, NULL);
    fputs("<tr><td class=\"l\">", f);
    esc(f, str(st, "name") ? str(st, "name") : "?");
    fputs("</td>", f);
    const char *cells[] = {cnt, tot, mean, p95};
    for (size_t ci = 0; ci < 4; ci++) {
      fputs("<td>", f);
      esc(f, cells[ci]);
      fputs("</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</table>\n", f);
  return rc;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sorted distinct finite values of key over the array, at most cap. */
static size_t distinct(const cJSON *a, const char *key, double *out,
                       size_t cap) {
  size_t n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) {
    double v = num(e, key);
    if (!isfinite(v))
      continue;
    size_t j;
    for (j = 0; j < n && out[j] != v; j++)
      ;
    if (j == n && n < cap)
      out[n++] = v;
  }
  qsort(out, n, sizeof *out, cmp_double);
  return n;
}

static void what_if_table(FILE *f, const input *in, int many) {
  const cJSON *d = obj(in->root, "diagnosis");
  const cJSON *wa = arr(d, "what_if");
  if (!wa || cJSON_GetArraySize(wa) == 0)
    return;
  double ws[64], ks[64];
  size_t nw = distinct(wa, "workers", ws, 64);
  size_t nk = distinct(wa, "prefetch", ks, 64);
  if (!nw || !nk)
    return;
  const cJSON *cfg = obj(in->root, "config");
  double now_w = num(cfg, "workers"), now_k = num(cfg, "prefetch");
  const cJSON *a0 = cJSON_GetArrayItem(arr(d, "advice"), 0);
  double adv_w = num(a0, "workers"), adv_k = num(a0, "prefetch");
  double best = INFINITY;
  const cJSON *e;
  cJSON_ArrayForEach(e, wa) {
    double v = num(e, "epoch_s");
    if (isfinite(v) && v < best)
      best = v;
  }
  section_head(f, "What if: predicted epoch time", in, many);
  fputs("<table>\n<tr><th>workers \\ prefetch</th>", f);
  for (size_t j = 0; j < nk; j++)
    fprintf(f, "<th>%.0f</th>", ks[j]);
  fputs("</tr>\n", f);
  for (size_t i = 0; i < nw; i++) {
    fprintf(f, "<tr><th>%.0f</th>", ws[i]);
    for (size_t j = 0; j < nk; j++) {
      const cJSON *hit = NULL;
      cJSON_ArrayForEach(e, wa) {
        if (num(e, "workers") == ws[i] && num(e, "prefetch") == ks[j]) {
          hit = e;
          break;
        }
      }
      if (!hit) {
        fputs("<td>-</td>", f);
        continue;
      }
      double ep = num(hit, "epoch_s"), step = num(hit, "step_ns");
      int now = ws[i] == now_w && ks[j] == now_k;
      int adv = ws[i] == adv_w && ks[j] == adv_k;
      int good = isfinite(ep) && ep <= best * 1.01;
      fprintf(f, "<td class=\"%s%s%s\">", now ? "now " : "",
              adv ? "adv " : "", good ? "good" : "");
      char a[32], b[32];
      fmt_num(a, sizeof a, ep, 4, "s");
      fmt_num(b, sizeof b, step / 1e6, 2, "ms");
      esc(f, a);
      fputs("<br><small>", f);
      escf(f, "step %s, %s", b, str(hit, "bound") ? str(hit, "bound") : "");
      fputs("</small>", f);
      if (now)
        fputs(" *", f);
      fputs("</td>", f);
    }
    fputs("</tr>\n", f);
  }
  fputs("</table>\n<p class=\"note\">The queue model's prediction for each "
        "worker count and prefetch depth: epoch seconds, then the step and "
        "the term that bounds it. Outlined, with *: this run. Blue: the "
        "first advice. Green: within 1% of the fastest.</p>\n",
        f);
}

/* ---- per tune: curve and table ------------------------------------------- */

/* svg.c's palette, mapped to the Okabe-Ito colours of the rest of the
** page (each pair has the same length, so the text is patched in place). */
static void recolour(char *s) {
  static const char *const map[][2] = {
      {"#1f77b4", "#0072B2"}, {"#d62728", "#D55E00"}, {"#2ca02c", "#009E73"},
      {"#9467bd", "#CC79A7"}, {"#ff7f0e", "#E69F00"}, {"#17becf", "#56B4E9"},
      {"#8c564b", "#000000"}, {"#e377c2", "#F0E442"}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    for (char *p = strstr(s, map[i][0]); p; p = strstr(p + 7, map[i][0]))
      memcpy(p, map[i][1], 7);
}

static int tune_curve(FILE *f, const input *in) {
  const cJSON *pa = arr(in->root, "points");
  const cJSON *k = obj(in->root, "knee");
  size_t n = (size_t)cJSON_GetArraySize(pa), i = 0;
  svg_tune_point *sp = malloc((n + 1) * sizeof *sp);
  if (!sp) {
    return -1;
  }
  size_t n_measured = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, pa) {
    const char *status = str(p, "status");
    svg_tune_point *t = &sp[i++];
    *t = (svg_tune_point){0, num(p, "workers"), num(p, "batch_size"),
                          num(p, "prefetch"), num(p, "samples_per_s"),
                          num(p, "wait_ratio")};
    t->measured = (!status || strcmp(status, "measured") == 0) &&
                  isfinite(t->samples_per_s) && isfinite(t->workers);
    n_measured += t->measured;
  }
  if (!n_measured) {
    free(sp);
    return 0;
  }
  double ki = k ? num(k, "index") : NAN;
  size_t knee = isfinite(ki) && ki >= 0 ? (size_t)ki : n;
  char mark[128] = "knee";
  if (k && str(k, "flags"))
    snprintf(mark, sizeof mark, "knee: %s", str(k, "flags"));
  const cJSON *c = obj(in->root, "config");
  char subtitle[192];
  if (str(c, "data"))
    snprintf(subtitle, sizeof subtitle, "images %s x %.0f samples, step %s",
             str(c, "data"), num(c, "samples"),
             str(c, "compute") ? str(c, "compute") : "?");
  else
    snprintf(subtitle, sizeof subtitle,
             "synthetic %s x %.0f samples, step %s",
             str(c, "synthetic") ? str(c, "synthetic") : "?",
             num(c, "samples"), str(c, "compute") ? str(c, "compute") : "?");
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) {
    free(sp);
    return -1;
  }
  int bad = svg_write_tune(m, sp, n, knee,
                           "Throughput and waiting against workers",
                           subtitle, mark) != 0;
  bad |= fclose(m) != 0;
  free(sp);
  if (bad || !buf) {
    free(buf);
    return -1;
  }
  recolour(buf);
  /* Inline SVG in HTML takes no XML prolog. */
  const char *body = buf;
  if (strncmp(body, "<?xml", 5) == 0) {
    const char *nl = strchr(body, '\n');
    body = nl ? nl + 1 : body;
  }
  fputs("<figure>\n", f);
  fputs(body, f);
  fputs("<figcaption>Solid lines: throughput (left axis); dashed lines, "
        "hollow markers: the share of the step spent waiting (right axis). "
        "One colour per prefetch depth; the circled point is the knee, the "
        "cheapest configuration within the tolerance of the best."
        "</figcaption>\n</figure>\n",
        f);
  free(buf);
  return 0;
}

static void tune_table(FILE *f, const input *in) {
  const cJSON *pa = arr(in->root, "points");
  const cJSON *k = obj(in->root, "knee");
  int ki = k ? (int)num(k, "index") : -1;
  int bi = k ? (int)num(k, "best_index") : -1;
  double best = num(k, "best_samples_per_s");
  fputs("<table>\n<tr><th>workers</th><th>prefetch</th><th>batch</th>"
        "<th>samples/s</th><th>of best</th><th>waiting</th>"
        "<th class=\"l\">verdict</th><th>host memory</th>"
        "<th class=\"l\"></th></tr>\n",
        f);
  int i = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, pa) {
    const char *status = str(p, "status");
    int measured = !status || strcmp(status, "measured") == 0;
    char sps[32], ofb[32], wr[32], mem[32];
    fmt_num(sps, sizeof sps, num(p, "samples_per_s"), 1, NULL);
    fmt_pct(ofb, sizeof ofb, num(p, "samples_per_s") / best);
    fmt_pct(wr, sizeof wr, num(p, "wait_ratio"));
    fmt_bytes(mem, sizeof mem, num(p, "host_bytes"));
    const char *cls = i == ki ? " class=\"knee\""
                      : i == bi ? " class=\"best\""
                      : !measured ? " class=\"skip\""
                                  : "";
    fprintf(f, "<tr%s>", cls);
    fprintf(f, "<td>%.0f</td><td>%.0f</td><td>%.0f</td>", num(p, "workers"),
            num(p, "prefetch"), num(p, "batch_size"));
    if (measured) {
      fputs("<td>", f);
      esc(f, sps);
      fputs("</td><td>", f);
      esc(f, ofb);
      fputs("</td><td>", f);
      esc(f, wr);
      fputs("</td><td class=\"l\">", f);
      esc(f, str(p, "verdict") ? str(p, "verdict") : "-");
    } else {
      fputs("<td>-</td><td>-</td><td>-</td><td class=\"l\">", f);
      esc(f, strcmp(status, "over_budget") == 0 ? "skipped: over budget"
                                                 : status);
    }
    fputs("</td><td>", f);
    esc(f, mem);
    fprintf(f, "</td><td class=\"l\">%s</td></tr>\n",
            i == ki ? "\xe2\x86\x90 knee" : i == bi ? "best" : "");
    i++;
  }
  fputs("</table>\n", f);
}

/* ---- the page ------------------------------------------------------------ */

/* The online autotuner's decisions of a run (-j auto), when it ran. */
static void autotune_block(FILE *f, const input *in, int many) {
  const cJSON *a = obj(in->root, "autotune");
  const cJSON *ds = a ? arr(a, "decisions") : NULL;
  if (!a)
    return;
  section_head(f, "Online autotuning", in, many);
  fputs("<p>", f);
  escf(f, "Ended at %.0f workers, prefetch %.0f (at most %.0f and %.0f; "
          "CPU budget %.1f cores): %.0f changes, %.0f rolled back.",
       num(a, "workers"), num(a, "prefetch"), num(a, "max_workers"),
       num(a, "max_prefetch"), num(a, "cpu_budget"), num(a, "changes"),
       num(a, "rollbacks"));
  fputs("</p>\n", f);
  if (!ds || cJSON_GetArraySize(ds) == 0)
    return;
  fputs("<ol class=\"decisions\">\n", f);
  const cJSON *d;
  cJSON_ArrayForEach(d, ds) {
    const char *t = str(d, "text");
    fputs("<li>", f);
    esc(f, t ? t : "?");
    fputs("</li>\n", f);
  }
  fputs("</ol>\n", f);
}

static int write_page(FILE *f, const input *ins, size_t n) {
  size_t n_run = 0, n_tune = 0;
  for (size_t i = 0; i < n; i++)
    ins[i].kind == K_TUNE ? n_tune++ : n_run++;
  const char *first_verdict = NULL;
  for (size_t i = 0; i < n && !first_verdict; i++)
    if (ins[i].kind != K_TUNE)
      first_verdict = verdict_of(&ins[i]);

  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
        "<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, "
        "initial-scale=1\">\n<title>stoke report",
        f);
  if (first_verdict) {
    fputs(": ", f);
    esc(f, first_verdict);
  }
  fputs("</title>\n<style>", f);
  fputs(css, f);
  fputs("</style>\n</head>\n<body>\n<main>\n", f);
  write_header(f, ins, n);

  fputs("<h2>Verdict and advice</h2>\n", f);
  for (size_t i = 0; i < n; i++)
    if (ins[i].kind != K_TUNE)
      verdict_block(f, &ins[i], n_run > 1);
  for (size_t i = 0; i < n; i++)
    if (ins[i].kind == K_TUNE)
      knee_block(f, &ins[i], n_tune > 1);

  for (size_t i = 0; i < n; i++) {
    if (ins[i].kind == K_TUNE)
      continue;
    if (epochs_figure(f, &ins[i], n_run > 1) < 0 ||
        waits_figure(f, &ins[i], n_run > 1) < 0 ||
        stages_figure(f, &ins[i], n_run > 1) < 0)
      return -1;
    what_if_table(f, &ins[i], n_run > 1);
    autotune_block(f, &ins[i], n_run > 1);
  }
  for (size_t i = 0; i < n; i++) {
    if (ins[i].kind != K_TUNE)
      continue;
    section_head(f, "Tune: throughput against workers", &ins[i], n_tune > 1);
    if (tune_curve(f, &ins[i]) < 0)
      return -1;
    tune_table(f, &ins[i]);
  }
  char now[64];
  fmt_time(now, sizeof now, time(NULL));
  fputs("<footer>Made by <code>stoke report</code> ", f);
  esc(f, stoke_version());
  escf(f, " on %s. Self-contained: no script, no network.", now);
  fputs("</footer>\n", f);
  fputs("</main>\n</body>\n</html>\n", f);
  return 0;
}

/* ---- the page ------------------------------------------------------------ */

int report_html_write(const char *const *paths, size_t n,
                      const char *out_path, report_err *e) {
  input *ins = calloc(n + 1, sizeof *ins);
  if (!ins) {
    report_errorf(e, "%s", stoke_strerror(STOKE_ENOMEM));
    return -1;
  }
  int rc = -1;
  for (size_t i = 0; i < n; i++)
    ins[i].path = paths[i];
  /* Read everything first: a bad input leaves no page behind. */
  for (size_t i = 0; i < n; i++)
    if (load(&ins[i], e) != 0)
      goto out;
  int to_stdout = strcmp(out_path, "-") == 0;
  FILE *f = to_stdout ? stdout : fopen(out_path, "w");
  if (!f) {
    report_errorf(e, "cannot write '%s': %s", out_path, strerror(errno));
    goto out;
  }
  if (write_page(f, ins, n) != 0) {
    report_errorf(e, "%s", stoke_strerror(STOKE_ENOMEM));
    if (!to_stdout)
      fclose(f);
    goto out;
  }
  int bad = ferror(f) != 0;
  bad |= to_stdout ? fflush(f) != 0 : fclose(f) != 0;
  if (bad)
    report_errorf(e, "cannot write '%s': %s", out_path, strerror(errno));
  else
    rc = 0;
out:
  for (size_t i = 0; i < n; i++)
    cJSON_Delete(ins[i].root);
  free(ins);
  return rc;
}
