#include "app/drill/drill_node_loss.h"

#include <algorithm>
#include <set>

namespace tp {
namespace {

using nlohmann::json;

int world_size_of(const json& report) {
  const json::json_pointer size("/context/world_size");
  return report.is_object() && report.contains(size) && report[size].is_number_integer()
             ? report[size].get<int>()
             : 0;
}

int64_t global_batch_of(const json& report) {
  const json::json_pointer batch("/train/model/global_batch");
  return report.is_object() && report.contains(batch) && report[batch].is_number_integer()
             ? report[batch].get<int64_t>()
             : 0;
}

void add_cpu_models(const json& report, std::set<std::string>& models) {
  if (!report.is_object() || !report.contains("ranks") || !report["ranks"].is_array()) return;
  for (const json& rank : report["ranks"])
    if (rank.is_object() && rank.contains("cpu_model") && rank["cpu_model"].is_string())
      models.insert(rank["cpu_model"].get<std::string>());
}

std::string listed(const std::set<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : "; ") + item;
  return text;
}

}  // namespace

LaunchShape launch_shape(const std::vector<HeartbeatRecord>& heartbeats,
                         std::vector<std::string> excluded) {
  LaunchShape shape;
  std::set<std::string> hosts;
  for (const HeartbeatRecord& heartbeat : heartbeats)
    if (heartbeat.present) hosts.insert(heartbeat.host);
  shape.ranks = int(heartbeats.size());  // read_all holds one record per rank of the world
  shape.nodes = int(hosts.size());
  shape.excluded = std::move(excluded);
  return shape;
}

int lost_rank_count(const DrillFailure& failure, const std::vector<HeartbeatRecord>& heartbeats) {
  // A rank that could not share its node's memory fired alone, and the launcher may have ended
  // the others before they wrote a record: the heartbeats on the host count them all.
  const auto on_host =
      std::count_if(heartbeats.begin(), heartbeats.end(), [&](const HeartbeatRecord& h) {
        return h.present && failure.host && h.host == *failure.host;
      });
  return std::max(int(failure.lost_ranks.size()), int(on_host));
}

std::string proof_not_applicable(const json& reference, const json& final_run,
                                 const std::vector<DrillFailure>& failures) {
  int reference_size = world_size_of(reference);
  if (reference_size == 0)
    for (const DrillFailure& failure : failures)
      if (failure.node_loss) {
        reference_size = failure.node_loss->world_size_before;
        break;
      }
  const int final_size = world_size_of(final_run);
  if (reference_size == 0 || final_size == 0 || reference_size == final_size) return "";
  const std::string sizes =
      " (" + std::to_string(reference_size) + " ranks, then " + std::to_string(final_size) + ")";
  std::vector<std::string> reasons;
  const int64_t batch_before = global_batch_of(reference), batch_after = global_batch_of(final_run);
  // Without a reference report, the final run's own record says its batch followed its size.
  const json::json_pointer set_by("/train/model/batch_set_by");
  const bool per_rank = final_run.is_object() && final_run.contains(set_by) &&
                        final_run[set_by] == "model.batch_per_rank";
  if (batch_before > 0 && batch_after > 0 && batch_before != batch_after)
    reasons.push_back("the global batch followed the world size: " + std::to_string(batch_before) +
                      " samples, then " + std::to_string(batch_after) +
                      " (model.batch_per_rank, and no checkpoint to keep it from)");
  else if (batch_before == 0 && per_rank)
    reasons.push_back("the global batch followed the world size: model.batch_per_rank x " +
                      std::to_string(final_size) + " ranks, with no checkpoint to keep it from");
  const json::json_pointer shift("/data/rank_shift");
  if (final_run.is_object() && final_run.contains(shift) && final_run[shift].is_number_integer() &&
      final_run[shift].get<int64_t>() != 0)
    reasons.push_back("data.rank_shift=" + std::to_string(final_run[shift].get<int64_t>()) +
                      " hands each rank another rank's shards, and which one depends on the "
                      "world size");
  std::set<std::string> models;
  add_cpu_models(reference, models);
  add_cpu_models(final_run, models);
  if (models.size() > 1)
    reasons.push_back("the ranks ran on " + std::to_string(models.size()) +
                      " CPU models, which may round the same sums differently (" + listed(models) +
                      ")");
  if (reasons.empty()) return "";
  std::string text = "the run resized" + sizes + " and ";
  for (size_t i = 0; i < reasons.size(); ++i) text += (i ? "; " : "") + reasons[i];
  return text;
}

std::string node_loss_line(const DrillFailure& failure, int lost_ranks, const LaunchShape& after) {
  const NodeLossResponse& response = *failure.node_loss;
  std::string excluded;
  for (const std::string& host : response.excluded)
    excluded += (excluded.empty() ? "" : ",") + host;
  return "drill: lost host " + failure.host.value_or("?") + " (" + std::to_string(lost_ranks) +
         " ranks); on_node_loss=" + response.action + ": relaunching " +
         std::to_string(after.ranks) + " ranks on " + std::to_string(after.nodes) + " node(s)" +
         (excluded.empty() ? std::string() : ", excluding " + excluded) + "\n";
}

}  // namespace tp
