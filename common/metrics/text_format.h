#pragma once
// The pieces of Prometheus text format 0.0.4: number spelling, escaping, HELP/TYPE lines and
// sample lines. See https://prometheus.io/docs/instrumenting/exposition_formats/.
#include <string>
#include <string_view>
#include <vector>

namespace specd::metrics {

struct Label {
  std::string_view name;
  std::string_view value;  // unescaped
};

// Shortest text that parses back to `value`: integers without exponent or ".0" ("3", "1000000"),
// other values in plain decimal where that is readable ("0.25", "0.001"), exponent form for very
// small or large magnitudes ("1e-05", "1e+20"); "+Inf", "-Inf", "NaN" as Prometheus spells them.
std::string FormatValue(double value);

// Label values escape backslash, double quote and newline; HELP text escapes backslash and newline.
std::string EscapeLabelValue(std::string_view value);
std::string EscapeHelp(std::string_view help);

// "# HELP name help\n# TYPE name type\n".
void AppendHeader(std::string& out, std::string_view name, std::string_view help,
                  std::string_view type);
// "name{a=\"x\",b=\"y\"} value\n", or "name value\n" without labels.
void AppendSample(std::string& out, std::string_view name, const std::vector<Label>& labels,
                  double value);

}  // namespace specd::metrics
