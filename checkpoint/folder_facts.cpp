#include "checkpoint/folder_facts.h"

#include <sys/vfs.h>

#include <cstdio>
#include <map>

namespace tp {

std::string filesystem_type(const std::string& path) {
  struct statfs info {};
  if (::statfs(path.c_str(), &info) != 0) return "unknown";
  // Magic numbers from linux/magic.h and the parallel filesystems' own headers.
  static const std::map<unsigned long, const char*> kNames = {
      {0xEF53, "ext2/3/4"},   {0x58465342, "xfs"},     {0x9123683E, "btrfs"},
      {0x01021994, "tmpfs"},  {0x794C7630, "overlay"}, {0x2FC12FC1, "zfs"},
      {0x6969, "nfs"},        {0x0BD00BD0, "lustre"},  {0x47504653, "gpfs"},
      {0x19830326, "beegfs"}, {0x00C36400, "ceph"},    {0x65735546, "fuse"},
      {0xFF534D42, "cifs"},   {0xFE534D42, "smb2"},    {0x6B414653, "afs"},
      {0x013111A8, "ibrix"},  {0x7461636F, "ocfs2"},   {0x01161970, "gfs2"},
      {0xAAD7AAEA, "panfs"},  {0xA501FCF5, "vxfs"}};
  const auto found = kNames.find(static_cast<unsigned long>(info.f_type));
  if (found != kNames.end()) return found->second;
  char text[48];
  std::snprintf(text, sizeof text, "unknown (0x%lx)", static_cast<unsigned long>(info.f_type));
  return text;
}

bool node_local_filesystem(const std::string& type) {
  return type == "ext2/3/4" || type == "xfs" || type == "btrfs" || type == "tmpfs" ||
         type == "overlay" || type == "zfs";
}

std::vector<std::string> checkpoint_folder_warnings(const CheckpointFolderFacts& facts, int hosts) {
  std::vector<std::string> warnings = facts.warnings;
  if (hosts > 1 && node_local_filesystem(facts.filesystem)) {
    warnings.push_back("checkpoint.dir '" + facts.path + "' is on a node-local filesystem (" +
                       facts.filesystem + ") while the run spans " + std::to_string(hosts) +
                       " nodes: a rank restarted on another node will not find its checkpoint");
  }
  if (facts.filesystem == "tmpfs")
    warnings.push_back("checkpoint.dir '" + facts.path +
                       "' is on tmpfs: checkpoints live in memory and do not survive the node");
  return warnings;
}

}  // namespace tp
