// Inline-SVG line charts (see svg_chart.h).
#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace bertfit::report {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, count);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::floor(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
    if (ticks.size() > 50) break;
  }
  if (ticks.back() < hi) ticks.push_back(ticks.back() + step);
  return ticks;
}

std::string line_chart(const std::string& title, const std::string& x_label,
                       const std::vector<Series>& series, const std::optional<Marker>& marker,
                       int width, int height) {
  const double left = 64, right = 16, top = 32, bottom = 56;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" +
                    std::to_string(width) + "\" height=\"" + std::to_string(height) +
                    "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
                    "\" role=\"img\" aria-label=\"" + html_escape(title) + "\">";
  out += "<text x=\"" + px(width / 2.0) + "\" y=\"20\" text-anchor=\"middle\" class=\"title\">" +
         html_escape(title) + "</text>";
  if (!std::isfinite(x0)) {
    out += "<text x=\"" + px(width / 2.0) + "\" y=\"" + px(height / 2.0) +
           "\" text-anchor=\"middle\" class=\"empty\">no data</text></svg>";
    return out;
  }
  const std::vector<double> xt = nice_ticks(x0, x1), yt = nice_ticks(y0, y1);
  const double xa = xt.front(), xb = xt.back(), ya = yt.front(), yb = yt.back();
  const double pw = width - left - right, ph = height - top - bottom;
  auto sx = [&](double x) { return left + (x - xa) / (xb - xa) * pw; };
  auto sy = [&](double y) { return top + ph - (y - ya) / (yb - ya) * ph; };
  // Grid and axes.
  for (double t : yt) {
    out += "<line class=\"grid\" x1=\"" + px(left) + "\" x2=\"" + px(left + pw) + "\" y1=\"" +
           px(sy(t)) + "\" y2=\"" + px(sy(t)) + "\"/>";
    out += "<text class=\"tick\" x=\"" + px(left - 6) + "\" y=\"" + px(sy(t) + 4) +
           "\" text-anchor=\"end\">" + num(t) + "</text>";
  }
  for (double t : xt) {
    out += "<line class=\"grid\" x1=\"" + px(sx(t)) + "\" x2=\"" + px(sx(t)) + "\" y1=\"" +
           px(top) + "\" y2=\"" + px(top + ph) + "\"/>";
    out += "<text class=\"tick\" x=\"" + px(sx(t)) + "\" y=\"" + px(top + ph + 16) +
           "\" text-anchor=\"middle\">" + num(t) + "</text>";
  }
  out += "<rect class=\"frame\" x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" + px(pw) +
         "\" height=\"" + px(ph) + "\"/>";
  out += "<text class=\"label\" x=\"" + px(left + pw / 2) + "\" y=\"" + px(top + ph + 34) +
         "\" text-anchor=\"middle\">" + html_escape(x_label) + "</text>";
  if (marker && marker->x >= xa && marker->x <= xb) {
    out += "<line class=\"best\" x1=\"" + px(sx(marker->x)) + "\" x2=\"" + px(sx(marker->x)) +
           "\" y1=\"" + px(top) + "\" y2=\"" + px(top + ph) + "\"/>";
    // Right of the line, or left of it in the chart's right third (so it is not cut off).
    const bool left_side = sx(marker->x) > left + pw * 2 / 3;
    out += "<text class=\"best-label\" x=\"" + px(sx(marker->x) + (left_side ? -4 : 4)) +
           "\" y=\"" + px(top + 12) + "\" text-anchor=\"" + (left_side ? "end" : "start") + "\">" +
           html_escape(marker->label) + "</text>";
  }
  // Series and legend.
  double legend_x = left;
  for (const Series& s : series) {
    std::string points;
    std::string dots;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      points += px(sx(x)) + "," + px(sy(y)) + " ";
      if (s.markers) {
        dots += "<circle cx=\"" + px(sx(x)) + "\" cy=\"" + px(sy(y)) + "\" r=\"3\" fill=\"" +
                s.color + "\"><title>" + html_escape(s.name) + " at " + num(x) + ": " + num(y) +
                "</title></circle>";
      }
    }
    if (points.empty()) continue;
    out += "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.8\" points=\"" +
           points + "\"><title>" + html_escape(s.name) + "</title></polyline>" + dots;
    out += "<rect x=\"" + px(legend_x) + "\" y=\"" + px(height - 14) +
           "\" width=\"12\" height=\"3\" fill=\"" + s.color + "\"/>";
    out += "<text class=\"legend\" x=\"" + px(legend_x + 16) + "\" y=\"" + px(height - 10) + "\">" +
           html_escape(s.name) + "</text>";
    legend_x += 28 + 7.0 * static_cast<double>(s.name.size());
  }
  out += "</svg>";
  return out;
}

}  // namespace bertfit::report
