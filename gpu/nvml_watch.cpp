#include "gpu/nvml_watch.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "gpu/nvml_library.h"

namespace tp {

using WatchClock = std::chrono::steady_clock;

// A load of hours at one sample a second stays within this; past it the watch keeps XIDs only.
constexpr size_t kMaxSamplesPerGpu = 1 << 16;

struct NvmlWatch::State {
  std::mutex mutex;
  std::condition_variable changed;
  bool stop = false, done = false;
  double interval_s = 1;
  NvmlWatchRecord record;
};

namespace {

using State = NvmlWatch::State;

struct Session {
  Nvml nvml;
  std::vector<NvmlDevice> devices;
  NvmlEventSet events = nullptr;
};

// Opens NVML and every GPU it can; false (with the reason in the record) when it cannot.
bool open_session(State& s, Session& session) {
  std::string why;
  session.nvml = open_nvml(why);
  Nvml& n = session.nvml;
  if (why.empty()) {
    if (const NvmlReturn code = n.init(); code != kNvmlSuccess)
      why = "nvmlInit_v2: " + nvml_error_text(n, code);
  }
  std::vector<DriverGpu> gpus;
  if (why.empty()) {
    unsigned count = 0;
    if (const NvmlReturn code = n.count(&count); code != kNvmlSuccess) {
      why = "nvmlDeviceGetCount_v2: " + nvml_error_text(n, code);
      n.shutdown();
    }
    for (unsigned i = 0; why.empty() && i < count; ++i) {
      NvmlDevice d = nullptr;
      if (n.by_index(i, &d) != kNvmlSuccess) continue;
      session.devices.push_back(d);
      gpus.push_back(read_driver_gpu(n, i, d));
    }
  }
  std::lock_guard lock(s.mutex);
  s.record.unavailable = why;
  s.record.gpus = gpus;
  s.record.samples.resize(gpus.size());
  return why.empty();
}

// Registers every GPU for XID events; the record says which could not be.
void register_xids(State& s, Session& session) {
  Nvml& n = session.nvml;
  std::string why;
  if (!n.event_set_create || !n.register_events || !n.event_wait || !n.event_set_free)
    why =
        "libnvidia-ml.so.1 lacks nvmlEventSetCreate, nvmlDeviceRegisterEvents or "
        "nvmlEventSetWait_v2";
  else if (const NvmlReturn code = n.event_set_create(&session.events); code != kNvmlSuccess)
    why = "nvmlEventSetCreate: " + nvml_error_text(n, code);
  for (size_t k = 0; why.empty() && k < session.devices.size(); ++k)
    if (const NvmlReturn code =
            n.register_events(session.devices[k], kNvmlEventXidCriticalError, session.events);
        code != kNvmlSuccess)
      why = "nvmlDeviceRegisterEvents (GPU " + std::to_string(k) + "): " + nvml_error_text(n, code);
  std::lock_guard lock(s.mutex);
  s.record.events_unavailable = why;
}

void sample(State& s, Session& session) {
  std::vector<GpuHealth> now;
  for (NvmlDevice d : session.devices) now.push_back(read_gpu_health(session.nvml, d));
  std::lock_guard lock(s.mutex);
  for (size_t k = 0; k < now.size(); ++k)
    if (s.record.samples[k].size() < kMaxSamplesPerGpu) s.record.samples[k].push_back(now[k]);
}

void record_xid(State& s, const Session& session, const NvmlEventData& data, double at_s) {
  std::lock_guard lock(s.mutex);
  GpuXid x;
  x.xid = static_cast<long long>(data.event_data);
  x.at_s = at_s;
  for (size_t k = 0; k < session.devices.size(); ++k)
    if (session.devices[k] == data.device) {
      x.gpu_index = s.record.gpus[k].index;
      x.uuid = s.record.gpus[k].uuid;
      x.pci_address = s.record.gpus[k].pci_address;
    }
  s.record.xids.push_back(x);
}

// Until `until` or a stop: XIDs as they come where the event set works, else a plain wait.
// True when asked to stop.
bool wait_for_events(State& s, Session& session, WatchClock::time_point started,
                     WatchClock::time_point until) {
  for (;;) {
    {
      std::unique_lock lock(s.mutex);
      if (s.stop) return true;
      if (!session.events || !s.record.events_unavailable.empty()) {
        s.changed.wait_until(lock, until, [&] { return s.stop; });
        return s.stop;
      }
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - WatchClock::now());
    if (left.count() <= 0) return false;
    NvmlEventData data{};
    const NvmlReturn code = session.nvml.event_wait(session.events, &data, unsigned(left.count()));
    if (code == kNvmlSuccess && (data.event_type & kNvmlEventXidCriticalError))
      record_xid(s, session, data,
                 std::chrono::duration<double>(WatchClock::now() - started).count());
    else if (code != kNvmlSuccess && code != kNvmlTimeout) {
      std::lock_guard lock(s.mutex);
      s.record.events_unavailable = "nvmlEventSetWait_v2: " + nvml_error_text(session.nvml, code);
    }
  }
}

void watch(std::shared_ptr<State> state) {
  State& s = *state;
  Session session;
  const WatchClock::time_point started = WatchClock::now();
  if (open_session(s, session)) {
    register_xids(s, session);
    const auto interval = std::chrono::duration_cast<WatchClock::duration>(
        std::chrono::duration<double>(s.interval_s));
    for (WatchClock::time_point next = started;;) {
      sample(s, session);
      next += interval;
      if (wait_for_events(s, session, started, next)) break;
    }
    if (session.events) session.nvml.event_set_free(session.events);
    session.nvml.shutdown();
  }
  std::lock_guard lock(s.mutex);
  s.record.seconds = std::chrono::duration<double>(WatchClock::now() - started).count();
  s.done = true;
  s.changed.notify_all();
}

}  // namespace

NvmlWatch::NvmlWatch(double interval_s) : state_(std::make_shared<State>()) {
  state_->interval_s = interval_s > 0 ? interval_s : 1;
  thread_ = std::thread(watch, state_);
}

NvmlWatch::~NvmlWatch() {
  if (thread_.joinable()) stop(10);
}

NvmlWatchRecord NvmlWatch::stop(double deadline_s) {
  std::unique_lock lock(state_->mutex);
  if (!thread_.joinable()) return state_->record;  // stopped before
  state_->stop = true;
  state_->changed.notify_all();
  const bool done = state_->changed.wait_for(lock, std::chrono::duration<double>(deadline_s),
                                             [&] { return state_->done; });
  // Kept in the state, so a second stop() of a watch left behind says the same.
  if (!done) state_->record.stopped = false;
  NvmlWatchRecord record = state_->record;
  lock.unlock();
  if (done)
    thread_.join();
  else
    thread_.detach();
  return record;
}

}  // namespace tp
