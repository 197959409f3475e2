#include "common/signal_safe_text.h"

#include <unistd.h>

#include <cerrno>

namespace tp {

SignalSafeText& SignalSafeText::add(const char* text) {
  if (!text) return *this;
  size_t length = 0;
  while (text[length] != '\0') ++length;
  return add(text, length);
}

SignalSafeText& SignalSafeText::add(const char* text, size_t length) {
  for (size_t i = 0; i < length; ++i) add_char(text[i]);
  return *this;
}

SignalSafeText& SignalSafeText::add_char(char c) {
  if (size_ + 1 >= capacity_) {
    cut_ = true;
    return *this;
  }
  buffer_[size_++] = c;
  buffer_[size_] = '\0';
  return *this;
}

SignalSafeText& SignalSafeText::add_decimal(long long value) {
  char digits[24];
  int n = 0;
  // Through the unsigned value, so the most negative number has a magnitude too.
  unsigned long long magnitude = value < 0 ? 0ULL - static_cast<unsigned long long>(value)
                                           : static_cast<unsigned long long>(value);
  do {
    digits[n++] = char('0' + magnitude % 10);
    magnitude /= 10;
  } while (magnitude > 0);
  if (value < 0) add_char('-');
  while (n > 0) add_char(digits[--n]);
  return *this;
}

SignalSafeText& SignalSafeText::add_hex(uintptr_t value) {
  static const char kDigits[] = "0123456789abcdef";
  char digits[2 * sizeof(uintptr_t)];
  int n = 0;
  do {
    digits[n++] = kDigits[value & 0xf];
    value >>= 4;
  } while (value > 0);
  add("0x");
  while (n > 0) add_char(digits[--n]);
  return *this;
}

SignalSafeText& SignalSafeText::add_json_string(const char* text) {
  static const char kDigits[] = "0123456789abcdef";
  add_char('"');
  for (const char* p = text ? text : ""; *p != '\0'; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    char unit[6];
    size_t length = 0;
    if (c == '"' || c == '\\') {
      unit[length++] = '\\';
      unit[length++] = char(c);
    } else if (c < 0x20 || c >= 0x7f) {
      for (char u : {'\\', 'u', '0', '0', kDigits[c >> 4], kDigits[c & 0xf]}) unit[length++] = u;
    } else {
      unit[length++] = char(c);
    }
    // An escape goes in whole or not at all: a cut string never ends in half of one.
    if (size_ + length >= capacity_) {
      cut_ = true;
      return *this;
    }
    add(unit, length);
  }
  return add_char('"');
}

bool write_fully(int fd, const char* text, size_t length) {
  while (length > 0) {
    const ssize_t written = ::write(fd, text, length);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    text += written;
    length -= size_t(written);
  }
  return true;
}

}  // namespace tp
