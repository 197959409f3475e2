#include "train/unentered.h"

#include <algorithm>
#include <map>

namespace tp {
namespace {

struct Member {
  const HeartbeatRecord* rank;
  const CommProgress* comm;
};

// The operation and size of call `seq`, from whichever member still remembers it.
void describe_call(const std::vector<Member>& members, int64_t seq, Unentered& u) {
  for (const Member& m : members)
    for (const LedgerCall& call : m.comm->recent)
      if (call.seq == seq) {
        u.op = op_name(call.op);
        u.bytes = call.bytes;
        return;
      }
}

void name_ranks(const std::vector<const HeartbeatRecord*>& ranks, Unentered& u) {
  for (const HeartbeatRecord* r : ranks) {
    u.ranks.push_back(r->rank);
    u.hosts.push_back(r->host);
  }
}

std::optional<Unentered> collective_gap(const std::string& label,
                                        const std::vector<Member>& members) {
  int64_t least = members.front().comm->entered, most = least;
  for (const Member& m : members) {
    least = std::min(least, m.comm->entered);
    most = std::max(most, m.comm->entered);
  }
  if (most == least) return std::nullopt;
  Unentered u;
  u.comm = label;
  u.seq = least + 1;
  std::vector<const HeartbeatRecord*> behind;
  for (const Member& m : members)
    if (m.comm->entered >= u.seq)
      u.waiting.push_back(m.rank->rank);
    else if (m.comm->completed < m.comm->entered)
      u.inside_previous.push_back(m.rank->rank);
    else
      behind.push_back(m.rank);
  name_ranks(behind, u);
  describe_call(members, u.seq, u);
  return u;
}

// A rank waits in a transfer with `peer` (entered, not completed) that the peer has not entered:
// its own last transfer is with another rank, or an earlier one with this rank.
std::optional<Unentered> pair_gap(const std::string& label, const std::vector<Member>& members,
                                  const std::vector<HeartbeatRecord>& records) {
  std::map<int, const CommProgress*> by_rank;
  for (const Member& m : members) by_rank[m.rank->rank] = m.comm;
  for (const Member& m : members) {
    const CommProgress& mine = *m.comm;
    if (mine.entered <= mine.completed || mine.peer < 0 || size_t(mine.peer) >= records.size())
      continue;
    const auto theirs = by_rank.find(mine.peer);
    const bool entered = theirs != by_rank.end() && theirs->second->peer == m.rank->rank &&
                         theirs->second->entered >= mine.entered;
    if (entered) continue;
    Unentered u;
    u.comm = label;
    u.seq = mine.entered;
    u.waiting = {m.rank->rank};
    name_ranks({&records[size_t(mine.peer)]}, u);
    describe_call({m}, u.seq, u);
    return u;
  }
  return std::nullopt;
}

bool more_waiting(const Unentered& a, const Unentered& b) {
  return a.waiting.size() != b.waiting.size() ? a.waiting.size() > b.waiting.size()
                                              : a.comm < b.comm;
}

}  // namespace

std::optional<Unentered> first_unentered(const std::vector<HeartbeatRecord>& records) {
  std::map<std::string, std::vector<Member>> by_label;
  for (const HeartbeatRecord& r : records)
    if (r.present)
      for (const CommProgress& c : r.comms) by_label[c.label].push_back({&r, &c});
  std::optional<Unentered> collective, pair;
  for (const auto& [label, members] : by_label) {
    const bool p2p = label.size() > 4 && label.compare(label.size() - 4, 4, "/p2p") == 0;
    std::optional<Unentered> gap =
        p2p ? pair_gap(label, members, records) : collective_gap(label, members);
    std::optional<Unentered>& best = p2p ? pair : collective;
    if (gap && (!best || more_waiting(*gap, *best))) best = std::move(gap);
  }
  return collective ? collective : pair;
}

std::string unentered_text(const Unentered& u) {
  std::string text = u.comm + " seq " + std::to_string(u.seq);
  if (!u.op.empty()) text += " (" + u.op + ", " + std::to_string(u.bytes) + " B)";
  text += " was not entered by ";
  for (size_t i = 0; i < u.ranks.size() && i < 8; ++i)
    text +=
        (i ? ", " : "") + std::string("rank ") + std::to_string(u.ranks[i]) + " on " + u.hosts[i];
  if (u.ranks.size() > 8) text += " and " + std::to_string(u.ranks.size() - 8) + " more";
  if (!u.inside_previous.empty())
    text += (u.ranks.empty() ? "" : ", nor by ") + std::to_string(u.inside_previous.size()) +
            " rank(s) still inside seq " + std::to_string(u.seq - 1);
  return text;
}

}  // namespace tp
