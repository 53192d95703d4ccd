// SVG charts for the report: axes with nice ticks (1/2/5 x 10^k), a log y axis for values spanning decades,
// polylines with optional point markers, dashed event lines, a wrapped legend, and a heatmap (an embedded PNG with
// invisible hover columns) with a viridis colour bar. Coordinates are written with one decimal: at 640 viewBox units
// wide that is sub-pixel on any screen.
#include "report_svg.h"

#include "report_png.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace spread::report::svg {

namespace {

// Layout of every chart, in viewBox units.
constexpr double kWidth = 640, kLeft = 66, kRight = 18, kTop = 48, kPlotHeight = 210;
constexpr double kAxisBelow = 46;  // tick labels and the x label under the plot
constexpr double kLegendRow = 18, kCharWidth = 6.6;  // 12px text; a rough width so legend items wrap
constexpr std::size_t kMaxMarkers = 80;

struct Scale {  // data -> pixel, linear or log10
  double d0, d1, p0, p1;
  bool log = false;
  double operator()(double v) const {
    double t = log ? (std::log10(v) - d0) / (d1 - d0) : (v - d0) / (d1 - d0);
    return p0 + t * (p1 - p0);
  }
};

std::string num(double v) { return fmt::format("{:.1f}", v); }

std::string trim_zeros(std::string s) {
  if (s.find('.') == std::string::npos) return s;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// Fewest decimals (up to 8) that write v exactly enough for a tick label.
int min_decimals(double v) {
  for (int d = 0; d < 8; ++d) {
    double r = std::round(v * std::pow(10.0, d)) / std::pow(10.0, d);
    if (std::abs(r - v) <= 1e-9 * std::max(1.0, std::abs(v))) return d;
  }
  return 8;
}

std::string sci(double v, int mantissa_decimals) {
  std::string s = fmt::format("{:.{}e}", v, mantissa_decimals);
  auto e = s.find('e');
  return trim_zeros(s.substr(0, e)) + "e" + std::to_string(std::stoi(s.substr(e + 1)));
}

std::string sci_short(double v) {
  for (int d = 0; d < 4; ++d) {
    std::string s = fmt::format("{:.{}e}", v, d);
    if (std::abs(std::stod(s) - v) <= 1e-6 * std::abs(v)) return sci(v, d);
  }
  return sci(v, 3);
}

std::string with_suffix(double v, int decimals) {
  double a = std::abs(v);
  if (a >= 1e7) return trim_zeros(fmt::format("{:.{}f}", v / 1e6, decimals)) + "M";
  return trim_zeros(fmt::format("{:.{}f}", v / 1e3, decimals)) + "k";
}

// One label per tick; `shared` gives every label the same precision (evenly spaced ticks).
std::string tick_label(double v, double max_abs, int shared_decimals, bool shared) {
  if (v == 0) return "0";
  if (!shared) max_abs = std::abs(v);  // decade ticks: each label on its own (0.01, 1, 100, 10k)
  if (max_abs >= 1e4) {
    double unit = max_abs >= 1e7 ? 1e6 : 1e3;
    return with_suffix(v, shared ? shared_decimals : min_decimals(v / unit));
  }
  if (max_abs < 1e-2) return sci_short(v);
  return fmt::format("{:.{}f}", v, shared ? shared_decimals : min_decimals(v));
}

void append_text(std::string& out, double x, double y, const std::string& text, const char* extra = "") {
  out += fmt::format("<text x=\"{}\" y=\"{}\"{}>{}</text>", num(x), num(y), extra, escape(text));
}

void draw_title(std::string& out, const std::string& title, const std::string& note) {
  append_text(out, kLeft, 20, title, " class=\"t\"");
  if (!note.empty()) append_text(out, kLeft, 36, note, " class=\"n\"");
}

// Legend items wrapped into rows under the x label; returns the rows used.
int draw_legend(std::string& out, const std::vector<LegendItem>& items, double y0) {
  double x = kLeft, y = y0;
  int rows = items.empty() ? 0 : 1;
  for (const auto& it : items) {
    double w = 30 + kCharWidth * double(it.label.size()) + 14;
    if (x + w > kWidth - kRight && x > kLeft) {
      x = kLeft;
      y += kLegendRow;
      ++rows;
    }
    if (it.event) {
      out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" class=\"ev\"/>",
                         num(x + 12), num(y - 12), num(y + 3), it.color);
    } else {
      out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2.5\"{}/>",
                         num(x), num(y - 4), num(x + 24), num(y - 4), it.color,
                         it.dash.empty() ? "" : " stroke-dasharray=\"" + it.dash + "\"");
    }
    append_text(out, x + 30, y, it.label);
    x += w;
  }
  return rows;
}

void minmax_y(const LineChart& c, double& lo, double& hi) {
  lo = std::numeric_limits<double>::infinity();
  hi = -lo;
  for (const auto& cv : c.curves) {
    for (double v : cv.y) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (!(lo <= hi)) lo = 0, hi = 1;  // nothing to draw
}

// y domain with 5% headroom; for log, in log10 units.
Scale y_scale(const LineChart& c, double top, double bottom) {
  double lo, hi;
  minmax_y(c, lo, hi);
  if (c.log_y) {
    double a = std::log10(lo), b = std::log10(hi);
    double pad = b > a ? 0.05 * (b - a) : 0.1;
    return {a - pad, b + pad, bottom, top, true};
  }
  double pad = hi > lo ? 0.05 * (hi - lo) : std::max(std::abs(hi) * 0.05, 1e-9);
  if (hi == lo && hi == 0) pad = 1;
  return {lo - pad, hi + pad, bottom, top, false};
}

void draw_axes(std::string& out, const Scale& xs, const Scale& ys, const LineChart& c) {
  const double bottom = ys.p0, top = ys.p1, left = xs.p0, right = xs.p1;
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"bg\"/>", num(left), num(top),
                     num(right - left), num(bottom - top));
  auto yt = ys.log ? log_ticks(std::pow(10.0, ys.d0), std::pow(10.0, ys.d1)) : linear_ticks(ys.d0, ys.d1, 5);
  auto yl = tick_labels(yt);
  for (std::size_t i = 0; i < yt.size(); ++i) {
    double y = ys(yt[i]);
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"g\"/>", num(left), num(y), num(right),
                       num(y));
    append_text(out, left - 6, y + 4, yl[i], " text-anchor=\"end\"");
  }
  auto xt = linear_ticks(xs.d0, xs.d1, 6);
  auto xl = tick_labels(xt);
  for (std::size_t i = 0; i < xt.size(); ++i) {
    double x = xs(xt[i]);
    out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"g\"/>", num(x), num(top), num(x),
                       num(bottom));
    append_text(out, x, bottom + 16, xl[i], " text-anchor=\"middle\"");
  }
  out += fmt::format("<path d=\"M{},{}V{}H{}\" class=\"ax\"/>", num(left), num(top), num(bottom), num(right));
  append_text(out, (left + right) / 2, bottom + 34, c.x_label, " text-anchor=\"middle\" class=\"l\"");
  append_text(out, 0, 0, c.y_label,
              fmt::format(" text-anchor=\"middle\" class=\"l\" transform=\"translate(14,{}) rotate(-90)\"",
                          num((top + bottom) / 2))
                  .c_str());
}

void draw_curve(std::string& out, const Curve& cv, const Scale& xs, const Scale& ys) {
  if (cv.x.empty()) return;
  std::string pts;
  pts.reserve(cv.x.size() * 12);
  for (std::size_t i = 0; i < cv.x.size(); ++i) {
    pts += num(xs(cv.x[i]));
    pts += ',';
    pts += num(ys(cv.y[i]));
    pts += ' ';
  }
  pts.pop_back();
  std::string dash = cv.dash.empty() ? "" : " stroke-dasharray=\"" + cv.dash + "\"";
  out += fmt::format("<polyline points=\"{}\" stroke=\"{}\"{} class=\"{}\"><title>{}</title></polyline>", pts,
                     cv.color, dash, cv.faint ? "c f" : "c", escape(cv.label));
  if (!cv.markers || cv.x.size() > kMaxMarkers) return;
  for (std::size_t i = 0; i < cv.x.size(); ++i) {
    out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"2.8\" fill=\"{}\"><title>{} at step {}: {}</title></circle>",
                       num(xs(cv.x[i])), num(ys(cv.y[i])), cv.color, escape(cv.label), format_value(cv.x[i]),
                       format_value(cv.y[i]));
  }
}

void draw_vlines(std::string& out, const LineChart& c, const Scale& xs, double top, double bottom) {
  for (const auto& v : c.vlines) {
    if (v.x < xs.d0 || v.x > xs.d1) continue;
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" class=\"ev\"><title>{4}</title></line>",
        num(xs(v.x)), num(top), num(bottom), v.color, escape(v.label));
  }
}

std::string svg_open(const char* kind, double height, const std::string& title) {
  return fmt::format(
      "<svg class=\"chart\" data-kind=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" "
      "role=\"img\" aria-label=\"{}\">",
      kind, num(kWidth), num(height), escape(title));
}

int legend_rows(const std::vector<LegendItem>& items) {
  std::string scratch;
  return draw_legend(scratch, items, 0);
}

// Column edges halfway between neighbouring steps; the outer columns reach as far out as their inner half, clipped
// to the chart's step range.
std::vector<double> column_edges(const Heatmap& h) {
  const auto& x = h.x;
  std::vector<double> e(x.size() + 1);
  if (x.size() == 1) {
    e[0] = x[0] - (h.x_max - h.x_min) / 100;
    e[1] = x[0] + (h.x_max - h.x_min) / 100;
  } else {
    for (std::size_t i = 1; i < x.size(); ++i) e[i] = 0.5 * (x[i - 1] + x[i]);
    e[0] = x[0] - (e[1] - x[0]);
    e[x.size()] = x.back() + (x.back() - e[x.size() - 1]);
  }
  for (double& v : e) v = std::clamp(v, h.x_min, h.x_max);
  return e;
}

void draw_colour_bar(std::string& out, const Heatmap& h, double x, double top, double bottom) {
  out += fmt::format("<defs><linearGradient id=\"{}\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">", escape(h.id));
  for (int i = 0; i <= 8; ++i) {
    out += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>", i / 8.0, viridis(i / 8.0));
  }
  out += "</linearGradient></defs>";
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"{}\" fill=\"url(#{})\" stroke=\"#666\"/>",
                     num(x), num(top), num(bottom - top), escape(h.id));
  Scale vs{h.v_min, h.v_max, bottom, top};
  auto t = linear_ticks(h.v_min, h.v_max, 5);
  auto l = tick_labels(t);
  for (std::size_t i = 0; i < t.size(); ++i) {
    out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" class=\"ax\"/>", num(x + 14), num(vs(t[i])),
                       num(x + 18));
    append_text(out, x + 21, vs(t[i]) + 4, l[i]);
  }
  append_text(out, x + 7, top - 8, h.value_label, " text-anchor=\"middle\" class=\"l\"");
}

struct Rgb {
  std::uint8_t r, g, b;
};

Rgb viridis_rgb(double t) {
  // Matplotlib's viridis at 9 evenly spaced points, linearly interpolated: perceptually uniform, colour-blind safe.
  static const int stops[9][3] = {{68, 1, 84},    {71, 45, 123},  {59, 82, 139},  {44, 114, 142}, {33, 145, 140},
                                  {40, 174, 128}, {94, 201, 98},  {173, 220, 48}, {253, 231, 37}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 8;
  const int i = std::min(int(t), 7);
  const double f = t - i;
  auto mix = [&](int k) { return std::uint8_t(std::lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k]))); };
  return {mix(0), mix(1), mix(2)};
}

// The cells as one image, one pixel per layer and per viewBox unit of width: pixel column j shows the cell whose
// edges hold its centre step. No data = transparent, so the grey plot background shows through.
void draw_image(std::string& out, const Heatmap& h, double left, double right, double top, double bottom) {
  const auto e = column_edges(h);
  const std::uint32_t width = std::uint32_t(std::lround(right - left)), height = std::uint32_t(h.rows);
  const double span = h.v_max > h.v_min ? h.v_max - h.v_min : 1;
  std::vector<std::uint8_t> rgba(std::size_t(width) * height * 4, 0);
  for (std::uint32_t j = 0; j < width; ++j) {
    const double x = h.x_min + (j + 0.5) / width * (h.x_max - h.x_min);
    const auto it = std::upper_bound(e.begin(), e.end(), x);
    if (it == e.begin() || it == e.end()) continue;
    const auto& col = h.cells[std::size_t(it - e.begin()) - 1];
    for (std::size_t r = 0; r < col.size() && r < h.rows; ++r) {
      if (!std::isfinite(col[r])) continue;
      const Rgb c = viridis_rgb((col[r] - h.v_min) / span);
      std::uint8_t* px = &rgba[((h.rows - 1 - r) * width + j) * 4];  // row 0 at the bottom
      px[0] = c.r, px[1] = c.g, px[2] = c.b, px[3] = 255;
    }
  }
  out += fmt::format(
      "<image x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" preserveAspectRatio=\"none\" "
      "style=\"image-rendering:pixelated\" href=\"data:image/png;base64,{}\"/>",
      num(left), num(top), num(right - left), num(bottom - top), png::base64(png::encode_rgba(rgba, width, height)));
}

// Hover zones: at most kHoverZones invisible columns, each titled with every layer's value at its middle step.
void draw_hover(std::string& out, const Heatmap& h, const Scale& xs, double top, double bottom) {
  constexpr std::size_t kHoverZones = 120;
  const auto e = column_edges(h);
  const std::size_t cols = h.cells.size(), zones = std::min(cols, kHoverZones);
  for (std::size_t z = 0; z < zones; ++z) {
    const std::size_t lo = z * cols / zones, hi = (z + 1) * cols / zones, mid = (lo + hi - 1) / 2;
    std::string title = "step " + format_value(h.x[mid]);
    for (std::size_t r = h.cells[mid].size(); r-- > 0;) {
      title += fmt::format("\nlayer {}: {}", r, format_value(h.cells[mid][r]));
    }
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"transparent\"><title>{}</title></rect>",
                       num(xs(e[lo])), num(top), num(xs(e[hi]) - xs(e[lo])), num(bottom - top), escape(title));
  }
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string viridis(double t) {
  const Rgb c = viridis_rgb(t);
  return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b);
}

std::vector<double> linear_ticks(double lo, double hi, int target) {
  if (!(hi > lo)) return {lo};
  double raw = (hi - lo) / std::max(target, 1);
  double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double norm = raw / mag;
  double step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  std::vector<double> t;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + 1e-9 * step; k += 1) {
    double v = k * step;
    t.push_back(std::abs(v) < 1e-12 * step ? 0.0 : v);
  }
  return t;
}

std::vector<double> log_ticks(double lo, double hi) {
  const double a = std::log10(lo), b = std::log10(hi);
  std::vector<double> t;
  if (b - a >= 2) {  // decades, thinned so at most ~7 labels
    int k0 = int(std::ceil(a - 1e-9)), k1 = int(std::floor(b + 1e-9));
    int every = std::max(1, (k1 - k0 + 6) / 7);
    for (int k = k0; k <= k1; k += every) t.push_back(std::pow(10.0, k));
    return t;
  }
  if (b - a >= 0.7) {
    // 1, 2, 5 per decade first, then 3, 1.5, 4, 6, 8 wherever they keep 1/8 of the range from every other tick:
    // a loss between 1.4 and 11 gets 1.5, 2, 3, 5, 10 rather than only 2, 5, 10.
    const double min_gap = (b - a) / 8;
    for (double m : {1.0, 2.0, 5.0, 3.0, 1.5, 4.0, 6.0, 8.0}) {
      for (int k = int(std::floor(a)); k <= int(std::ceil(b)); ++k) {
        const double v = m * std::pow(10.0, k), lv = std::log10(v);
        if (v < lo * (1 - 1e-9) || v > hi * (1 + 1e-9)) continue;
        const bool crowded = m != 1 && m != 2 && m != 5 && std::any_of(t.begin(), t.end(), [&](double u) {
          return std::abs(std::log10(u) - lv) < min_gap;
        });
        if (!crowded) t.push_back(v);
      }
    }
    std::sort(t.begin(), t.end());
    return t;
  }
  // Under 0.7 decades: round linear values, thinned from the bottom so none sits within 1/8 of the range of the
  // one below it (log spacing squeezes the top: 2.6..11 gets 3, 4, 5, 6, 8, 10).
  for (double v : linear_ticks(lo, hi, 8)) {
    if (v > 0 && (t.empty() || std::log10(v) - std::log10(t.back()) >= (b - a) / 8)) t.push_back(v);
  }
  return t;
}

std::vector<std::string> tick_labels(const std::vector<double>& ticks) {
  double max_abs = 0;
  for (double v : ticks) max_abs = std::max(max_abs, std::abs(v));
  // Evenly spaced ticks share one precision (0.50, 0.55, 0.60); decade ticks each take their own (0.01, 0.1, 1).
  bool even = true;
  for (std::size_t i = 2; i < ticks.size(); ++i) {
    double d0 = ticks[1] - ticks[0], d1 = ticks[i] - ticks[i - 1];
    if (std::abs(d1 - d0) > 1e-6 * std::abs(d0)) even = false;
  }
  const double unit = max_abs >= 1e7 ? 1e6 : max_abs >= 1e4 ? 1e3 : 1;
  int shared = 0;
  for (double v : ticks) shared = std::max(shared, min_decimals(v / unit));
  std::vector<std::string> out;
  for (double v : ticks) out.push_back(tick_label(v, max_abs, shared, even));
  return out;
}

std::string format_value(double v) {
  if (!std::isfinite(v)) return v != v ? "NaN" : v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  double a = std::abs(v);
  if (a >= 1e6 || a < 1e-3) return sci(v, 3);
  int decimals = std::max(0, 3 - int(std::floor(std::log10(a))));
  return trim_zeros(fmt::format("{:.{}f}", v, decimals));
}

std::string line_chart(const LineChart& c) {
  const int rows = legend_rows(c.legend);
  const double top = kTop, bottom = kTop + kPlotHeight;
  const double height = bottom + kAxisBelow + rows * kLegendRow + (rows ? 6 : 0);
  Scale xs{c.x_min, c.x_max > c.x_min ? c.x_max : c.x_min + 1, kLeft, kWidth - kRight};
  Scale ys = y_scale(c, top, bottom);
  std::string out = svg_open("line", height, c.title);
  out += "<title>" + escape(c.title) + "</title>";
  draw_title(out, c.title, c.note);
  draw_axes(out, xs, ys, c);
  draw_vlines(out, c, xs, top, bottom);
  for (const auto& cv : c.curves) draw_curve(out, cv, xs, ys);
  draw_legend(out, c.legend, bottom + kAxisBelow + 12);
  return out + "</svg>";
}

std::string heatmap(const Heatmap& h) {
  const std::size_t rows = std::max<std::size_t>(h.rows, 1);
  const double row_h = std::clamp(kPlotHeight / double(rows), 8.0, 28.0);
  const double top = kTop + 8, bottom = top + row_h * double(rows);
  const double right = kWidth - 92;  // room for the colour bar and its labels
  Scale xs{h.x_min, h.x_max > h.x_min ? h.x_max : h.x_min + 1, kLeft, right};
  std::string out = svg_open("heatmap", bottom + kAxisBelow, h.title);
  out += "<title>" + escape(h.title) + "</title>";
  draw_title(out, h.title, h.note);
  out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" class=\"nd\"/>", num(kLeft), num(top),
                     num(right - kLeft), num(bottom - top));
  draw_image(out, h, kLeft, right, top, bottom);
  draw_hover(out, h, xs, top, bottom);
  // Layer ticks: every layer when they fit, else a thinned set that keeps 0 and the last layer.
  const std::size_t every = std::max<std::size_t>(1, std::size_t(std::ceil(14.0 / row_h)));
  for (std::size_t r = 0; r < rows; ++r) {
    if (r % every != 0 && r + 1 != rows) continue;
    append_text(out, kLeft - 6, top + (double(rows - 1 - r) + 0.5) * row_h + 4, std::to_string(r),
                " text-anchor=\"end\"");
  }
  auto xt = linear_ticks(xs.d0, xs.d1, 6);
  auto xl = tick_labels(xt);
  for (std::size_t i = 0; i < xt.size(); ++i) {
    out += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" class=\"ax\"/>", num(xs(xt[i])),
                       num(bottom), num(bottom + 4));
    append_text(out, xs(xt[i]), bottom + 16, xl[i], " text-anchor=\"middle\"");
  }
  append_text(out, (kLeft + right) / 2, bottom + 34, h.x_label, " text-anchor=\"middle\" class=\"l\"");
  append_text(out, 0, 0, h.y_label,
              fmt::format(" text-anchor=\"middle\" class=\"l\" transform=\"translate(14,{}) rotate(-90)\"",
                          num((top + bottom) / 2))
                  .c_str());
  draw_colour_bar(out, h, right + 14, top, bottom);
  return out + "</svg>";
}

}  // namespace spread::report::svg
