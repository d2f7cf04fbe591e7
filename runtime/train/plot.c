/*
 * The SVG loss curve of a training log. Everything in the output follows
 * from the log and the options (coordinates printed to two decimals, tick
 * values computed as whole multiples of the tick step, no dates), so the same
 * log gives the same bytes: the golden test compares them.
 */
#include "orion/train_log.h"

#include <math.h>
#include <string.h>

#define MARGIN_LEFT 72.0
#define MARGIN_RIGHT 24.0
#define MARGIN_TOP 44.0
#define MARGIN_BOTTOM 56.0
/* A bound on ticks per axis: about 6 are asked for, but where the range is
 * tiny against the values (1 and 1 + 2^-52) the tick index cannot count in
 * doubles, and the loop must end anyway. */
#define MAX_TICKS 64
#define TRAIN_COLOR "#1f77b4"
#define EVAL_COLOR "#d62728"

typedef struct Axis {
  double lo, hi;   /* data range shown (log10 of it on a log axis) */
  double step;     /* between ticks (linear axes) */
  bool log;
} Axis;

typedef struct Frame {
  double x0, y0, w, h; /* the plot area in pixels */
  Axis x, y;
} Frame;

/* 1, 2 or 5 times a power of ten, near range / 6. */
static double nice_step(double range) {
  double raw = range / 6.0, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
  return (f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0) * mag;
}

/* Whether v is drawn on the loss axis. */
static bool drawable(double v, bool log_scale) { return isfinite(v) && (!log_scale || v > 0); }

static double px_x(const Frame *f, double step) { return f->x0 + (step - f->x.lo) / (f->x.hi - f->x.lo) * f->w; }

static double px_y(const Frame *f, double v) {
  double t = f->y.log ? log10(v) : v;
  return f->y0 + f->h - (t - f->y.lo) / (f->y.hi - f->y.lo) * f->h;
}

static void escape_xml(StrBuf *sb, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&': sb_puts(sb, "&amp;"); break;
    case '<': sb_puts(sb, "&lt;"); break;
    case '>': sb_puts(sb, "&gt;"); break;
    case '"': sb_puts(sb, "&quot;"); break;
    default:
      if ((unsigned char)*s >= 0x20 || *s == '\t') sb_putc(sb, *s);
    }
  }
}

/* A tick label: %g of a value made as a whole multiple of the step, with
 * -0 shown as 0. */
static void put_label(StrBuf *sb, double v) {
  if (v == 0) v = 0;
  sb_printf(sb, "%g", v);
}

static void x_ticks(StrBuf *sb, const Frame *f) {
  double bottom = f->y0 + f->h;
  double first = ceil(f->x.lo / f->x.step);
  for (int k = 0; k < MAX_TICKS && (first + k) * f->x.step <= f->x.hi + 1e-9 * f->x.step; k++) {
    double v = (first + k) * f->x.step, x = px_x(f, v);
    sb_printf(sb, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#e0e0e0\"/>\n", x, f->y0, x, bottom);
    sb_printf(sb, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"black\"/>\n", x, bottom, x, bottom + 5);
    sb_printf(sb, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">", x, bottom + 18);
    put_label(sb, v);
    sb_puts(sb, "</text>\n");
  }
}

static void y_tick(StrBuf *sb, const Frame *f, double v) {
  double y = px_y(f, v);
  sb_printf(sb, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#e0e0e0\"/>\n", f->x0, y, f->x0 + f->w, y);
  sb_printf(sb, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"black\"/>\n", f->x0 - 5, y, f->x0, y);
  sb_printf(sb, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"end\">", f->x0 - 8, y + 4);
  put_label(sb, v);
  sb_puts(sb, "</text>\n");
}

static void y_ticks(StrBuf *sb, const Frame *f) {
  if (!f->y.log) {
    double first = ceil(f->y.lo / f->y.step - 1e-9);
    for (int k = 0; k < MAX_TICKS && (first + k) * f->y.step <= f->y.hi + 1e-9 * f->y.step; k++)
      y_tick(sb, f, (first + k) * f->y.step);
    return;
  }
  /* Decades, and 2 and 5 times them when the axis spans at most two. */
  bool fine = f->y.hi - f->y.lo <= 2;
  for (double k = f->y.lo; k <= f->y.hi; k++) {
    double p = pow(10.0, k);
    y_tick(sb, f, p);
    if (fine && k < f->y.hi) {
      y_tick(sb, f, 2 * p);
      y_tick(sb, f, 5 * p);
    }
  }
}

/* One polyline per run of drawable values of a series. */
static void series(StrBuf *sb, const Frame *f, const OrionTrainLogData *log, bool eval, const char *style) {
  bool open = false;
  for (uint32_t i = 0; i < log->n; i++) {
    const OrionTrainLogEntry *e = &log->entries[i];
    if (eval && !e->has_eval) continue;
    double v = eval ? e->eval_loss : e->loss;
    if (!drawable(v, f->y.log)) {
      if (open) sb_puts(sb, "\"/>\n");
      open = false;
      continue;
    }
    if (!open) sb_printf(sb, "<polyline fill=\"none\" %s points=\"", style);
    else sb_putc(sb, ' ');
    open = true;
    sb_printf(sb, "%.2f,%.2f", px_x(f, (double)e->step), px_y(f, v));
  }
  if (open) sb_puts(sb, "\"/>\n");
}

static void legend(StrBuf *sb, const Frame *f, bool has_eval) {
  double x = f->x0 + f->w - 120, y = f->y0 + 18;
  sb_printf(sb, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"" TRAIN_COLOR "\" stroke-width=\"2\"/>\n",
            x, y - 4, x + 24, y - 4);
  sb_printf(sb, "<text x=\"%.2f\" y=\"%.2f\">train loss</text>\n", x + 30, y);
  if (!has_eval) return;
  y += 18;
  sb_printf(sb, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"" EVAL_COLOR
            "\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"/>\n", x, y - 4, x + 24, y - 4);
  sb_printf(sb, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"" EVAL_COLOR "\"/>\n", x + 12, y - 4);
  sb_printf(sb, "<text x=\"%.2f\" y=\"%.2f\">eval loss</text>\n", x + 30, y);
}

/* The ranges of both axes from the drawable values; false if there are none. */
static bool fit(Frame *f, const OrionTrainLogData *log, bool log_scale) {
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  bool any_train = false;
  for (uint32_t i = 0; i < log->n; i++) {
    const OrionTrainLogEntry *e = &log->entries[i];
    double v[2] = {e->loss, e->has_eval ? e->eval_loss : (double)NAN};
    for (int k = 0; k < 2; k++) {
      if (!drawable(v[k], log_scale)) continue;
      any_train = any_train || k == 0;
      lo = fmin(lo, v[k]);
      hi = fmax(hi, v[k]);
    }
  }
  if (!any_train) return false;
  f->x.lo = (double)log->entries[0].step;
  f->x.hi = (double)log->entries[log->n - 1].step;
  if (f->x.hi == f->x.lo) {
    f->x.lo = f->x.lo > 1 ? f->x.lo - 1 : 0;
    f->x.hi += 1;
  }
  f->x.step = fmax(1.0, nice_step(f->x.hi - f->x.lo));
  f->y.log = log_scale;
  if (log_scale) {
    f->y.lo = floor(log10(lo));
    f->y.hi = ceil(log10(hi));
    if (f->y.hi == f->y.lo) f->y.hi += 1;
    return true;
  }
  if (hi == lo) {
    double pad = fabs(lo) > 0 ? fabs(lo) * 0.1 : 1.0;
    lo -= pad;
    hi += pad;
  }
  f->y.step = nice_step(hi - lo);
  f->y.lo = floor(lo / f->y.step) * f->y.step;
  f->y.hi = ceil(hi / f->y.step) * f->y.step;
  return true;
}

bool orion_plot_loss_svg(const OrionTrainLogData *log, const OrionPlotOptions *options, FILE *out) {
  OrionPlotOptions o = options ? *options : (OrionPlotOptions){0};
  double width = o.width ? o.width : 800, height = o.height ? o.height : 500;
  if (width < 200) width = 200;
  if (height < 150) height = 150;
  Frame f = {.x0 = MARGIN_LEFT, .y0 = MARGIN_TOP, .w = width - MARGIN_LEFT - MARGIN_RIGHT,
             .h = height - MARGIN_TOP - MARGIN_BOTTOM};
  if (!log || !log->n || !fit(&f, log, o.log_scale)) return false;
  bool has_eval = false;
  for (uint32_t i = 0; i < log->n; i++) has_eval = has_eval || log->entries[i].has_eval;

  StrBuf sb;
  sb_init(&sb);
  sb_puts(&sb, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
  sb_printf(&sb,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            width, height, width, height);
  sb_puts(&sb, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
  sb_printf(&sb, "<text x=\"%.2f\" y=\"26\" text-anchor=\"middle\" font-size=\"16\">", width / 2);
  escape_xml(&sb, o.title ? o.title : "Training loss");
  sb_puts(&sb, "</text>\n");
  x_ticks(&sb, &f);
  y_ticks(&sb, &f);
  sb_printf(&sb, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" stroke=\"black\"/>\n", f.x0,
            f.y0, f.w, f.h);
  sb_printf(&sb, "<text x=\"%.2f\" y=\"%.2f\" text-anchor=\"middle\">step</text>\n", f.x0 + f.w / 2, height - 16);
  sb_printf(&sb, "<text transform=\"rotate(-90)\" x=\"%.2f\" y=\"18\" text-anchor=\"middle\">%s</text>\n",
            -(f.y0 + f.h / 2), o.log_scale ? "loss (log scale)" : "loss");
  series(&sb, &f, log, false, "stroke=\"" TRAIN_COLOR "\" stroke-width=\"1.5\"");
  if (has_eval) {
    series(&sb, &f, log, true, "stroke=\"" EVAL_COLOR "\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"");
    for (uint32_t i = 0; i < log->n; i++) {
      const OrionTrainLogEntry *e = &log->entries[i];
      if (e->has_eval && drawable(e->eval_loss, o.log_scale))
        sb_printf(&sb, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"" EVAL_COLOR "\"/>\n",
                  px_x(&f, (double)e->step), px_y(&f, e->eval_loss));
    }
  }
  legend(&sb, &f, has_eval);
  sb_puts(&sb, "</svg>\n");
  fwrite(sb.data, 1, sb.len, out);
  sb_free(&sb);
  return true;
}
