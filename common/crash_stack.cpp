#include "common/crash_stack.h"

#include <fcntl.h>
#include <libunwind.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstring>

namespace tp {
namespace {

// /proc/self/maps of a process with MPI, CUDA and NCCL loaded is tens of kB; what does not fit
// is read in windows.
char crash_maps_window[64 * 1024];

uintptr_t parse_maps_hex(const char*& p, const char* end) {
  uintptr_t value = 0;
  for (; p < end; ++p) {
    const char c = *p;
    if (c >= '0' && c <= '9')
      value = value * 16 + uintptr_t(c - '0');
    else if (c >= 'a' && c <= 'f')
      value = value * 16 + uintptr_t(c - 'a' + 10);
    else
      break;
  }
  return value;
}

// One maps line: "start-end perms offset dev inode   path". True and the frame's module filled
// when `ip` lies inside it.
bool match_maps_line(const char* line, const char* end, CrashFrame& frame) {
  const char* p = line;
  const uintptr_t start = parse_maps_hex(p, end);
  if (p >= end || *p != '-') return false;
  ++p;
  const uintptr_t stop = parse_maps_hex(p, end);
  if (frame.ip < start || frame.ip >= stop) return false;
  for (int field = 0; field < 2 && p < end; ++field) {  // perms, then the offset
    while (p < end && *p == ' ') ++p;
    if (field == 1) {
      frame.module_offset = frame.ip - start + parse_maps_hex(p, end);
      break;
    }
    while (p < end && *p != ' ') ++p;
  }
  for (int field = 0; field < 2 && p < end; ++field) {  // dev, inode
    while (p < end && *p == ' ') ++p;
    while (p < end && *p != ' ') ++p;
  }
  while (p < end && *p == ' ') ++p;
  const size_t length =
      size_t(end - p) < sizeof frame.module - 1 ? size_t(end - p) : sizeof frame.module - 1;
  std::memcpy(frame.module, p, length);
  frame.module[length] = '\0';
  return true;
}

// Calls `visit(line, end)` for each line of /proc/self/maps, a window at a time, until it
// returns false.
template <typename Visit>
void for_each_maps_line(Visit visit) {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  size_t kept = 0;
  bool going = true;
  while (going) {
    const ssize_t got = ::read(fd, crash_maps_window + kept, sizeof crash_maps_window - kept);
    if (got <= 0) break;
    const char* end = crash_maps_window + kept + size_t(got);
    const char* line = crash_maps_window;
    for (const char* nl = line; going && nl < end; ++nl) {
      if (*nl != '\n') continue;
      going = visit(line, nl);
      line = nl + 1;
    }
    kept = size_t(end - line);  // a line cut by the window goes to the next one
    std::memmove(crash_maps_window, line, kept);
    if (kept == sizeof crash_maps_window) kept = 0;  // a line longer than the window: skip it
  }
  ::close(fd);
}

void name_modules(CrashFrame* frames, int count) {
  for_each_maps_line([&](const char* line, const char* end) {
    for (int f = 0; f < count; ++f)
      if (frames[f].module[0] == '\0') match_maps_line(line, end, frames[f]);
    return true;
  });
}

// Whether `ip` lies in a mapping that may hold code ("r-xp"): a jump anywhere else (a null or
// stale function pointer) leaves a frame no unwinder can step from.
bool in_code(uintptr_t ip) {
  if (ip < 4096) return false;
  bool code = false;
  for_each_maps_line([&](const char* line, const char* end) {
    const char* p = line;
    const uintptr_t start = parse_maps_hex(p, end);
    if (p >= end || *p != '-') return true;
    ++p;
    const uintptr_t stop = parse_maps_hex(p, end);
    if (ip < start || ip >= stop) return true;
    code = p + 3 < end && p[3] == 'x';  // " rwxp": the perms after the space
    return false;
  });
  return code;
}

bool record_crash_frame(unw_cursor_t& cursor, CrashFrame& frame) {
  unw_word_t ip = 0;
  if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0) return false;
  frame.ip = uintptr_t(ip);
  unw_word_t offset = 0;
  if (ip != 0 && unw_get_proc_name(&cursor, frame.function, sizeof frame.function, &offset) == 0)
    frame.function_offset = uintptr_t(offset);
  else
    frame.function[0] = '\0';
  return true;
}

// The interrupted frame sits at an address with no code (a null function pointer): continue from
// the return address its call pushed, at the stack pointer of the interrupted context.
bool resume_after_bad_call(void* signal_context, unw_cursor_t& cursor, unw_context_t& resumed) {
  if (!signal_context) return false;
  const auto* interrupted = static_cast<const ucontext_t*>(signal_context);
  const greg_t sp = interrupted->uc_mcontext.gregs[REG_RSP];
  if (sp == 0 || (sp & 7) != 0) return false;
  std::memcpy(&resumed, interrupted, sizeof resumed);
  resumed.uc_mcontext.gregs[REG_RIP] = *reinterpret_cast<const greg_t*>(sp);
  resumed.uc_mcontext.gregs[REG_RSP] = sp + greg_t(sizeof(greg_t));
  return unw_init_local2(&cursor, &resumed, 0) == 0;
}

}  // namespace

int interrupted_frames(void* signal_context, CrashFrame* frames, int max_frames) {
  if (!signal_context || max_frames < 1) return 0;
  const auto* interrupted = static_cast<const ucontext_t*>(signal_context);
  int count = 0;
  frames[count] = CrashFrame{};
  frames[count++].ip = uintptr_t(interrupted->uc_mcontext.gregs[REG_RIP]);
  const greg_t sp = interrupted->uc_mcontext.gregs[REG_RSP];
  if (count < max_frames && !in_code(frames[0].ip) && sp != 0 && (sp & 7) == 0) {
    frames[count] = CrashFrame{};
    frames[count++].ip = uintptr_t(*reinterpret_cast<const greg_t*>(sp));
  }
  name_modules(frames, count);
  return count;
}

int walk_crash_stack(void* signal_context, CrashFrame* frames, int max_frames) {
  unw_context_t context;
  unw_cursor_t cursor;
  if (::getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0)
    return interrupted_frames(signal_context, frames, max_frames);
  static unw_context_t resumed;  // one crash report per process: never two at once
  const uintptr_t interrupted_ip =
      signal_context
          ? uintptr_t(static_cast<const ucontext_t*>(signal_context)->uc_mcontext.gregs[REG_RIP])
          : 1;
  bool resumed_once = false;
  int count = 0;
  while (count < max_frames && record_crash_frame(cursor, frames[count])) {
    const uintptr_t ip = frames[count++].ip;
    // The interrupted frame, at an address that holds no code: libunwind would guess at the
    // caller's registers; the interrupted context has them exactly.
    if (!resumed_once && ip == interrupted_ip && !in_code(ip)) {
      resumed_once = true;
      if (!resume_after_bad_call(signal_context, cursor, resumed)) break;
      continue;
    }
    if (unw_step(&cursor) <= 0) break;
  }
  if (count == 0) return interrupted_frames(signal_context, frames, max_frames);
  name_modules(frames, count);
  return count;
}

void prepare_crash_stack() {
  CrashFrame probe[2];
  walk_crash_stack(nullptr, probe, 2);
}

}  // namespace tp
