// Line charts as inline SVG, for a report that a browser opens offline with no script: axes with
// round tick values, one polyline per series (with point markers for sparse series such as
// evaluations), a legend, an optional vertical marker (the best step), and a <title> on each
// point so that hovering shows its value.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bertfit::report {

struct Series {
  std::string name;
  std::string color;                              // CSS colour, e.g. "#1f77b4"
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite y are left out
  bool markers = false;
};

struct Marker {
  double x;
  std::string label;
};

// An <svg> element of width × height pixels; "no data" when no series has a finite point.
std::string line_chart(const std::string& title, const std::string& x_label,
                       const std::vector<Series>& series, const std::optional<Marker>& marker,
                       int width = 560, int height = 300);

// Text for HTML content and attribute values: & < > " ' escaped.
std::string html_escape(const std::string& text);

// "Nice" tick values covering [lo, hi] (about `count` of them, steps of 1, 2 or 5 × 10^k).
std::vector<double> nice_ticks(double lo, double hi, int count = 5);

}  // namespace bertfit::report
