#include "common/metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <system_error>

namespace specd::metrics {

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == 0) return "0";  // also -0, which reads as noise in a scrape
  // Plain decimal between 1e-4 and 1e15 (where that is never much longer than the exponent form
  // and integers stay integers), exponent form outside; both the shortest that round-trips.
  const double magnitude = std::fabs(value);
  const std::chars_format format = magnitude >= 1e-4 && magnitude < 1e15
                                       ? std::chars_format::fixed
                                       : std::chars_format::scientific;
  char buffer[64];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value, format);
  // Cannot fail: within the range above the fixed form needs at most ~25 characters.
  return std::string(buffer, result.ptr);
}

namespace {

std::string Escape(std::string_view text, bool escape_quote) {
  std::string escaped;
  escaped.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '\n') {
      escaped += "\\n";
    } else if (c == '"' && escape_quote) {
      escaped += "\\\"";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) { return Escape(value, true); }

std::string EscapeHelp(std::string_view help) { return Escape(help, false); }

void AppendHeader(std::string& out, std::string_view name, std::string_view help,
                  std::string_view type) {
  out.append("# HELP ").append(name).append(" ").append(EscapeHelp(help)).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void AppendSample(std::string& out, std::string_view name, const std::vector<Label>& labels,
                  double value) {
  out.append(name);
  if (!labels.empty()) {
    out += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i > 0) out += ',';
      out.append(labels[i].name).append("=\"").append(EscapeLabelValue(labels[i].value));
      out += '"';
    }
    out += '}';
  }
  out.append(" ").append(FormatValue(value)).append("\n");
}

}  // namespace specd::metrics
