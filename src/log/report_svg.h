#pragma once
// SVG drawing for the report (internal to src/log/report*.cpp): a line chart with labelled axes, nice ticks, an
// optional log y axis, event markers and a legend; a heatmap with a colour bar. Output is plain SVG text with
// <title> tooltips, no script. Sizes are in viewBox units; the page scales each chart to its column width.
#include <string>
#include <string_view>
#include <vector>

namespace spread::report::svg {

struct Curve {
  std::vector<double> x, y;
  std::string color;
  std::string dash;     // SVG stroke-dasharray, "" = solid
  std::string label;    // tooltip of the line and of its markers
  bool markers = false;  // draw a dot per point (sparse series such as evaluations)
  bool faint = false;    // thin and translucent: the raw curve under its moving mean
};

struct VLine {  // an event such as a resume, drawn as a dashed vertical line
  double x = 0;
  std::string color, label;
};

struct LegendItem {
  std::string color, dash, label;
  bool event = false;  // drawn like a VLine sample instead of a curve sample
};

struct LineChart {
  std::string title, note;  // note: a small grey line under the title ("log scale")
  std::string x_label = "step", y_label;
  bool log_y = false;  // all y must be > 0
  double x_min = 0, x_max = 1;
  std::vector<Curve> curves;
  std::vector<VLine> vlines;
  std::vector<LegendItem> legend;
};

struct Heatmap {
  std::string title, note;  // note as in LineChart
  std::string x_label = "step", y_label, value_label;
  std::string id;                          // unique in the page (names the colour bar gradient)
  double x_min = 0, x_max = 1;             // the step axis (the line charts' range, so columns line up with them)
  std::vector<double> x;                   // column centres, ascending, within [x_min, x_max]
  std::vector<std::vector<double>> cells;  // [column][row]; a short column or NaN = no data
  std::size_t rows = 0;                    // row 0 is drawn at the bottom
  double v_min = 0, v_max = 1;             // the colour scale
};

std::string line_chart(const LineChart& c);
std::string heatmap(const Heatmap& h);

// Tick positions: "nice" steps of 1, 2 or 5 x 10^k covering [lo, hi] with about `target` ticks.
std::vector<double> linear_ticks(double lo, double hi, int target);
// Decades when the range spans several, else 1-2-5 per decade, else linear ticks (placed on the log axis).
std::vector<double> log_ticks(double lo, double hi);
// Labels that share one precision, chosen from the tick spacing: "0", "5k", "10k"; "0.50", "0.55"; "1e-4".
std::vector<std::string> tick_labels(const std::vector<double>& ticks);
// A value for tooltips and tables, 4 significant digits, no exponent unless tiny or huge.
std::string format_value(double v);

std::string escape(std::string_view text);  // for element text and attribute values
std::string viridis(double t);              // t in [0, 1] -> "#rrggbb"

}  // namespace spread::report::svg
