/* progress.c — the progress line of long commands (pack, inspect
** --verify): count, rate and ETA; a bar redrawn in place on a terminal, a
** line every 2 s otherwise (a log). */
#define _POSIX_C_SOURCE 200809L
#include <time.h>
#include <unistd.h>

#include "cli.h"

double cli_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_init(cli_progress *p, FILE *f, const char *what) {
  p->f = f;
  p->tty = f ? isatty(fileno(f)) : 0;
  p->t0 = cli_now_s();
  p->last = 0;
  p->what = what;
}

void cli_progress_show(cli_progress *p, size_t done, size_t total,
                       const char *bar_extra, const char *line_extra) {
  if (!p->f) return;
  double t = cli_now_s();
  if (done < total && t - p->last < (p->tty ? 0.1 : 2.0)) return;
  p->last = t;
  double el = t - p->t0, rate = el > 0 ? (double)done / el : 0;
  double eta = rate > 0 ? (double)(total - done) / rate : 0;
  if (p->tty) {
    int width = 30, fill = total ? (int)((double)width * done / total) : width;
    fprintf(p->f, "\r[%.*s%*s] %zu/%zu  %.0f img/s  %s%seta %.0fs ", fill,
            "##############################", width - fill, "", done, total,
            rate, bar_extra ? bar_extra : "", bar_extra ? "  " : "", eta);
    if (done == total) fputc('\n', p->f);
  } else {
    fprintf(p->f, "%s: %zu/%zu images, %.0f img/s, eta %.0fs%s%s\n", p->what,
            done, total, rate, eta, line_extra ? ", " : "",
            line_extra ? line_extra : "");
  }
  fflush(p->f);
}
