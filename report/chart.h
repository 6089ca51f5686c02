/* chart.h — the charts of "stoke report", drawn as inline SVG
** fragments (an <svg> element, no XML prolog) for an HTML page: horizontal
** bars (stacked or grouped), a percentile strip and a histogram.
**
** Every chart has axes, ticks, units and a legend, uses the Okabe-Ito
** colour-blind-safe palette, escapes every string it writes and treats a
** negative, NaN or infinite value as 0 (absent), so that bad input draws an
** empty bar rather than a broken document. */
#ifndef STOKE_REPORT_CHART_H
#define STOKE_REPORT_CHART_H

#include <stddef.h>
#include <stdio.h>

/* Okabe-Ito colours, by role. */
enum {
  RC_BLUE = 0,   /* #0072B2 */
  RC_VERMILION,  /* #D55E00 */
  RC_GREEN,      /* #009E73 */
  RC_ORANGE,     /* #E69F00 */
  RC_SKY,        /* #56B4E9 */
  RC_PURPLE,     /* #CC79A7 */
  RC_YELLOW,     /* #F0E442 */
  RC_BLACK,      /* #000000 */
  RC_N_COLORS
};
const char *rc_color(int c);

/* Write s escaped for HTML or XML text and attribute values (&, <, >, ",
** '); control characters other than tab and newline are dropped. */
void rc_escape(FILE *f, const char *s);
/* <text> at (x, y) with text-anchor `anchor`, extra attributes (or NULL)
** and the escaped string s. */
void rc_text(FILE *f, double x, double y, const char *anchor,
             const char *extra, const char *s);

/* A "nice" axis maximum and step for values up to v (1, 2, 2.5, 5 x 10^k,
** about five steps), one step more when the top value would come within
** headroom (a share of v) of the frame.  Shared by chart.c and the tune
** plot (tune_chart.c). */
void rc_nice_axis(double v, double headroom, double *max, double *step);

typedef struct rc_row {
  const char *label; /* left of the bar */
  const double *v;   /* n_seg values in the chart's unit */
  int faded;         /* drawn lighter and labelled, e.g. a warm-up epoch */
  const char *note;  /* right of the bar (stacked charts); NULL: none */
} rc_row;

typedef struct rc_bars {
  const char *title;
  const char *x_label;  /* with its unit: "seconds" */
  const char *unit;     /* appended to value labels: "s", "ms"; "" none */
  int stacked;          /* 1: segments end to end; 0: grouped, one thin bar
                        ** per segment, each labelled with its value */
  const char *const *seg_labels; /* legend, n_seg entries */
  const int *seg_colors;         /* RC_* per segment */
  size_t n_seg;
  const rc_row *rows;
  size_t n_rows;
  const char *faded_label; /* legend text for faded rows; NULL: none */
} rc_bars;

int rc_write_bars(FILE *f, const rc_bars *c);

/* A percentile strip: the range 0..max on a linear axis, a box from p50 to
** p95, a whisker to p99 and a tick at max, each value labelled.  Values in
** `unit`; NaN: absent. */
typedef struct rc_strip {
  const char *title;
  const char *unit; /* "ms" */
  double p50, p95, p99, max, mean;
} rc_strip;

int rc_write_strip(FILE *f, const rc_strip *c);

/* A histogram of counts over buckets [lo[i], hi[i]) in `unit`, with the
** percentiles (NaN: absent) marked as vertical lines. */
typedef struct rc_hist {
  const char *title;
  const char *unit;
  const double *lo, *hi, *count;
  size_t n;
  double p50, p95, p99;
} rc_hist;

int rc_write_hist(FILE *f, const rc_hist *c);

#endif /* STOKE_REPORT_CHART_H */
