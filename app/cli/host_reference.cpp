#include "app/cli/host_reference.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "common/errors.h"

namespace tp {
namespace {

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

const ReferenceFigureName* figure_named(const std::string& name) {
  for (const ReferenceFigureName& f : reference_figure_names())
    if (f.name == name) return &f;
  return nullptr;
}

double figure_value(const std::string& where, const std::string& key, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0)
    throw UsageError(where + ": " + key + " = '" + text + "' is not a number >= 0");
  return value;
}

}  // namespace

const std::vector<ReferenceFigureName>& reference_figure_names() {
  using K = ReferenceKind;
  static const std::vector<ReferenceFigureName> names = {
      {"nodes", K::job_shape, ""},
      {"ranks_per_node", K::job_shape, ""},
      {"gpus_per_node", K::job_shape, ""},
      {"busbw_gbps", K::higher_is_better, "min_busbw_gbps"},
      {"pair_gbps", K::higher_is_better, "min_pair_gbps"},
      {"step_cv", K::spread, "max_step_cv"},
      {"au", K::higher_is_better, "min_au"},
      {"straggler_score", K::spread, "min_straggler_score"},
      {"comm_exposed_fraction", K::lower_is_better, "max_comm_exposed_fraction"},
      {"ckpt_write_gbps", K::higher_is_better, "min_ckpt_write_gbps"},
      {"ckpt_write_gbps_per_node", K::higher_is_better, "min_ckpt_write_gbps_per_node"},
      {"ckpt_write_gbps_per_gpu", K::higher_is_better, "min_ckpt_write_gbps_per_gpu"},
      {"ckpt_overhead", K::share_of_time, "max_ckpt_overhead"},
      {"goodput", K::higher_is_better, "min_goodput"},
      {"job_goodput", K::higher_is_better, "min_job_goodput"},
      {"restore_gbps", K::higher_is_better, "min_restore_gbps"},
      {"restore_gbps_per_node", K::higher_is_better, "min_restore_gbps_per_node"},
      {"restore_gbps_per_gpu", K::higher_is_better, "min_restore_gbps_per_gpu"},
      {"restore_s", K::lower_is_better, "max_restore_s"},
      {"rto_s", K::lower_is_better, "max_rto_s"},
      {"rpo_steps", K::spread, "max_rpo_steps"},
  };
  return names;
}

std::string split_reference_section(const std::string& path, const std::string& text,
                                    HostReference& reference) {
  InventoryLines inventory;
  return split_host_sections(path, text, reference, inventory);
}

std::string split_host_sections(const std::string& path, const std::string& text,
                                HostReference& reference, InventoryLines& inventory) {
  std::istringstream lines(text);
  std::string line, rest;
  // "reference", "inventory", "health", or "" for a section program_options reads.
  std::string section;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string body = trimmed(line);
    if (!body.empty() && body.front() == '[')
      section = body == "[reference]"   ? "reference"
                : body == "[inventory]" ? "inventory"
                : body == "[health]"    ? "health"
                                        : "";
    if (section.empty()) {
      rest += line + "\n";
      continue;
    }
    rest += "\n";
    if (body.empty() || body.front() == '#' || body.front() == '[') continue;
    const std::string where = "gate.file '" + path + "', line " + std::to_string(number);
    const size_t equals = body.find('=');
    if (equals == std::string::npos)
      throw UsageError(where + ": '" + body + "' is not NAME = VALUE");
    const std::string key = trimmed(body.substr(0, equals));
    const std::string value = trimmed(body.substr(equals + 1));
    if (section == "inventory" || section == "health") {
      // [health]'s keys travel with the inventory's, named apart (node/inventory_spec.h).
      const std::string name = section == "health" ? "health." + key : key;
      if (!inventory.emplace(name, InventoryLine{value, number}).second)
        throw UsageError(where + ": " + section + " key " + key + " given twice");
      continue;
    }
    if (!figure_named(key)) {
      std::string known;
      for (const ReferenceFigureName& f : reference_figure_names())
        known += (known.empty() ? "" : ", ") + f.name;
      throw UsageError(where + ": unknown reference figure '" + key + "' (known: " + known + ")");
    }
    if (reference.count(key))
      throw UsageError(where + ": reference figure " + key + " given twice");
    reference[key] = figure_value(where, key, value);
  }
  return rest;
}

}  // namespace tp
