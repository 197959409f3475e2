#pragma once
// Typed gathers: one record per rank at rank 0, indexed by rank. A record crosses as JSON (its
// to_json/from_json) encoded as CBOR, so strings travel with numbers, a new field needs no new
// MPI datatype, and nobody downstream reads figures by position. CBOR carries doubles bit for bit
// and strings as the bytes they are: a host name that is not UTF-8 reaches rank 0 unchanged, to be
// escaped once in the report, where JSON text would throw.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mpi/world.h"

namespace tp {

template <class Record>
std::vector<Record> gather_records_at_root(const World& world, const Record& mine) {
  const std::vector<std::uint8_t> bytes = nlohmann::json::to_cbor(nlohmann::json(mine));
  const std::vector<std::string> texts =
      gather_strings_at_root(world, std::string(bytes.begin(), bytes.end()));
  std::vector<Record> all;
  all.reserve(texts.size());
  for (const std::string& text : texts)
    all.push_back(nlohmann::json::from_cbor(text.begin(), text.end()).get<Record>());
  return all;
}

}  // namespace tp
