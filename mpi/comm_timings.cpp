#include "mpi/comm_timings.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace tp {
namespace {

int kind_of(const std::string& label) {
  return label.find(':') == std::string::npos ? 0 : 1;
}

}  // namespace

int set_up_slot(int kind) {
  return kind * (1 + 2 * kCommOps);
}
int first_slot(int kind, CollectiveOp op) {
  return set_up_slot(kind) + 1 + int(op);
}
int steady_slot(int kind, CollectiveOp op) {
  return set_up_slot(kind) + 1 + kCommOps + int(op);
}

void CommTimeLog::clear() {
  std::lock_guard<std::mutex> guard(mutex_);
  fixed_ = {};
  set_ = {};
  steady_ = {};
}

void CommTimeLog::set_up(const std::string& label, double seconds) {
  std::lock_guard<std::mutex> guard(mutex_);
  const int slot = set_up_slot(kind_of(label));
  // Splits of one kind (a rail each) set up one after another on a rank: their sum.
  fixed_[size_t(slot)] += seconds;
  set_[size_t(slot)] = true;
}

void CommTimeLog::first(const std::string& label, CollectiveOp op, double seconds) {
  std::lock_guard<std::mutex> guard(mutex_);
  const int slot = first_slot(kind_of(label), op);
  if (set_[size_t(slot)]) return;  // the first of its kind on any communicator of the kind
  fixed_[size_t(slot)] = seconds;
  set_[size_t(slot)] = true;
}

void CommTimeLog::steady(const std::string& label, CollectiveOp op, double seconds) {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<double>& samples = steady_[size_t(kind_of(label))][size_t(op)];
  if (samples.size() < kSteadySamples) samples.push_back(seconds);
}

std::array<double, kCommTimeSlots> CommTimeLog::slots() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::array<double, kCommTimeSlots> out;
  for (size_t i = 0; i < out.size(); ++i) out[i] = set_[i] ? fixed_[i] : -1.0;
  for (int kind = 0; kind < kCommKinds; ++kind)
    for (int op = 0; op < kCommOps; ++op) {
      std::vector<double> samples = steady_[size_t(kind)][size_t(op)];
      if (samples.empty()) continue;
      std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
      out[size_t(steady_slot(kind, CollectiveOp(op)))] = samples[samples.size() / 2];
    }
  return out;
}

CommTimeLog& process_comm_times() {
  static CommTimeLog log;
  return log;
}

std::optional<NcclInitTimings> parse_nccl_init_timings(const std::string& line) {
  const size_t at = line.find("Init timings");
  if (at == std::string::npos) return std::nullopt;
  NcclInitTimings t;
  const size_t rank = line.find(" rank ", at), nranks = line.find(" nranks ", at),
               total = line.find(" total ", at), open = line.find('(', at),
               close = line.find(')', open == std::string::npos ? at : open);
  if (rank == std::string::npos || nranks == std::string::npos || total == std::string::npos)
    return std::nullopt;
  t.rank = std::atoi(line.c_str() + rank + 6);
  t.nranks = std::atoi(line.c_str() + nranks + 8);
  t.total = std::atof(line.c_str() + total + 7);
  if (open != std::string::npos && close != std::string::npos) {
    std::istringstream parts(line.substr(open + 1, close - open - 1));
    for (std::string part; std::getline(parts, part, ',');) {
      std::istringstream words(part);
      std::string name;
      double seconds = 0;
      if (words >> name >> seconds) t.parts.emplace_back(name, seconds);
    }
  }
  return t;
}

}  // namespace tp
