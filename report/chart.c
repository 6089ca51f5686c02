/* chart.c — inline SVG charts for "stoke report".
**
** Each function writes one <svg> element with fixed user units (a 900-wide
** viewBox; the page scales it down on narrow screens) and no reference
** outside itself: no script, no stylesheet, no font, no id, so several
** charts can share one page.  Values that are not finite or are negative
** count as 0. */
#include "chart.h"

#include <math.h>
#include <string.h>

#define W 900.0

static const char *const palette[RC_N_COLORS] = {
    "#0072B2", "#D55E00", "#009E73", "#E69F00",
    "#56B4E9", "#CC79A7", "#F0E442", "#000000"};

const char *rc_color(int c) {
  return palette[c >= 0 && c < RC_N_COLORS ? c : 0];
}

void rc_escape(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&#39;", f); break;
    default:
      if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
        fputc(*s, f);
    }
  }
}

static double clean(double v) { return isfinite(v) && v > 0 ? v : 0; }

void rc_text(FILE *f, double x, double y, const char *anchor,
             const char *extra, const char *s) {
  fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s%s>", x, y,
          anchor, extra ? " " : "", extra ? extra : "");
  rc_escape(f, s);
  fputs("</text>\n", f);
}

static void open_svg(FILE *f, double h, const char *title) {
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
             "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
             "font-family=\"sans-serif\" font-size=\"13\" role=\"img\">\n",
          W, h, W, h);
  fputs("<title>", f);
  rc_escape(f, title);
  fputs("</title>\n", f);
  fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
             "fill=\"#ffffff\"/>\n", W, h);
  rc_text(f, 12, 22, "start", "font-size=\"15\" font-weight=\"bold\"", title);
}

void rc_nice_axis(double v, double headroom, double *max, double *step) {
  if (!(v > 0) || !isfinite(v))
    v = 1;
  double raw = v / 5.0;
  double mag = pow(10.0, floor(log10(raw)));
  static const double m[] = {1, 2, 2.5, 5, 10};
  double s = mag * 10;
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    if (mag * m[i] >= raw) {
      s = mag * m[i];
      break;
    }
  *step = s;
  *max = s * ceil(v / s - 1e-9);
  if (*max < v * (1 + headroom))
    *max += s;
}

/* A value label: three significant digits, then the unit. */
static void fmt_val(char *buf, size_t n, double v, const char *unit) {
  const char *sp = unit && *unit ? " " : "";
  if (v >= 100)
    snprintf(buf, n, "%.0f%s%s", v, sp, unit ? unit : "");
  else if (v >= 10)
    snprintf(buf, n, "%.1f%s%s", v, sp, unit ? unit : "");
  else if (v >= 1)
    snprintf(buf, n, "%.2f%s%s", v, sp, unit ? unit : "");
  else
    snprintf(buf, n, "%.3g%s%s", v, sp, unit ? unit : "");
}

/* Vertical grid lines and tick labels for 0..max along [x0, x0 + pw]. */
static void x_axis(FILE *f, double x0, double pw, double y0, double y1,
                   double max, double step, const char *label) {
  char buf[64];
  int n = (int)floor(max / step + 0.5);
  fputs("<g stroke=\"#e0e0e0\" stroke-width=\"1\">\n", f);
  for (int i = 0; i <= n; i++) {
    double x = x0 + pw * (i * step) / max;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
            x, y0, x, y1);
  }
  fputs("</g>\n<g fill=\"#333333\">\n", f);
  for (int i = 0; i <= n; i++) {
    double x = x0 + pw * (i * step) / max;
    snprintf(buf, sizeof buf, "%.6g", i * step);
    rc_text(f, x, y1 + 17, "middle", NULL, buf);
  }
  fputs("</g>\n", f);
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
             "stroke=\"#333333\"/>\n",
          x0, y1, x0 + pw, y1);
  rc_text(f, x0 + pw / 2, y1 + 36, "middle", NULL, label);
}

static void legend_box(FILE *f, double x, double y, const char *color,
                       const char *extra, const char *label) {
  fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" "
             "fill=\"%s\"%s%s/>\n",
          x, y - 11, color, extra ? " " : "", extra ? extra : "");
  rc_text(f, x + 20, y, "start", NULL, label);
}

int rc_write_bars(FILE *f, const rc_bars *c) {
  const double left = 170, right = c->stacked ? 190 : 110, top = 42;
  double row_h = c->stacked ? 28 : 12.0 * (double)c->n_seg + 14;
  double bar_h = c->stacked ? 18 : 10;
  double ph = row_h * (double)(c->n_rows ? c->n_rows : 1);
  double pw = W - left - right;
  double h = top + ph + 86;

  double vmax = 0;
  for (size_t r = 0; r < c->n_rows; r++) {
    double sum = 0;
    for (size_t s = 0; s < c->n_seg; s++) {
      double v = clean(c->rows[r].v[s]);
      sum = c->stacked ? sum + v : (v > sum ? v : sum);
    }
    if (sum > vmax)
      vmax = sum;
  }
  double max, step;
  rc_nice_axis(vmax, 0.02, &max, &step);

  open_svg(f, h, c->title);
  x_axis(f, left, pw, top - 4, top + ph, max, step, c->x_label);
  fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
             "stroke=\"#333333\"/>\n",
          left, top - 4, left, top + ph);

  char buf[64];
  for (size_t r = 0; r < c->n_rows; r++) {
    const rc_row *row = &c->rows[r];
    double y = top + row_h * (double)r;
    double cy = y + row_h / 2;
    rc_text(f, left - 8, cy + 4, "end",
            row->faded ? "fill=\"#666666\" font-style=\"italic\"" : NULL,
            row->label);
    fprintf(f, "<g%s>\n", row->faded ? " opacity=\"0.45\"" : "");
    double x = left;
    for (size_t s = 0; s < c->n_seg; s++) {
      double v = clean(row->v[s]);
      double w = pw * v / max;
      const char *col = rc_color(c->seg_colors[s]);
      if (c->stacked) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                   "height=\"%.1f\" fill=\"%s\"/>\n",
                x, cy - bar_h / 2, w, bar_h, col);
        x += w;
      } else {
        double by = y + 7 + 12.0 * (double)s;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                   "height=\"%.1f\" fill=\"%s\"/>\n",
                left, by, w, bar_h, col);
        if (v > 0 || !row->faded) {
          fmt_val(buf, sizeof buf, v, c->unit);
          rc_text(f, left + w + 5, by + 9, "start", "font-size=\"11\"", buf);
        }
      }
    }
    fputs("</g>\n", f);
    if (c->stacked && row->note)
      rc_text(f, left + pw + 10, cy + 4, "start",
              row->faded ? "fill=\"#666666\"" : NULL, row->note);
  }

  /* Legend under the axis label. */
  double ly = top + ph + 68, lx = left;
  for (size_t s = 0; s < c->n_seg; s++) {
    legend_box(f, lx, ly, rc_color(c->seg_colors[s]), NULL, c->seg_labels[s]);
    lx += 40 + 7.5 * (double)strlen(c->seg_labels[s]);
  }
  if (c->faded_label)
    rc_text(f, lx, ly, "start", "fill=\"#666666\" font-style=\"italic\"",
            c->faded_label);
  fputs("</svg>\n", f);
  return ferror(f) ? -1 : 0;
}

int rc_write_strip(FILE *f, const rc_strip *c) {
  const double left = 60, right = 60, top = 40;
  const double pw = W - left - right;
  struct {
    const char *name;
    double v;
    int color;
  } m[] = {{"p50", c->p50, RC_BLUE},
           {"p95", c->p95, RC_VERMILION},
           {"p99", c->p99, RC_PURPLE},
           {"max", c->max, RC_BLACK}};
  const size_t nm = sizeof m / sizeof m[0];
  double vmax = 0;
  for (size_t i = 0; i < nm; i++)
    if (isfinite(m[i].v) && m[i].v > vmax)
      vmax = m[i].v;
  double max, step;
  rc_nice_axis(vmax, 0.02, &max, &step);
#define SX(v) (left + pw * clean(v) / max)
  const double label_row = 18;
  const double strip_y = top + label_row * (double)nm + 14, strip_h = 26;
  const double h = strip_y + strip_h + 8 + 70;

  open_svg(f, h, c->title);
  x_axis(f, left, pw, top, strip_y + strip_h + 8, max, step,
         c->unit && strcmp(c->unit, "ms") == 0
             ? "wait per step (milliseconds)"
             : "wait per step");
  double mid = strip_y + strip_h / 2;
  /* The range, the box and the whisker. */
  if (isfinite(c->max))
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"#999999\" stroke-width=\"2\"/>\n",
            SX(0), mid, SX(c->max), mid);
  if (isfinite(c->p50) && isfinite(c->p95))
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
               "fill=\"#56B4E9\" fill-opacity=\"0.5\" stroke=\"#0072B2\"/>\n",
            SX(c->p50), strip_y, SX(c->p95) - SX(c->p50), strip_h);
  if (isfinite(c->p95) && isfinite(c->p99))
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"#333333\" stroke-width=\"2\"/>\n",
            SX(c->p95), mid, SX(c->p99), mid);
  if (isfinite(c->mean))
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"#009E73\" stroke-width=\"3\" "
               "stroke-dasharray=\"4 3\"/>\n",
            SX(c->mean), strip_y - 4, SX(c->mean), strip_y + strip_h + 4);
  /* Each percentile on its own label row, so equal values stay legible. */
  char buf[64], val[32];
  for (size_t i = 0; i < nm; i++) {
    if (!isfinite(m[i].v))
      continue;
    double x = SX(m[i].v);
    double ly = top + label_row * (double)(nm - i);
    const char *col = rc_color(m[i].color);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"%s\" stroke-width=\"2\"/>\n",
            x, ly + 3, x, strip_y + strip_h, col);
    fmt_val(val, sizeof val, m[i].v, c->unit);
    snprintf(buf, sizeof buf, "%s %s", m[i].name, val);
    int at_end = x > left + pw * 0.6;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"%s\" "
               "font-weight=\"bold\">",
            at_end ? x - 5 : x + 5, ly, at_end ? "end" : "start", col);
    rc_escape(f, buf);
    fputs("</text>\n", f);
  }
  double ly = strip_y + strip_h + 8 + 58;
  legend_box(f, left, ly, "#56B4E9", "fill-opacity=\"0.5\" stroke=\"#0072B2\"",
             "box: p50 to p95");
  rc_text(f, left + 150, ly, "start", NULL, "whisker: p95 to p99");
  rc_text(f, left + 310, ly, "start", NULL, "grey line: 0 to max");
  if (isfinite(c->mean)) {
    fmt_val(val, sizeof val, c->mean, c->unit);
    snprintf(buf, sizeof buf, "green dashes: mean %s", val);
    rc_text(f, left + 470, ly, "start", "fill=\"#009E73\"", buf);
  }
#undef SX
  fputs("</svg>\n", f);
  return ferror(f) ? -1 : 0;
}

int rc_write_hist(FILE *f, const rc_hist *c) {
  const double left = 70, right = 30, top = 96;
  const double pw = W - left - right, ph = 220;
  const double h = top + ph + 96;
  double cmax = 0;
  for (size_t i = 0; i < c->n; i++)
    if (clean(c->count[i]) > cmax)
      cmax = clean(c->count[i]);
  double max, step;
  rc_nice_axis(cmax, 0.02, &max, &step);
  double bw = c->n ? pw / (double)c->n : pw;

  open_svg(f, h, c->title);
  char buf[64], val[32];
  int nt = (int)floor(max / step + 0.5);
  fputs("<g stroke=\"#e0e0e0\">\n", f);
  for (int i = 0; i <= nt; i++) {
    double y = top + ph - ph * (i * step) / max;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
            left, y, left + pw, y);
  }
  fputs("</g>\n<g fill=\"#333333\">\n", f);
  for (int i = 0; i <= nt; i++) {
    double y = top + ph - ph * (i * step) / max;
    snprintf(buf, sizeof buf, "%.6g", i * step);
    rc_text(f, left - 6, y + 4, "end", NULL, buf);
  }
  fputs("</g>\n", f);
  fprintf(f, "<text x=\"0\" y=\"0\" text-anchor=\"middle\" "
             "transform=\"translate(18 %.1f) rotate(-90)\">steps</text>\n",
          top + ph / 2);
  fprintf(f, "<g fill=\"%s\">\n", rc_color(RC_BLUE));
  for (size_t i = 0; i < c->n; i++) {
    double v = clean(c->count[i]);
    double bh = ph * v / max;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n",
            left + bw * (double)i + 1, top + ph - bh, bw > 3 ? bw - 2 : bw,
            bh);
  }
  fputs("</g>\n", f);
  fprintf(f, "<g stroke=\"#333333\"><line x1=\"%.1f\" y1=\"%.1f\" "
             "x2=\"%.1f\" y2=\"%.1f\"/><line x1=\"%.1f\" y1=\"%.1f\" "
             "x2=\"%.1f\" y2=\"%.1f\"/></g>\n",
          left, top, left, top + ph, left, top + ph, left + pw, top + ph);
  /* Bucket edges as tick labels, thinned to about 12. */
  size_t every = c->n > 12 ? (c->n + 11) / 12 : 1;
  fputs("<g fill=\"#333333\" font-size=\"11\">\n", f);
  for (size_t i = 0; i <= c->n && c->n; i += every) {
    double edge = i < c->n ? c->lo[i] : c->hi[c->n - 1];
    snprintf(buf, sizeof buf, "%.3g", clean(edge));
    rc_text(f, left + bw * (double)i, top + ph + 16, "middle", NULL, buf);
  }
  fputs("</g>\n", f);
  snprintf(buf, sizeof buf, "wait per step (%s)",
           c->unit ? c->unit : "");
  rc_text(f, left + pw / 2, top + ph + 38, "middle", NULL, buf);
  /* Percentiles: a dashed line inside its bucket, label rows above. */
  struct {
    const char *name;
    double v;
    int color;
  } m[] = {{"p50", c->p50, RC_BLUE},
           {"p95", c->p95, RC_VERMILION},
           {"p99", c->p99, RC_PURPLE}};
  for (size_t k = 0; k < sizeof m / sizeof m[0]; k++) {
    if (!isfinite(m[k].v) || !c->n)
      continue;
    size_t i = 0;
    while (i + 1 < c->n && !(m[k].v < c->hi[i]))
      i++;
    double span = c->hi[i] - c->lo[i];
    double frac = span > 0 ? (m[k].v - c->lo[i]) / span : 0.5;
    frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
    double x = left + bw * ((double)i + frac);
    double ly = 40 + 18 * (double)k;
    const char *col = rc_color(m[k].color);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"%s\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>\n",
            x, ly + 3, x, top + ph, col);
    fmt_val(val, sizeof val, m[k].v, c->unit);
    snprintf(buf, sizeof buf, "%s %s", m[k].name, val);
    int at_end = x > left + pw * 0.6;
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" fill=\"%s\" "
               "font-weight=\"bold\">",
            at_end ? x - 5 : x + 5, ly, at_end ? "end" : "start", col);
    rc_escape(f, buf);
    fputs("</text>\n", f);
  }
  legend_box(f, left, top + ph + 70, rc_color(RC_BLUE), NULL,
             "steps whose wait fell in the bucket");
  fputs("</svg>\n", f);
  return ferror(f) ? -1 : 0;
}
