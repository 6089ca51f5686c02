/* tune_chart.c — hand-written SVG for the tune plot.
**
** The document is plain SVG 1.1: every element is closed, every text is
** escaped, no script and no external reference, so it renders the same in a
** browser, an image viewer or a notebook and parses as XML.  Layout is in
** fixed user units (a 760 x 460 viewBox) and scales with the viewer. */
#include "tune_chart.h"
#include "chart.h" /* rc_escape, rc_text, rc_nice_axis */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define W 760.0
#define H0 460.0 /* height with up to two legend rows */
#define LEFT 78.0
#define RIGHT 70.0
#define TOP 62.0
#define BOTTOM 110.0

static const char *const palette[] = {"#1f77b4", "#d62728", "#2ca02c",
                                      "#9467bd", "#ff7f0e", "#17becf",
                                      "#8c564b", "#e377c2"};
#define N_PALETTE (sizeof(palette) / sizeof(palette[0]))

static void fmt_tick(char *buf, size_t n, double v) {
  if (v >= 1e6)
    snprintf(buf, n, "%gM", v / 1e6);
  else if (v >= 1e4)
    snprintf(buf, n, "%gk", v / 1e3);
  else
    snprintf(buf, n, "%g", v);
}

int svg_write_chart(FILE *f, const svg_chart *c) {
  size_t rows = (c->n_series + 1) / 2;
  double H = H0 + (rows > 2 ? (double)(rows - 2) * 16 : 0);
  double pw = W - LEFT - RIGHT, ph = H0 - TOP - BOTTOM;
  double ymax_data = 0;
  for (size_t s = 0; s < c->n_series; s++)
    if (!c->series[s].right_axis)
      for (size_t i = 0; i < c->n_x; i++)
        if (isfinite(c->series[s].y[i]) && c->series[s].y[i] > ymax_data)
          ymax_data = c->series[s].y[i];
  double ymax, ystep;
  rc_nice_axis(ymax_data, 0.04, &ymax, &ystep);
  double y2max = c->y2_max > 0 ? c->y2_max : 100;
#define PX(i) (LEFT + (c->n_x > 1 ? pw * (double)(i) / (double)(c->n_x - 1) \
                                  : pw / 2))
#define PY(v) (TOP + ph - ph * ((v) / ymax))
#define PY2(v) (TOP + ph - ph * ((v) / y2max))

  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
             "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
             "font-family=\"sans-serif\" font-size=\"12\">\n",
          W, H, W, H);
  fputs("<title>", f);
  rc_escape(f, c->title);
  fputs("</title>\n", f);
  fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
             "fill=\"#ffffff\"/>\n", W, H);
  rc_text(f, W / 2, 24, "middle", "font-size=\"16\" font-weight=\"bold\"",
          c->title);
  if (c->subtitle)
    rc_text(f, W / 2, 44, "middle", "fill=\"#555555\"", c->subtitle);

  /* Grid and left axis ticks. */
  char buf[64];
  fputs("<g stroke=\"#e0e0e0\" stroke-width=\"1\">\n", f);
  for (double v = 0; v <= ymax * 1.0001; v += ystep)
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
            LEFT, PY(v), LEFT + pw, PY(v));
  fputs("</g>\n<g fill=\"#333333\">\n", f);
  for (double v = 0; v <= ymax * 1.0001; v += ystep) {
    fmt_tick(buf, sizeof buf, v);
    rc_text(f, LEFT - 8, PY(v) + 4, "end", NULL, buf);
  }
  if (c->y2_label)
    for (int i = 0; i <= 4; i++) {
      double v = y2max * i / 4.0;
      snprintf(buf, sizeof buf, "%g%%", v);
      rc_text(f, LEFT + pw + 8, PY2(v) + 4, "start", NULL, buf);
    }
  for (size_t i = 0; i < c->n_x; i++)
    rc_text(f, PX(i), TOP + ph + 18, "middle", NULL, c->x_ticks[i]);
  fputs("</g>\n", f);
  /* Axes and their labels. */
  fprintf(f, "<g stroke=\"#333333\" stroke-width=\"1\" fill=\"none\">\n"
             "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n"
             "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
          LEFT, TOP, LEFT, TOP + ph, LEFT, TOP + ph, LEFT + pw, TOP + ph);
  if (c->y2_label)
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
            LEFT + pw, TOP, LEFT + pw, TOP + ph);
  fputs("</g>\n", f);
  rc_text(f, LEFT + pw / 2, TOP + ph + 40, "middle", NULL, c->x_label);
  fprintf(f, "<text x=\"0\" y=\"0\" text-anchor=\"middle\" "
             "transform=\"translate(%.1f %.1f) rotate(-90)\">",
          18.0, TOP + ph / 2);
  rc_escape(f, c->y_label);
  fputs("</text>\n", f);
  if (c->y2_label) {
    fprintf(f, "<text x=\"0\" y=\"0\" text-anchor=\"middle\" "
               "transform=\"translate(%.1f %.1f) rotate(90)\">",
            W - 18.0, TOP + ph / 2);
    rc_escape(f, c->y2_label);
    fputs("</text>\n", f);
  }

  /* Series: a polyline through the defined points, then the markers. */
  for (size_t s = 0; s < c->n_series; s++) {
    const svg_series *se = &c->series[s];
    const char *col = palette[(size_t)se->color % N_PALETTE];
    fprintf(f, "<g stroke=\"%s\" fill=\"%s\">\n", col, col);
    fprintf(f, "<polyline fill=\"none\" stroke-width=\"2\"%s points=\"",
            se->dashed ? " stroke-dasharray=\"6 4\"" : "");
    int first = 1;
    for (size_t i = 0; i < c->n_x; i++) {
      double v = se->y[i];
      if (!isfinite(v)) continue;
      fprintf(f, "%s%.1f,%.1f", first ? "" : " ", PX(i),
              se->right_axis ? PY2(v) : PY(v));
      first = 0;
    }
    fputs("\"/>\n", f);
    for (size_t i = 0; i < c->n_x; i++) {
      double v = se->y[i];
      if (!isfinite(v)) continue;
      fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\"%s/>\n", PX(i),
              se->right_axis ? PY2(v) : PY(v),
              se->dashed ? " fill=\"#ffffff\" stroke-width=\"1.5\"" : "");
    }
    fputs("</g>\n", f);
  }

  if (c->has_mark && c->mark_x < c->n_x && isfinite(c->mark_y)) {
    double x = PX(c->mark_x), y = PY(c->mark_y);
    fprintf(f, "<g stroke=\"#000000\" fill=\"none\">\n"
               "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"9\" stroke-width=\"2\"/>\n"
               "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke-dasharray=\"2 3\"/>\n</g>\n",
            x, y, x, y + 9, x, TOP + ph);
    double ty = y - 16 < TOP + 4 ? y + 26 : y - 16;
    const char *anchor = c->mark_x + 1 == c->n_x && c->n_x > 1 ? "end"
                         : c->mark_x == 0                      ? "start"
                                                               : "middle";
    rc_text(f, x, ty, anchor, "font-weight=\"bold\"", c->mark_label);
  }

  /* Legend under the plot, two to a row: a family's solid and dashed
  ** series side by side. */
  double ly = TOP + ph + 62;
  for (size_t s = 0; s < c->n_series; s++) {
    const svg_series *se = &c->series[s];
    const char *col = palette[(size_t)se->color % N_PALETTE];
    double lx = LEFT + (double)(s % 2) * (pw / 2);
    double yy = ly + (double)(s / 2) * 16;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"%s\" stroke-width=\"2\"%s/>\n",
            lx, yy - 4, lx + 24, yy - 4, col,
            se->dashed ? " stroke-dasharray=\"6 4\"" : "");
    rc_text(f, lx + 30, yy, "start", NULL, se->label);
  }
  fputs("</svg>\n", f);
#undef PX
#undef PY
#undef PY2
  return ferror(f) ? -1 : 0;
}

/* ---- the tune plot ------------------------------------------------------- */

enum { TUNE_MAX_W = 256, TUNE_MAX_FAM = 64 };

typedef struct tune_fam {
  double batch, prefetch;
} tune_fam;

static size_t find_w(const double *ws, size_t nw, double w) {
  size_t j = 0;
  while (j < nw && ws[j] != w) j++;
  return j;
}

static size_t find_fam(const tune_fam *f, size_t nf, double b, double k) {
  size_t j = 0;
  while (j < nf && !(f[j].batch == b && f[j].prefetch == k)) j++;
  return j;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int svg_write_tune(FILE *f, const svg_tune_point *pts, size_t n, size_t knee,
                   const char *title, const char *subtitle,
                   const char *mark_label) {
  double ws[TUNE_MAX_W];
  tune_fam fams[TUNE_MAX_FAM];
  size_t nw = 0, nf = 0;
  for (size_t i = 0; i < n; i++) {
    const svg_tune_point *p = &pts[i];
    if (!p->measured) continue;
    if (find_w(ws, nw, p->workers) == nw && nw < TUNE_MAX_W)
      ws[nw++] = p->workers;
    if (find_fam(fams, nf, p->batch_size, p->prefetch) == nf &&
        nf < TUNE_MAX_FAM)
      fams[nf++] = (tune_fam){p->batch_size, p->prefetch};
  }
  qsort(ws, nw, sizeof *ws, cmp_dbl);
  int batch_varies = 0;
  for (size_t j = 1; j < nf; j++)
    batch_varies |= fams[j].batch != fams[0].batch;
  double *ys = malloc((2 * nf * nw + 1) * sizeof *ys);
  char(*labels)[64] = malloc((2 * nf + 1) * sizeof *labels);
  char(*ticks)[24] = malloc((nw + 1) * sizeof *ticks);
  const char **tickp = malloc((nw + 1) * sizeof *tickp);
  svg_series *series = malloc((2 * nf + 1) * sizeof *series);
  int rc = -1;
  if (!ys || !labels || !ticks || !tickp || !series) {
    fprintf(stderr, "stoke: out of memory for the tune plot\n");
    goto out;
  }
  for (size_t i = 0; i < 2 * nf * nw; i++) ys[i] = NAN;
  for (size_t w = 0; w < nw; w++) {
    snprintf(ticks[w], sizeof ticks[w], "%.0f", ws[w]);
    tickp[w] = ticks[w];
  }
  int has_mark = 0;
  size_t mark_x = 0;
  double mark_y = 0;
  for (size_t i = 0; i < n; i++) {
    const svg_tune_point *p = &pts[i];
    if (!p->measured) continue;
    size_t w = find_w(ws, nw, p->workers);
    size_t j = find_fam(fams, nf, p->batch_size, p->prefetch);
    if (w == nw || j == nf) continue;
    ys[(2 * j) * nw + w] = p->samples_per_s;
    ys[(2 * j + 1) * nw + w] = 100 * p->wait_ratio;
    if (i == knee) {
      has_mark = 1;
      mark_x = w;
      mark_y = p->samples_per_s;
    }
  }
  for (size_t j = 0; j < nf; j++) {
    char fam[48];
    if (batch_varies)
      snprintf(fam, sizeof fam, "batch %.0f, prefetch %.0f", fams[j].batch,
               fams[j].prefetch);
    else
      snprintf(fam, sizeof fam, "prefetch %.0f", fams[j].prefetch);
    snprintf(labels[2 * j], sizeof labels[0], "samples/s, %s", fam);
    snprintf(labels[2 * j + 1], sizeof labels[0], "waiting %%, %s", fam);
    series[2 * j] = (svg_series){labels[2 * j], &ys[2 * j * nw], 0, 0,
                                 (int)j};
    series[2 * j + 1] = (svg_series){labels[2 * j + 1],
                                     &ys[(2 * j + 1) * nw], 1, 1, (int)j};
  }
  svg_chart c = {.title = title,
                 .subtitle = subtitle,
                 .x_label = "worker threads",
                 .y_label = "samples per second",
                 .y2_label = "waiting, % of the step (dashed)",
                 .y2_max = 100,
                 .x_ticks = tickp,
                 .n_x = nw,
                 .series = series,
                 .n_series = 2 * nf,
                 .has_mark = has_mark,
                 .mark_x = mark_x,
                 .mark_y = mark_y,
                 .mark_label = mark_label};
  rc = svg_write_chart(f, &c);
out:
  free(ys);
  free(labels);
  free(ticks);
  free(tickp);
  free(series);
  return rc;
}
