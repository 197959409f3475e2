#include "common/crash_report.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <string>

#include "common/crash_stack.h"
#include "common/signal_safe_text.h"

namespace tp {
namespace {

constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

// Everything the handler reads, formatted ahead of time (crash_report.h).
struct CrashIdentity {
  int rank = 0;
  char host[256] = "?";
  char subcommand[64] = "trainproof";
  char folder[4096] = "trainproof-heartbeats";
  char exception[1024] = {};  // the uncaught exception, when one ended the process
};
CrashIdentity crash_identity;
std::atomic<int> crash_reporting{0};
std::atomic<bool> crash_installed{false};
CrashFrame crash_frames[kMaxCrashFrames];
char crash_line_buffer[1024];
char crash_frame_buffer[1024];
char crash_record_buffer[96 * 1024];  // 48 frames of escaped names and paths fit
alignas(16) char crash_alternate_stack[64 * 1024];

void copy_crash_text(char* target, size_t capacity, const std::string& text) {
  const size_t length = text.size() < capacity - 1 ? text.size() : capacity - 1;
  std::memcpy(target, text.data(), length);
  target[length] = '\0';
}

int crash_rank_from_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* value = std::getenv(name)) return std::atoi(value);
  return 0;
}

const char* crash_code_name(int signal, int code) {
  if (code <= 0) return code == SI_TKILL || code == SI_USER ? "sent by a process" : "queued";
  switch (signal) {
    case SIGSEGV:
      return code == SEGV_MAPERR ? "address not mapped" : "invalid permissions";
    case SIGBUS:
      return code == BUS_ADRALN ? "misaligned address" : "bus error";
    case SIGFPE:
      return code == FPE_INTDIV ? "integer divide by zero" : "arithmetic exception";
    case SIGILL:
      return "illegal instruction";
    default:
      return "from the kernel";
  }
}

// The address a person looks for: where memory was touched (SIGSEGV, SIGBUS) or the faulting
// instruction (SIGILL, SIGFPE) from the kernel; otherwise (SIGABRT, a signal sent by a process)
// the instruction the thread was at.
uintptr_t crash_address(int signal, const siginfo_t* info, const void* context) {
  const bool from_kernel = info && info->si_code > 0 && signal != SIGABRT;
  if (from_kernel) return reinterpret_cast<uintptr_t>(info->si_addr);
  if (!context) return 0;
  return uintptr_t(static_cast<const ucontext_t*>(context)->uc_mcontext.gregs[REG_RIP]);
}

void add_crash_frame_text(SignalSafeText& text, int index, const CrashFrame& frame) {
  text.add("  #").add_decimal(index).add(" ").add_hex(frame.ip).add(" ");
  if (frame.function[0] != '\0')
    text.add(frame.function).add("+").add_hex(frame.function_offset);
  else
    text.add("??");
  if (frame.module[0] != '\0') {
    const char* base = std::strrchr(frame.module, '/');
    text.add(" (").add(base ? base + 1 : frame.module).add("+").add_hex(frame.module_offset);
    text.add(")");
  }
  text.add("\n");
}

void add_crash_record(SignalSafeText& json, int signal, const siginfo_t* info, uintptr_t address,
                      int frame_count) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  json.add("{\"format\":\"trainproof-crash/1\",\"signal\":")
      .add_json_string(crash_signal_name(signal));
  json.add(",\"signal_number\":").add_decimal(signal);
  const bool raised_here = info && info->si_code <= 0 && info->si_pid == ::getpid();
  json.add(",\"code\":")
      .add_json_string(raised_here ? "raised by this process"
                                   : crash_code_name(signal, info ? info->si_code : 0));
  json.add(",\"address\":\"").add_hex(address).add("\"");
  if (info && info->si_code <= 0) json.add(",\"sent_by_pid\":").add_decimal(info->si_pid);
  json.add(",\"rank\":").add_decimal(crash_identity.rank);
  json.add(",\"host\":").add_json_string(crash_identity.host);
  json.add(",\"subcommand\":").add_json_string(crash_identity.subcommand);
  json.add(",\"pid\":").add_decimal(::getpid());
  json.add(",\"thread\":").add_decimal(long(::syscall(SYS_gettid)));
  json.add(",\"unix_time_s\":").add_decimal(now.tv_sec);
  if (crash_identity.exception[0] != '\0')
    json.add(",\"uncaught_exception\":").add_json_string(crash_identity.exception);
  json.add(",\"frames\":[");
  for (int f = 0; f < frame_count; ++f) {
    json.add(f ? ",{" : "{").add("\"ip\":\"").add_hex(crash_frames[f].ip).add("\"");
    json.add(",\"function\":").add_json_string(crash_frames[f].function);
    json.add(",\"function_offset\":\"").add_hex(crash_frames[f].function_offset).add("\"");
    json.add(",\"module\":").add_json_string(crash_frames[f].module);
    json.add(",\"module_offset\":\"").add_hex(crash_frames[f].module_offset).add("\"}");
  }
  json.add("]}\n");
}

// The record beside the heartbeats, written under a temporary name and renamed, so a reader
// never sees half of one. Returns false when the folder refuses it.
bool write_crash_record(const SignalSafeText& json) {
  ::mkdir(crash_identity.folder, 0755);  // an existing folder is fine
  char path[4200], temporary[4200];
  SignalSafeText final_path(path, sizeof path), temporary_path(temporary, sizeof temporary);
  final_path.add(crash_identity.folder)
      .add("/crash-rank")
      .add_decimal(crash_identity.rank)
      .add(".json");
  temporary_path.add(path).add(".part");
  if (final_path.cut() || temporary_path.cut()) return false;
  const int fd = ::open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool written = write_fully(fd, json.text(), json.size());
  ::close(fd);
  return written && ::rename(temporary, path) == 0;
}

void report_crash(int signal, siginfo_t* info, void* context) {
  const uintptr_t address = crash_address(signal, info, context);
  SignalSafeText line(crash_line_buffer, sizeof crash_line_buffer);
  line.add("trainproof: rank ")
      .add_decimal(crash_identity.rank)
      .add(" on ")
      .add(crash_identity.host);
  line.add(" (")
      .add(crash_identity.subcommand)
      .add("): ")
      .add(crash_signal_name(signal))
      .add(" at ");
  line.add_hex(address).add(" (");
  if (info && info->si_code <= 0 && info->si_pid == ::getpid())
    line.add("raised by this process");
  else if (info && info->si_code <= 0)
    line.add("sent by pid ").add_decimal(info->si_pid);
  else
    line.add(crash_code_name(signal, info ? info->si_code : 0));
  line.add(", thread ").add_decimal(long(::syscall(SYS_gettid))).add(")");
  if (crash_identity.exception[0] != '\0')
    line.add("; uncaught exception: ").add(crash_identity.exception);
  line.add("\n");
  write_fully(STDERR_FILENO, line.text(), line.size());

  const int frame_count = walk_crash_stack(context, crash_frames, kMaxCrashFrames);
  for (int f = 0; f < frame_count; ++f) {
    SignalSafeText text(crash_frame_buffer, sizeof crash_frame_buffer);
    add_crash_frame_text(text, f, crash_frames[f]);
    write_fully(STDERR_FILENO, text.text(), text.size());
  }
  SignalSafeText json(crash_record_buffer, sizeof crash_record_buffer);
  add_crash_record(json, signal, info, address, frame_count);
  SignalSafeText where(crash_line_buffer, sizeof crash_line_buffer);
  if (write_crash_record(json))
    where.add("trainproof: crash record ").add(crash_identity.folder).add("/crash-rank");
  else
    where.add("trainproof: could not write the crash record in ").add(crash_identity.folder);
  if (!where.cut()) where.add_decimal(crash_identity.rank).add(".json\n");
  write_fully(STDERR_FILENO, where.text(), where.size());
}

// The signal's default action, again, so the process ends by this signal: the exit status a
// launcher reports stays 128 + its number.
void end_by_signal(int signal) {
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(signal, &fallback, nullptr);
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, signal);
  sigprocmask(SIG_UNBLOCK, &unblock, nullptr);
  raise(signal);
}

// The uncaught exception's type and message, kept for the SIGABRT that std::abort sends next.
// Not a signal handler: it may allocate.
[[noreturn]] void on_terminate() {
  std::string text = "std::terminate without an active exception";
  if (const std::exception_ptr current = std::current_exception()) {
    const std::type_info* type = abi::__cxa_current_exception_type();
    int status = 0;
    char* name = type ? abi::__cxa_demangle(type->name(), nullptr, nullptr, &status) : nullptr;
    text = name ? name : (type ? type->name() : "unknown type");
    std::free(name);
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& e) {
      text += std::string(": ") + e.what();
    } catch (...) {
    }
  }
  copy_crash_text(crash_identity.exception, sizeof crash_identity.exception, text);
  std::abort();
}

}  // namespace

// In tp:: and not static, so every report's stack names it whichever thread the signal lands on.
void on_fatal_signal(int signal, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (crash_reporting.exchange(1) == 0) {
    report_crash(signal, info, context);
  } else {
    // Another thread is reporting: give it time to finish before this one ends the process.
    timespec pause{0, 100 * 1000 * 1000};
    for (int i = 0; i < 100 && crash_reporting.load() == 1; ++i) nanosleep(&pause, nullptr);
  }
  crash_reporting.store(2);
  errno = saved_errno;
  end_by_signal(signal);
}

void install_crash_report() {
  if (!crash_installed.exchange(true)) {
    crash_identity.rank = crash_rank_from_launcher();
    char host[sizeof crash_identity.host] = {};
    if (::gethostname(host, sizeof host - 1) == 0)
      copy_crash_text(crash_identity.host, sizeof crash_identity.host, host);
    stack_t alternate{};
    alternate.ss_sp = crash_alternate_stack;
    alternate.ss_size = sizeof crash_alternate_stack;
    sigaltstack(&alternate, nullptr);
    std::set_terminate(on_terminate);
    prepare_crash_stack();  // libunwind's first use and the maps' first read, outside a signal
  }
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int signal : kCrashSignals) sigaction(signal, &action, nullptr);
}

void set_crash_subcommand(const std::string& subcommand) {
  copy_crash_text(crash_identity.subcommand, sizeof crash_identity.subcommand, subcommand);
}

void set_crash_identity(int rank, const std::string& host) {
  crash_identity.rank = rank;
  copy_crash_text(crash_identity.host, sizeof crash_identity.host, host);
}

void set_crash_folder(const std::string& folder) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(folder, ec);
  if (!folder.empty())
    copy_crash_text(crash_identity.folder, sizeof crash_identity.folder,
                    ec ? folder : absolute.string());
}

std::string crash_record_name(int rank) {
  return "crash-rank" + std::to_string(rank) + ".json";
}

const char* crash_signal_name(int signal) {
  switch (signal) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    default:
      return "another signal";
  }
}

}  // namespace tp
