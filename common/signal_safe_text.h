#pragma once
// Text built inside a signal handler: a fixed buffer the caller owns, filled without allocating,
// locking or calling stdio (none of those is async-signal-safe; docs/crash-report.md). What does
// not fit is cut, never overflowed.
#include <cstddef>
#include <cstdint>

namespace tp {

class SignalSafeText {
 public:
  SignalSafeText(char* buffer, size_t capacity) : buffer_(buffer), capacity_(capacity) {
    if (capacity_ > 0) buffer_[0] = '\0';
  }
  SignalSafeText& add(const char* text);
  SignalSafeText& add(const char* text, size_t length);
  SignalSafeText& add_char(char c);
  SignalSafeText& add_decimal(long long value);
  SignalSafeText& add_hex(uintptr_t value);  // 0x1f
  // `text` as a JSON string, quotes included; control and non-ASCII bytes as \u00XX.
  SignalSafeText& add_json_string(const char* text);
  const char* text() const { return buffer_; }
  size_t size() const { return size_; }
  bool cut() const { return cut_; }

 private:
  char* buffer_;
  size_t capacity_;
  size_t size_ = 0;
  bool cut_ = false;
};

// write(2) of the whole text, retried on EINTR and short writes; false when the fd refuses it.
bool write_fully(int fd, const char* text, size_t length);

}  // namespace tp
