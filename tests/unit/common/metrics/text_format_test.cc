// Number spelling and escaping of Prometheus text format 0.0.4.
#include "common/metrics/text_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace specd::metrics {
namespace {

TEST(FormatValue, PrintsIntegersWithoutExponentOrDecimalPoint) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(-0.0), "0");
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(-42), "-42");
  EXPECT_EQ(FormatValue(1000000), "1000000");
  EXPECT_EQ(FormatValue(123456789012345), "123456789012345");
}

TEST(FormatValue, PrintsFractionsInShortestPlainDecimal) {
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(FormatValue(0.001), "0.001");
  EXPECT_EQ(FormatValue(2.5), "2.5");
  EXPECT_EQ(FormatValue(-0.75), "-0.75");
  EXPECT_EQ(FormatValue(1.0 / 3), "0.3333333333333333");
}

TEST(FormatValue, UsesExponentFormForTinyAndHugeMagnitudes) {
  EXPECT_EQ(FormatValue(1e-5), "1e-05");
  EXPECT_EQ(FormatValue(1e20), "1e+20");
  EXPECT_EQ(FormatValue(-2.5e-7), "-2.5e-07");
}

TEST(FormatValue, SpellsInfinitiesAndNaNAsPrometheusDoes) {
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(FormatValue, RoundTripsEveryFiniteValue) {
  for (const double value : {0.1 + 0.2, 1e-300, 5e-324, 1.7976931348623157e308, 123.456,
                             9007199254740993.0, 0.30000000000000004, 1e15, 99999.99999}) {
    const std::string text = FormatValue(value);
    EXPECT_EQ(std::strtod(text.c_str(), nullptr), value) << text;
  }
}

TEST(EscapeLabelValue, EscapesBackslashDoubleQuoteAndNewline) {
  EXPECT_EQ(EscapeLabelValue("plain value"), "plain value");
  EXPECT_EQ(EscapeLabelValue("C:\\models\n\"qwen\""), "C:\\\\models\\n\\\"qwen\\\"");
}

TEST(EscapeHelp, EscapesBackslashAndNewlineButNotQuotes) {
  EXPECT_EQ(EscapeHelp("a \"quoted\" path\\x\nline two"), "a \"quoted\" path\\\\x\\nline two");
}

TEST(AppendSample, WritesLabelsInGivenOrder) {
  std::string out;
  AppendSample(out, "m", {{"z", "1"}, {"a", "2"}}, 7);
  AppendSample(out, "n", {}, 0.5);
  EXPECT_EQ(out, "m{z=\"1\",a=\"2\"} 7\nn 0.5\n");
}

}  // namespace
}  // namespace specd::metrics
