#include "common/text_safety.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "common/json_depth.h"
#include "common/number_text.h"

TEST(TextSafety, ValidUtf8IsAcceptedAsTheSerialiserAcceptsIt) {
  for (const std::string& text :
       {std::string(), std::string("plain ascii"), std::string("r\xc3\xa9sum\xc3\xa9"),
        std::string("\xe2\x82\xac"), std::string("\xf0\x9f\x98\x80"), std::string("nul\0in", 6)})
    EXPECT_TRUE(tp::valid_utf8(text)) << text;
  // A Latin-1 byte, a lone continuation, a truncated sequence, an overlong '/', a surrogate, a
  // code point past U+10FFFF, and bytes that never occur.
  for (const std::string& text :
       {std::string("r\xe9sum\xe9"), std::string("\x80"), std::string("\xe2\x82"),
        std::string("\xc0\xaf"), std::string("\xe0\x80\xaf"), std::string("\xed\xa0\x80"),
        std::string("\xf4\x90\x80\x80"), std::string("\xfe\xff")})
    EXPECT_FALSE(tp::valid_utf8(text)) << text;
}

TEST(TextSafety, InvalidBytesAreEscapedAsHexAndBackslashesDoubled) {
  EXPECT_EQ(tp::escape_invalid_utf8("r\xe9sum\xe9"), "r\\xE9sum\\xE9");
  EXPECT_EQ(tp::escape_invalid_utf8("C:\\dir\\\xff"), "C:\\\\dir\\\\\\xFF");
  // Valid sequences beside invalid bytes stay as they are.
  EXPECT_EQ(tp::escape_invalid_utf8("\xc3\xa9\xe9"), "\xc3\xa9\\xE9");
  // A truncated sequence: each of its bytes is escaped, the next valid one kept.
  EXPECT_EQ(tp::escape_invalid_utf8("\xe2\x82x"), "\\xE2\\x82x");
}

TEST(TextSafety, EscapingIsReversibleAndAlwaysSerialisable) {
  std::mt19937 draw(12);
  for (int round = 0; round < 2000; ++round) {
    std::string bytes(size_t(draw() % 24), '\0');
    for (char& byte : bytes) byte = char(draw() % 4 == 0 ? '\\' : draw() % 256);
    const std::string escaped = tp::escape_invalid_utf8(bytes);
    ASSERT_TRUE(tp::valid_utf8(escaped));
    ASSERT_NO_THROW((void)nlohmann::json(escaped).dump());
    ASSERT_EQ(tp::unescape_invalid_utf8(escaped), bytes);
  }
}

TEST(JsonDepth, TheBoundIsCountedOutsideStringsOnly) {
  const auto nested = [](int levels) {
    return std::string(size_t(levels), '[') + std::string(size_t(levels), ']');
  };
  EXPECT_EQ(tp::json_depth_problem(nested(tp::kMaxJsonDepth)), "");
  EXPECT_EQ(tp::json_depth_problem(nested(tp::kMaxJsonDepth + 1)),
            "nested more than 256 levels deep (arrays and objects)");
  EXPECT_EQ(tp::json_depth_problem(nested(50000)),
            "nested more than 256 levels deep (arrays and objects)");
  // Brackets inside strings, escaped quotes included, are text.
  const std::string in_text = "{\"a\": \"\\\"" + std::string(1000, '[') + "\"}";
  EXPECT_EQ(tp::json_depth_problem(in_text), "");
  EXPECT_EQ(tp::json_depth_problem("{\"k\": {\"k\": [1, {\"x\": []}]}}"), "");
}

TEST(ExactNumber, TheShortestTextThatReadsBackExactly) {
  EXPECT_EQ(tp::exact_number(-1e-9), "-1e-09");
  EXPECT_EQ(tp::exact_number(1e300), "1e+300");
  EXPECT_EQ(tp::exact_number(1.0000000000000002), "1.0000000000000002");
  EXPECT_EQ(tp::exact_number(0.9), "0.9");
  EXPECT_EQ(tp::exact_number(2), "2");
  for (const double value : {0.1, 1.0 / 3, 6.02214076e23, -2.5e-308})
    EXPECT_EQ(std::stod(tp::exact_number(value)), value);
}

TEST(ReadableNumber, ThreeSignificantDigitsAndNoENotation) {
  EXPECT_EQ(tp::readable_number(0.0008107049999999999), "0.000811");
  EXPECT_EQ(tp::readable_number(6.231903791427612), "6.23");
  EXPECT_EQ(tp::readable_number(12.5), "12.5");
  EXPECT_EQ(tp::readable_number(18000), "18000");
  EXPECT_EQ(tp::readable_number(0), "0");
}

// A share too small to read as a percentage says so: neither 0% (nothing at all) nor 0.00034%.
TEST(ReadablePercent, TinySharesReadAsBelowATenthOfAPercent) {
  EXPECT_EQ(tp::readable_percent(0.42), "42%");
  EXPECT_EQ(tp::readable_percent(0.042), "4.2%");
  EXPECT_EQ(tp::readable_percent(0.0042), "0.42%");
  EXPECT_EQ(tp::readable_percent(0.001), "0.1%");
  EXPECT_EQ(tp::readable_percent(0.0000034), "<0.1%");
  EXPECT_EQ(tp::readable_percent(0.00023), "<0.1%");
  EXPECT_EQ(tp::readable_percent(0), "0%");
  EXPECT_EQ(tp::readable_percent(1.3), "130%");
}
