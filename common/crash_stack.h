#pragma once
// The stack of the thread a fatal signal landed on, walked and named from inside the signal
// handler (libunwind's local unwinding and its symbol lookup, both safe there; the module of each
// address from /proc/self/maps, read with open and read). Names are left mangled: demangling
// allocates; `trainproof report` demangles them when it shows the record (docs/crash-report.md).
#include <cstddef>
#include <cstdint>

namespace tp {

struct CrashFrame {
  uintptr_t ip = 0;
  char function[160] = {};  // mangled; empty when the address has no symbol
  uintptr_t function_offset = 0;
  char module[192] = {};  // the mapped file holding ip; empty when none
  uintptr_t module_offset = 0;
};

constexpr int kMaxCrashFrames = 48;

// Walks from the caller outwards through the signal frame into the interrupted code. A call
// through a null (or unmapped) function pointer leaves a frame at a non-code address that no
// unwind table covers; the walk then resumes from the return address that call pushed, taken from
// the interrupted context (`signal_context`, the handler's ucontext_t*). Returns the frame count.
// When libunwind cannot start or step at all (seen once: a SIGSEGV at 0x0 whose report had no
// frame), the frames come from the interrupted context itself (interrupted_frames).
int walk_crash_stack(void* signal_context, CrashFrame* frames, int max_frames);

// Where the interrupted context was, without an unwinder: its instruction, and when that holds no
// code (a call through a null pointer) the return address the call pushed, at its stack pointer.
// No symbols; the modules and offsets are filled in. Async-signal-safe.
int interrupted_frames(void* signal_context, CrashFrame* frames, int max_frames);

// Reads /proc/self/maps once, outside any signal, so the first crash does not pay for it alone;
// walk_crash_stack reads it again (the maps change as libraries load).
void prepare_crash_stack();

}  // namespace tp
