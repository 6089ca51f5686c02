/* cmd_top.c — "stoke top": the loaders that publish their statistics
** (stoke_live_list), and a live view of one of them.
**
** It only reads: each refresh lists the user's snapshot files, keeps the
** followed loader's snapshots of the last --window seconds, and draws the
** figures between the oldest of them and the newest (top_window.c), the
** verdict as it goes and the autotuner's last decisions, in 80x24.  On a
** terminal it redraws every --interval until q or Ctrl-C; with --once, or
** when stdout is not a terminal, it prints one frame (from two snapshots
** --interval apart) and exits. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

const char cmd_top_usage[] =
    "usage: stoke top [PID[:ID]] [--once] [--interval S] [--window S]\n"
    "\n"
    "Without PID, list this user's running loaders that publish their\n"
    "statistics: stoke's loaders (the tool, the C library, stoke.Loader,\n"
    "stoke.DataLoader) and two-clocks (stoke.TwoClock, the doctor), run\n"
    "with STOKE_PUBLISH=1.  With PID, follow that process's loader (ID\n"
    "picks one of several): over the last --window seconds, the\n"
    "waiting/computing split, the wait's p50 and p95, the ready queue, the\n"
    "time per stage, the workers busy and waiting, the machine's other\n"
    "load beside it (since the warm-up), the remote fetch stage (bytes/s,\n"
    "request p50 and p95, retries, throttled answers, since the start),\n"
    "the verdict as it goes and the autotuner's decisions.\n"
    "\n"
    "On a terminal it redraws every --interval seconds until q or Ctrl-C;\n"
    "with --once, or when the output is not a terminal, it prints one\n"
    "frame and exits (the window: two snapshots --interval apart).  The\n"
    "snapshots are in $XDG_RUNTIME_DIR/stoke/ (else /dev/shm/stoke-UID/).\n"
    "\n"
    "options\n"
    "  --once                 print one frame and exit\n"
    "  --interval S           seconds between refreshes (default 1)\n"
    "  --window S             seconds the figures cover (default 10)\n"
    "  -h, --help             this text\n";

enum { O_ONCE = 1, O_INTERVAL, O_WINDOW, O_HELP };

#define TOP_COLS 80
#define TOP_ROWS 24
#define MAX_LOADERS 64
/* Verdict changes remembered while following. */
#define MAX_CHANGES 4

typedef struct top_opts {
  int once;
  double interval_s, window_s;
  int pid;
  int id; /* -1: the process's first */
} top_opts;

/* ---- the frame: at most TOP_ROWS lines of at most TOP_COLS - 1 columns -- */

typedef struct frame {
  char line[TOP_ROWS][TOP_COLS];
  int n;
} frame;

static void add(frame *f, const char *fmt, ...) CLI_PRINTF(2, 3);
static void add(frame *f, const char *fmt, ...) {
  if (f->n >= TOP_ROWS - 1) return; /* the last row stays for the cursor */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->line[f->n++], TOP_COLS, fmt, ap);
  va_end(ap);
}

static void frame_print(const frame *f, int clear) {
  if (clear) fputs("\033[H\033[J", stdout);
  for (int i = 0; i < f->n; i++) printf("%s\n", f->line[i]);
  fflush(stdout);
}

/* text after prefix, wrapped at spaces onto at most max_lines lines (the
** next ones indented by two), the last one cut. */
static void add_wrapped(frame *f, const char *prefix, const char *text,
                        int max_lines) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s%s", prefix, text);
  const char *p = buf;
  for (int i = 0; i < max_lines && *p; i++) {
    const char *lead = i ? "  " : "";
    size_t room = TOP_COLS - 1 - strlen(lead), len = strlen(p);
    if (len > room && i + 1 < max_lines) {
      len = room;
      while (len > room / 2 && p[len] != ' ') len--;
      if (p[len] != ' ') len = room;
    }
    add(f, "%s%.*s", lead, (int)len, p);
    p += len;
    while (*p == ' ') p++;
  }
}

/* "850 ns", "12.3 us", "4.56 ms", "1.23 s". */
static void fmt_ns(double ns, char *buf, size_t n) {
  if (ns < 1e3)
    snprintf(buf, n, "%.0f ns", ns);
  else if (ns < 1e6)
    snprintf(buf, n, "%.3g us", ns / 1e3);
  else if (ns < 1e9)
    snprintf(buf, n, "%.3g ms", ns / 1e6);
  else
    snprintf(buf, n, "%.3g s", ns / 1e9);
}

static void bar(double frac, char *buf, int width) {
  int fill = (int)(frac * width + 0.5);
  if (fill > width) fill = width;
  if (fill < 0) fill = 0;
  for (int i = 0; i < width; i++) buf[i] = i < fill ? '#' : '.';
  buf[width] = '\0';
}

/* ---- the list ------------------------------------------------------------ */

/* The command line with its program's folder left out: "stoke bench ...". */
static const char *short_command(const char *cmd) {
  const char *end = strchr(cmd, ' '), *p = cmd;
  for (const char *q = cmd; *q && (!end || q < end); q++)
    if (*q == '/') p = q + 1;
  return p;
}

static void list_frame(const stoke_live *v, size_t n, frame *f) {
  if (n == 0) {
    add(f, "no loader is publishing (run one with STOKE_PUBLISH=1)");
    return;
  }
  add(f, "%zu loader%s publishing; 'stoke top PID' follows one", n,
      n == 1 ? "" : "s");
  add(f, "%7s %3s %-8s %9s %5s %6s %-9s %s", "PID", "ID", "KIND", "STEPS",
      "EPOCH", "WAIT", "VERDICT", "COMMAND");
  for (size_t i = 0; i < n; i++) {
    stoke_diagnosis d;
    stoke_diagnose(&v[i].stats, &d);
    add(f, "%7d %3u %-8s %9llu %5llu %5.1f%% %-9s %s", v[i].pid, v[i].id,
        stoke_live_kind_name(v[i].kind), (unsigned long long)v[i].stats.steps,
        (unsigned long long)v[i].stats.epochs_done,
        100 * v[i].stats.wait_ratio, stoke_verdict_name(d.verdict),
        short_command(v[i].command));
  }
}

/* ---- following one loader ------------------------------------------------ */

typedef struct follow {
  stoke_live *ring;  /* its snapshots, oldest first */
  size_t n, cap;
  int verdicts[MAX_CHANGES];    /* the verdict's last changes, oldest first */
  int64_t since_ns[MAX_CHANGES];
  int n_changes;
} follow;

/* The followed loader's snapshot now: 0, or -1 when it is gone. */
static int read_followed(const top_opts *o, stoke_live *out) {
  stoke_live *v = calloc(MAX_LOADERS, sizeof *v);
  if (!v) return -1;
  size_t n = stoke_live_list(o->pid, v, MAX_LOADERS);
  int rc = -1;
  for (size_t i = 0; i < n && rc != 0; i++)
    if (o->id < 0 || v[i].id == (unsigned)o->id) {
      *out = v[i];
      rc = 0;
    }
  free(v);
  return rc;
}

/* Keep snap, dropping what the window no longer needs (one snapshot older
** than the window stays: the window's start). */
static void follow_add(follow *fw, const stoke_live *snap, double window_s) {
  if (fw->n && fw->ring[fw->n - 1].publishes == snap->publishes) return;
  int64_t start = snap->time_ns - (int64_t)(window_s * 1e9);
  size_t drop = 0;
  while (drop + 1 < fw->n && fw->ring[drop + 1].time_ns <= start) drop++;
  if (fw->n == fw->cap && drop == 0) drop = 1;
  memmove(fw->ring, fw->ring + drop, (fw->n - drop) * sizeof *fw->ring);
  fw->n -= drop;
  fw->ring[fw->n++] = *snap;
}

static void note_verdict(follow *fw, int verdict, int64_t now_ns) {
  if (fw->n_changes && fw->verdicts[fw->n_changes - 1] == verdict) return;
  if (fw->n_changes == MAX_CHANGES) {
    memmove(fw->verdicts, fw->verdicts + 1, sizeof fw->verdicts[0] * 3);
    memmove(fw->since_ns, fw->since_ns + 1, sizeof fw->since_ns[0] * 3);
    fw->n_changes--;
  }
  fw->verdicts[fw->n_changes] = verdict;
  fw->since_ns[fw->n_changes++] = now_ns;
}

static void producer_lines(const stoke_live *s, const top_window *w,
                           frame *f) {
  const stoke_stats *st = &w->stats;
  /* A two-clock sees no producer, unless its caller fed it the stages
  ** (stoke.DataLoader's worker processes). */
  if (s->kind == STOKE_LIVE_TWOCLOCK && !st->worker_processes) {
    add(f, "producer: not seen (a two-clock times another loader's loop)");
    return;
  }
  if (st->n_workers == 0)
    add(f, "workers: none (-j 0: next() makes each batch; busy %.0f%%)",
        100 * w->busy_frac);
  else
    add(f, "workers %u%s: busy %.0f%%, waiting for a slot %.0f%%, idle "
           "%.0f%%",
        st->n_workers,
        st->autotune ? " (autotuned)"
                     : st->worker_processes ? " (processes)" : "",
        100 * w->busy_frac, 100 * w->slot_wait_frac, 100 * w->idle_frac);
  char text[TOP_COLS * 2] = "per sample:";
  size_t len = strlen(text);
  int any = 0;
  for (int k = 0; k < STOKE_STAGE_COUNT; k++) {
    if (k == STOKE_STAGE_SLOT_WAIT || st->stage[k].count == 0) continue;
    char t[32];
    fmt_ns((double)st->stage[k].mean_ns, t, sizeof t);
    int m = snprintf(text + len, sizeof text - len, " %s %s",
                     stoke_stage_name(k), t);
    if (m < 0 || len + (size_t)m >= TOP_COLS - 1) {
      text[len] = '\0';
      add(f, "%s", text);
      len = (size_t)snprintf(text, sizeof text, "           %s %s",
                             stoke_stage_name(k), t);
    } else {
      len += (size_t)m;
    }
    any = 1;
  }
  if (any) add(f, "%s", text);
}

/* The machine's other load beside the loader, moved or not (a frame's
** figures hold for the cores the loader had), and the remote fetch stage
** where there is one (top_window.c). */
static void outside_and_fetch_lines(const stoke_stats *st, frame *f) {
  char text[TOP_COLS * 2];
  top_outside_line(st, sysconf(_SC_NPROCESSORS_ONLN), text, sizeof text);
  add(f, "%s", text);
  if (top_fetch_line(st, text, sizeof text)) add(f, "%s", text);
  if (top_rcache_line(st, text, sizeof text)) add(f, "%s", text);
}

static void follow_frame(const follow *fw, const top_window *w,
                         int64_t now_ns, frame *f) {
  const stoke_live *s = &fw->ring[fw->n - 1];
  const stoke_stats *st = &w->stats;
  add(f, "stoke top: pid %d, %s %u%s", s->pid, stoke_live_kind_name(s->kind),
      s->id, isatty(STDOUT_FILENO) ? "  (q quits)" : "");
  add(f, "%s", s->command);
  char t1[32], t2[32], t3[32];
  if (st->steps == 0) {
    add(f, "over the last %.1f s: no measured step (%s)", w->seconds,
        s->stats.steps == 0 ? "the warm-up is running"
                            : "the loop is stalled or between epochs");
  } else {
    add(f, "over the last %.1f s%s: %llu steps, %.0f samples/s, epoch %llu",
        w->seconds, w->restarted ? " (since the warm-up)" : "",
        (unsigned long long)st->steps, (double)st->samples / w->seconds,
        (unsigned long long)st->epochs_done);
    char b[41];
    bar(st->wait_ratio, b, 40);
    add(f, "waiting %5.1f%%  computing %5.1f%%  [%s]", 100 * st->wait_ratio,
        100 * (1 - st->wait_ratio), b);
    fmt_ns((double)st->wait.p50_ns, t1, sizeof t1);
    fmt_ns((double)st->wait.p95_ns, t2, sizeof t2);
    fmt_ns((double)(st->wait.mean_ns + st->compute.mean_ns), t3, sizeof t3);
    add(f, "wait p50 %s, p95 %s; step %s", t1, t2, t3);
    add(f, "queue: mean depth %.1f of prefetch %u, empty at %.0f%% of steps",
        st->queue_mean_depth, st->prefetch, 100 * st->queue_empty_frac);
  }
  producer_lines(s, w, f);
  outside_and_fetch_lines(&s->stats, f);
  add_wrapped(f, "verdict: ", w->diagnosis.reason, 2);
  if (fw->n_changes > 1) {
    char text[TOP_COLS * 2] = "verdict so far:";
    size_t len = strlen(text);
    for (int i = 0; i < fw->n_changes && len < sizeof text; i++)
      len += (size_t)snprintf(text + len, sizeof text - len,
                              " %s (%.0f s ago)%s",
                              stoke_verdict_name(fw->verdicts[i]),
                              (double)(now_ns - fw->since_ns[i]) / 1e9,
                              i + 1 < fw->n_changes ? "," : "");
    add(f, "%s", text);
  }
  if (s->stats.autotune || s->n_autotune) {
    add(f, "autotune: %llu decision%s, %llu change%s, %llu rollback%s",
        (unsigned long long)s->n_autotune, s->n_autotune == 1 ? "" : "s",
        (unsigned long long)s->stats.autotune_changes,
        s->stats.autotune_changes == 1 ? "" : "s",
        (unsigned long long)s->stats.autotune_rollbacks,
        s->stats.autotune_rollbacks == 1 ? "" : "s");
    /* The newest ones that fit. */
    unsigned first = s->n_events;
    while (first > 0 && f->n + (int)(s->n_events - first) < TOP_ROWS - 1)
      first--;
    for (unsigned i = first; i < s->n_events; i++)
      add(f, "  %s", s->events[i].text);
  }
}

/* ---- the terminal -------------------------------------------------------- */

static volatile sig_atomic_t top_stop;
static void on_signal(int sig) {
  (void)sig;
  top_stop = 1;
}

typedef struct term {
  int raw;
  struct termios saved;
} term;

static void term_enter(term *t) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal; /* no SA_RESTART: poll() returns at once */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  t->raw = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0;
  if (t->raw) {
    struct termios r = t->saved;
    r.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    r.c_cc[VMIN] = 0;
    r.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSANOW, &r);
  }
}

static void term_leave(term *t) {
  if (t->raw) tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

/* Wait up to seconds for a key: 1 when it asks to quit. */
static int wait_key(double seconds) {
  struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
  if (poll(&p, 1, (int)(seconds * 1000)) > 0 && (p.revents & POLLIN)) {
    char c;
    if (read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q')) return 1;
  }
  return top_stop;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !top_stop) {
  }
}

/* ---- the command --------------------------------------------------------- */

static int run_list(const top_opts *o, int live) {
  stoke_live *v = calloc(MAX_LOADERS, sizeof *v);
  if (!v) {
    cli_error("%s", stoke_strerror(STOKE_ENOMEM));
    return CLI_ERROR;
  }
  do {
    frame f = {.n = 0};
    size_t n = stoke_live_list(0, v, MAX_LOADERS);
    list_frame(v, n, &f);
    frame_print(&f, live);
  } while (live && !wait_key(o->interval_s));
  free(v);
  return CLI_OK;
}

static int run_follow(const top_opts *o, int live) {
  follow fw = {.cap = (size_t)(o->window_s / o->interval_s) + 2};
  fw.ring = calloc(fw.cap, sizeof *fw.ring);
  stoke_live *snap = calloc(1, sizeof *snap);
  top_window *w = calloc(1, sizeof *w);
  int rc = CLI_OK;
  if (!fw.ring || !snap || !w) {
    cli_error("%s", stoke_strerror(STOKE_ENOMEM));
    rc = CLI_ERROR;
    goto out;
  }
  if (read_followed(o, snap) != 0) {
    cli_error("top: process %d publishes no %s (run it with "
              "STOKE_PUBLISH=1; 'stoke top' lists those that do)",
              o->pid, o->id < 0 ? "loader" : "loader of that ID");
    rc = CLI_ERROR;
    goto out;
  }
  follow_add(&fw, snap, o->window_s);
  if (!live) sleep_s(o->interval_s);
  for (;;) {
    if (read_followed(o, snap) != 0) {
      if (live) fputs("\033[H\033[J", stdout);
      printf("process %d: its loader is gone\n", o->pid);
      break;
    }
    follow_add(&fw, snap, o->window_s);
    top_window_make(&fw.ring[fw.n - 1], &fw.ring[0], w);
    note_verdict(&fw, w->diagnosis.verdict, snap->time_ns);
    frame f = {.n = 0};
    follow_frame(&fw, w, snap->time_ns, &f);
    frame_print(&f, live);
    if (!live || wait_key(o->interval_s)) break;
  }
out:
  free(fw.ring);
  free(snap);
  free(w);
  return rc;
}

/* PID or PID:ID. */
static int parse_target(const char *s, top_opts *o) {
  char *end;
  long pid = strtol(s, &end, 10);
  long id = -1;
  if (*end == ':') {
    char *e2;
    id = strtol(end + 1, &e2, 10);
    if (e2 == end + 1 || *e2 || id < 0) end = NULL;
    else end = e2;
  }
  if (!end || end == s || *end || pid <= 0 || pid > 0x7fffffffL) {
    cli_error("top: '%s' is not a PID or PID:ID", s);
    return -1;
  }
  o->pid = (int)pid;
  o->id = (int)id;
  return 0;
}

int cmd_top(int argc, char **argv) {
  static const cli_opt opts[] = {{"once", 0, 0, O_ONCE},
                                 {"interval", 0, 1, O_INTERVAL},
                                 {"window", 0, 1, O_WINDOW},
                                 {"help", 'h', 0, O_HELP},
                                 {NULL, 0, 0, 0}};
  cli_parser ps;
  cli_parser_init(&ps, argc, argv, "top");
  top_opts o = {.interval_s = 1, .window_s = 10, .id = -1};
  const char *v = NULL, *target = NULL;
  int id;
  while ((id = cli_next_opt(&ps, opts, &v)) != CLI_OPT_END) {
    if (id == CLI_OPT_ERROR) return CLI_USAGE;
    if (id == O_HELP) {
      fputs(cmd_top_usage, stdout);
      return CLI_OK;
    }
    if (id == O_ONCE) {
      o.once = 1;
    } else if (id == O_INTERVAL) {
      if (cli_parse_positive("--interval", v, &o.interval_s) != 0)
        return CLI_USAGE;
      if (o.interval_s < 0.1 || o.interval_s > 3600) {
        cli_error("--interval: %s s, expected 0.1 to 3600", v);
        return CLI_USAGE;
      }
    } else if (id == O_WINDOW) {
      if (cli_parse_positive("--window", v, &o.window_s) != 0)
        return CLI_USAGE;
      if (o.window_s > 86400) {
        cli_error("--window: %s s, expected at most 86400", v);
        return CLI_USAGE;
      }
    } else if (id == CLI_OPT_ARG) {
      if (target) {
        cli_error("top: one PID at most; see 'stoke help top'");
        return CLI_USAGE;
      }
      target = v;
    }
  }
  if (target && parse_target(target, &o) != 0) return CLI_USAGE;
  if (o.window_s < o.interval_s) o.window_s = o.interval_s;
  char dir[512];
  if (stoke_live_dir(dir, sizeof dir, 0) != 0 && !target) {
    /* No folder yet is no publisher yet; a folder we must not use is
    ** worth saying. */
    const char *why = stoke_errmsg(NULL);
    if (!strstr(why, "No such file")) {
      cli_error("top: %s", why);
      return CLI_ERROR;
    }
  }
  int live = !o.once && isatty(STDOUT_FILENO);
  term t = {0};
  if (live) term_enter(&t);
  int rc = target ? run_follow(&o, live) : run_list(&o, live);
  if (live) term_leave(&t);
  return rc;
}
