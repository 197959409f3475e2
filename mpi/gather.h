#pragma once
// Typed gathers: one record per rank at rank 0, indexed by rank. A record crosses as JSON (its
// to_json/from_json), so strings travel with numbers, a new field needs no new MPI datatype, and
// nobody downstream reads figures by position. Doubles survive the trip bit for bit (the
// serialiser writes the shortest text that parses back to the same double); they must be finite.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mpi/world.h"

namespace tp {

template <class Record>
std::vector<Record> gather_records_at_root(const World& world, const Record& mine) {
  const std::vector<std::string> texts = gather_strings_at_root(world, nlohmann::json(mine).dump());
  std::vector<Record> all;
  all.reserve(texts.size());
  for (const std::string& text : texts) all.push_back(nlohmann::json::parse(text).get<Record>());
  return all;
}

}  // namespace tp
