#include "common/text_safety.h"

namespace tp {

size_t utf8_sequence_length(std::string_view text, size_t at) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[at + k]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  // The second byte's range is narrower after some leads: it excludes overlong forms (E0, F0),
  // surrogates (ED) and code points past U+10FFFF (F4).
  unsigned char low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (at + length > text.size() || byte(1) < low || byte(1) > high) return 0;
  for (size_t k = 2; k < length; ++k)
    if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
  return length;
}

namespace {

int hex_value(char digit) {
  if (digit >= '0' && digit <= '9') return digit - '0';
  if (digit >= 'A' && digit <= 'F') return digit - 'A' + 10;
  if (digit >= 'a' && digit <= 'f') return digit - 'a' + 10;
  return -1;
}

}  // namespace

bool valid_utf8(std::string_view text) {
  for (size_t at = 0; at < text.size();) {
    const size_t length = utf8_sequence_length(text, at);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

std::string escape_invalid_utf8(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t at = 0; at < text.size();) {
    const size_t length = utf8_sequence_length(text, at);
    if (length == 0) {
      const auto byte = static_cast<unsigned char>(text[at]);
      out += {'\\', 'x', kHex[byte >> 4], kHex[byte & 0xF]};
      at += 1;
    } else {
      if (text[at] == '\\') out += '\\';
      out.append(text.substr(at, length));
      at += length;
    }
  }
  return out;
}

std::string unescape_invalid_utf8(std::string_view escaped) {
  std::string out;
  out.reserve(escaped.size());
  for (size_t at = 0; at < escaped.size(); ++at) {
    if (escaped[at] == '\\' && at + 1 < escaped.size() && escaped[at + 1] == '\\') {
      out += '\\';
      at += 1;
    } else if (escaped[at] == '\\' && at + 3 < escaped.size() && escaped[at + 1] == 'x' &&
               hex_value(escaped[at + 2]) >= 0 && hex_value(escaped[at + 3]) >= 0) {
      out += char(hex_value(escaped[at + 2]) * 16 + hex_value(escaped[at + 3]));
      at += 3;
    } else {
      out += escaped[at];
    }
  }
  return out;
}

}  // namespace tp
