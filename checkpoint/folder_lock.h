#pragma once
// One job per checkpoint folder: an exclusive flock on a lock file in the folder, held by rank 0
// for the whole run through one read-write descriptor. The kernel releases it when the process
// ends however it ends, so a killed job never leaves the folder locked. The holder writes its host
// and pid into the file, so a second job can say who holds it. flock is only as wide as the
// filesystem makes it (docs/checkpoint.md, "One job per folder").
#include <functional>
#include <string>

namespace tp {

// The lock file's name inside checkpoint.dir. It is never deleted: a job waiting on a deleted
// file would lock a file no later job sees.
inline constexpr const char* kFolderLockFile = "trainproof.lock";

class FolderLock {
 public:
  enum class State {
    none,         // not taken (default-constructed, or moved from)
    held,         // this process holds the lock
    busy,         // another holder kept it for the whole wait; holder() says who
    unsupported,  // the filesystem refuses flock (ENOSYS, EOPNOTSUPP, ENOLCK); detail() says how
  };

  // Opens (creating) `path` read-write and takes an exclusive flock, trying again until `wait_s`
  // seconds have passed. Once held, writes "host pid" into the file. `on_wait` runs once, when the
  // first try finds the lock busy, with the holder as the file names it. A file that cannot be
  // opened or written is a RuntimeError naming it.
  static FolderLock take(const std::string& path, double wait_s, const std::string& host,
                         const std::function<void(const std::string& holder)>& on_wait = {});

  FolderLock() = default;
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&& other) noexcept;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  ~FolderLock();  // closing the descriptor releases the lock

  // Another handle on a held lock (a duplicate descriptor of the same open file, which flock
  // treats as the same holder): the lock stays until every handle is closed. A RuntimeError when
  // the descriptor cannot be duplicated; an unheld lock gives an unheld handle.
  FolderLock share() const;

  State state() const { return state_; }
  bool held() const { return state_ == State::held; }
  // busy: "host H, pid P" as the holder wrote it ("an unknown holder" before it has written).
  const std::string& holder() const { return detail_; }
  // unsupported: the errno text of the refusal.
  const std::string& detail() const { return detail_; }

 private:
  void release();

  int fd_ = -1;
  State state_ = State::none;
  std::string detail_;
};

// What a lock file says about its holder: "host H, pid P", or "an unknown holder".
std::string describe_lock_holder(const std::string& file_text);

}  // namespace tp
