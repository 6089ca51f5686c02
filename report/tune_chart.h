/* tune_chart.h — a small, self-contained SVG line chart (no dependency, no script,
** no external font or stylesheet): categories on x, a left y axis and an
** optional right axis in percent, solid and dashed series, one marked
** point.  Used by "stoke tune --svg". */
#ifndef STOKE_REPORT_TUNE_CHART_H
#define STOKE_REPORT_TUNE_CHART_H

#include <stddef.h>
#include <stdio.h>

typedef struct svg_series {
  const char *label;  /* legend text (escaped when written) */
  const double *y;    /* n_x values; NaN = no point at that category */
  int right_axis;     /* 1: plotted against the right axis */
  int dashed;         /* 1: dashed line, hollow markers */
  int color;          /* palette index; series of one family share it */
} svg_series;

typedef struct svg_chart {
  const char *title;
  const char *subtitle;      /* NULL: none */
  const char *x_label;
  const char *y_label;       /* left axis */
  const char *y2_label;      /* right axis, 0..y2_max; NULL: no right axis */
  double y2_max;
  const char *const *x_ticks; /* n_x category labels, evenly spaced */
  size_t n_x;
  const svg_series *series;
  size_t n_series;
  int has_mark;              /* 1: circle and label one point */
  size_t mark_x;
  double mark_y;             /* on the left axis */
  const char *mark_label;
} svg_chart;

/* Write the chart as a complete SVG document.  0, or -1 on a write error. */
int svg_write_chart(FILE *f, const svg_chart *c);

/* One point of a tune sweep, as "stoke tune" measures it and its JSON
** holds it. */
typedef struct svg_tune_point {
  int measured;           /* 0: skipped or failed, not drawn */
  double workers, batch_size, prefetch;
  double samples_per_s, wait_ratio;
} svg_tune_point;

/* The tune plot, for "stoke tune --svg" and "stoke report": one solid
** throughput line and one dashed wait line per (batch size, prefetch)
** family against the worker counts measured; point `knee` (an index into
** pts; n or more: none) circled with mark_label.  0; -1 on a write error
** or when out of memory (after a message). */
int svg_write_tune(FILE *f, const svg_tune_point *pts, size_t n, size_t knee,
                   const char *title, const char *subtitle,
                   const char *mark_label);

#endif /* STOKE_REPORT_TUNE_CHART_H */
