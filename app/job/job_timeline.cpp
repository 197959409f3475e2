#include "app/job/job_timeline.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/printf_text.h"

namespace tp {
namespace {

using nlohmann::json;

double ratio(double part, double whole) {
  return whole > 0 ? part / whole : 0.0;
}

std::string file_text(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double seconds_of(const Segments& segments, const std::string& name) {
  for (const auto& [segment, seconds] : segments)
    if (segment == name) return seconds;
  return 0.0;
}

// Every category any rank has, in timeline order. A name only some ranks have (a restore on the
// ranks that found a checkpoint) goes in as late as its rank's order allows: just before the next
// name that rank shares with the ranks before it.
std::vector<std::string> category_order(const std::vector<RankTimeline>& ranks) {
  std::vector<std::string> order;
  for (const RankTimeline& rank : ranks) {
    auto insert_at = order.end();
    for (auto segment = rank.categories.rbegin(); segment != rank.categories.rend(); ++segment) {
      auto found = std::find(order.begin(), order.end(), segment->first);
      insert_at = found != order.end() ? found : order.insert(insert_at, segment->first);
    }
  }
  return order;
}

json share(const std::string& name, double seconds, double wall_s) {
  return {{"name", name}, {"seconds", seconds}, {"fraction", ratio(seconds, wall_s)}};
}

json rank_entry(const RankTimeline& rank) {
  json categories = json::object();
  double accounted = 0;
  for (const auto& [name, seconds] : rank.categories) {
    categories[name] = seconds;
    accounted += seconds;
  }
  return {{"rank", rank.rank},
          {"wall_s", rank.wall_s},
          {"goodput", ratio(seconds_of(rank.categories, kProductive), rank.wall_s)},
          {"accounted_fraction", ratio(accounted, rank.wall_s)},
          {"categories", categories}};
}

// Entries of `categories` ordered largest first; equal ones keep their timeline order.
std::vector<json> largest_first(const json& categories) {
  std::vector<json> sorted(categories.begin(), categories.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const json& a, const json& b) {
    return a.at("seconds").get<double>() > b.at("seconds").get<double>();
  });
  return sorted;
}

std::string padded(const std::string& text, size_t width, bool left_align) {
  const std::string pad(width > text.size() ? width - text.size() : 0, ' ');
  return left_align ? text + pad : pad + text;
}

std::string header_line(const json& job) {
  std::string line = printf_text("job: %.1f s wall on every rank (mean); %s; ",
                                 job.at("wall_s").get<double>(), goodput_text(job).c_str());
  const json& queue = job.value("queue_s", json());
  if (queue.is_number()) return line + printf_text("queue %.1f s before it", queue.get<double>());
  return line + "queue: " + job.value("queue_note", std::string(kNoQueueNote));
}

// "launch, preflight, sweep and cold_restore": the parts of the job that took time and are not
// its training stage, in timeline order.
std::string not_training_text(const json& job) {
  std::vector<std::string> names;
  for (const json& category : job.value("categories", json::array()))
    if (category.is_object() && kNotTraining.count(category.value("name", "")) &&
        category.value("seconds", 0.0) > 0)
      names.push_back(category.value("name", ""));
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace

std::string goodput_text(const json& job) {
  const json whole = job.value("goodput", json()), training = job.value("train_goodput", json());
  if (!whole.is_number()) return "goodput n/a";
  if (!training.is_number()) return printf_text("goodput %.2f", whole.get<double>());
  const std::string others = not_training_text(job);
  return printf_text("goodput: training stage %.2f, whole job %.2f", training.get<double>(),
                     whole.get<double>()) +
         (others.empty()
              ? ""
              : " (" + others + (others.find(' ') == std::string::npos ? " is" : " are") +
                    " not training)");
}

JobClock::JobClock(double start_s, Clock clock)
    : start_s_(start_s), last_s_(start_s), clock_(std::move(clock)) {}

JobClock JobClock::since_process_start() {
  return JobClock(steady_now_s() - process_age_s());
}

void JobClock::mark(const std::string& name) {
  const double now = clock_();
  const double seconds = now - last_s_;
  last_s_ = now;
  for (auto& [segment, total] : segments_)
    if (segment == name) {
      total += seconds;
      return;
    }
  segments_.emplace_back(name, seconds);
}

json JobClock::to_json() const {
  json segments = json::array();
  for (const auto& [name, seconds] : segments_)
    segments.push_back({{"name", name}, {"seconds", seconds}});
  return {{"wall_s", elapsed_s()}, {"segments", segments}};
}

double JobClock::steady_now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double JobClock::process_age_s() {
  return process_age_from(file_text("/proc/self/stat"), file_text("/proc/uptime"),
                          sysconf(_SC_CLK_TCK));
}

double process_age_from(const std::string& stat, const std::string& uptime, long ticks_per_second) {
  // The command name (field 2) is in parentheses and may hold spaces and parentheses itself, so
  // fields are counted from the last ')': field 3 is the first after it, starttime is field 22.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos || ticks_per_second <= 0) return 0.0;
  std::istringstream fields(stat.substr(name_end + 1));
  std::string field;
  for (int number = 3; number < 22; ++number)
    if (!(fields >> field)) return 0.0;
  double start_ticks = 0, uptime_s = 0;
  if (!(fields >> start_ticks) || !(std::istringstream(uptime) >> uptime_s)) return 0.0;
  // Both are rounded (ticks, hundredths): a process younger than that can come out negative.
  return std::max(0.0, uptime_s - start_ticks / double(ticks_per_second));
}

SteadySplit split_steady(double steady_s, const StepPhaseSums& sums) {
  SteadySplit split;
  steady_s = std::max(0.0, steady_s);
  split.data_stall = std::max(0.0, sums.data);
  split.comm_exposed = std::max(0.0, sums.comm_exposed);
  split.checkpoint_stall = std::max(0.0, sums.checkpoint);
  const double lost = split.data_stall + split.comm_exposed + split.checkpoint_stall;
  if (lost > steady_s) {
    const double scale = steady_s / lost;
    split.data_stall *= scale;
    split.comm_exposed *= scale;
    split.checkpoint_stall *= scale;
    return split;
  }
  split.productive = steady_s - lost;
  return split;
}

Segments with_steady_split(const Segments& segments, const StepPhaseSums& sums) {
  Segments out;
  for (const auto& [name, seconds] : segments) {
    if (name != kSteadySteps) {
      out.emplace_back(name, seconds);
      continue;
    }
    const SteadySplit split = split_steady(seconds, sums);
    out.emplace_back(kProductive, split.productive);
    out.emplace_back(kDataStall, split.data_stall);
    out.emplace_back(kCommExposed, split.comm_exposed);
    out.emplace_back(kCheckpointStall, split.checkpoint_stall);
  }
  return out;
}

RankTimeline rank_timeline(int rank, const json& sent, const StepPhaseSums& sums) {
  Segments segments;
  for (const json& segment : sent.at("segments"))
    segments.emplace_back(segment.at("name").get<std::string>(),
                          segment.at("seconds").get<double>());
  return {rank, sent.at("wall_s").get<double>(), with_steady_split(segments, sums)};
}

json job_json(const std::vector<RankTimeline>& ranks, std::optional<double> queue_s,
              const std::string& queue_note) {
  const double count = std::max<size_t>(ranks.size(), 1);
  double wall_s = 0, wall_max_s = 0, accounted = 1;
  json per_rank = json::array();
  for (const RankTimeline& rank : ranks) {
    wall_s += rank.wall_s / count;
    wall_max_s = std::max(wall_max_s, rank.wall_s);
    per_rank.push_back(rank_entry(rank));
    const double fraction = per_rank.back().at("accounted_fraction").get<double>();
    if (std::abs(fraction - 1) > std::abs(accounted - 1)) accounted = fraction;
  }
  json categories = json::array(), lost = json::array();
  double productive_s = 0;
  for (const std::string& name : category_order(ranks)) {
    double seconds = 0;
    for (const RankTimeline& rank : ranks) seconds += seconds_of(rank.categories, name) / count;
    categories.push_back(share(name, seconds, wall_s));
    if (name == kProductive)
      productive_s = seconds;
    else
      lost.push_back(categories.back());
  }
  const std::vector<json> lost_sorted = largest_first(lost);
  // The training stage's own wall: the job's, less the launch and the other stages of accept.
  double other_stages_s = 0;
  for (const json& category : categories)
    if (kNotTraining.count(category.at("name").get<std::string>()))
      other_stages_s += category.at("seconds").get<double>();
  const double train_wall_s = wall_s - other_stages_s;
  const bool trained = std::any_of(categories.begin(), categories.end(), [](const json& c) {
    return c.at("name") == kProductive || c.at("name") == kWarmupSteps;
  });
  return {{"wall_s", wall_s},
          {"wall_max_s", wall_max_s},
          {"queue_s", queue_s ? json(*queue_s) : json()},
          {"queue_note", queue_s ? "Slurm's submit to start, before the processes: beside wall_s, "
                                   "not in it"
                                 : queue_note},
          {"categories", categories},
          {"productive_s", productive_s},
          {"goodput", ratio(productive_s, wall_s)},
          {"train_wall_s", trained ? json(train_wall_s) : json()},
          {"train_goodput", trained ? json(ratio(productive_s, train_wall_s)) : json()},
          {"lost", lost_sorted},
          {"accounted_fraction", accounted},
          {"ranks", per_rank}};
}

std::vector<std::string> timeline_lines(const json& job) {
  if (!job.is_object()) return {};
  std::vector<std::string> lines{header_line(job)};
  const std::vector<json> sorted = largest_first(job.at("categories"));
  size_t name_width = 0, seconds_width = 0;
  for (const json& category : sorted) {
    name_width = std::max(name_width, category.at("name").get<std::string>().size());
    seconds_width =
        std::max(seconds_width, printf_text("%.2f", category.at("seconds").get<double>()).size());
  }
  for (const json& category : sorted) {
    const std::string seconds = printf_text("%.2f", category.at("seconds").get<double>());
    // One decimal, so the column lines up; a share above 0 that would read 0.0% says <0.1%.
    const double fraction = category.at("fraction").get<double>();
    const std::string percent =
        fraction > 0 && fraction < 0.001 ? "<0.1%" : printf_text("%.1f%%", 100 * fraction);
    lines.push_back("  " + padded(category.at("name").get<std::string>(), name_width, true) + "  " +
                    padded(seconds, seconds_width, false) + " s  " + padded(percent, 6, false));
  }
  // The categories are built to add up to the wall time: a shortfall is a stage nobody marked.
  const double accounted = job.value("accounted_fraction", 1.0);
  if (std::abs(accounted - 1) > 0.01)
    lines.push_back(printf_text(
        "  the categories account for %.1f%% of a rank's wall time, not 100%%", 100 * accounted));
  return lines;
}

}  // namespace tp
