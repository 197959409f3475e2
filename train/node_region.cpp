#include "train/node_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <new>

#include "common/errors.h"

namespace tp {
namespace {

constexpr uint64_t kMagic = 0x7470626561747331;  // "tpbeats1"

size_t region_bytes(int slots) {
  return sizeof(RegionHeader) + size_t(slots) * sizeof(BeatSlot);
}

void* map_shared(int fd, size_t bytes) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return base == MAP_FAILED ? nullptr : base;
}

// The mapping is zero-filled; the atomics are constructed in place over it, the magic last, so an
// attaching rank never sees a half-made region.
void initialise(void* base, int slots, int active) {
  auto* header = new (base) RegionHeader();
  for (int i = 0; i < slots; ++i)
    new (static_cast<char*>(base) + sizeof(RegionHeader) + size_t(i) * sizeof(BeatSlot)) BeatSlot();
  header->slots.store(slots);
  header->active.store(active);
  header->magic.store(kMagic);
}

}  // namespace

NodeRegion::NodeRegion(void* base, size_t bytes)
    : base_(base),
      bytes_(bytes),
      header_(static_cast<RegionHeader*>(base)),
      slots_(reinterpret_cast<BeatSlot*>(static_cast<char*>(base) + sizeof(RegionHeader))) {}

NodeRegion::~NodeRegion() {
  ::munmap(base_, bytes_);
}

std::shared_ptr<NodeRegion> NodeRegion::create(const std::string& path, int slots) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  if (fd < 0)
    throw RuntimeError("cannot create the node's heartbeat memory '" + path +
                       "': " + std::strerror(errno));
  const size_t bytes = region_bytes(slots);
  void* base = ::ftruncate(fd, off_t(bytes)) == 0 ? map_shared(fd, bytes) : nullptr;
  const int error = errno;
  ::close(fd);
  if (!base) {
    ::unlink(path.c_str());
    throw RuntimeError("cannot map the node's heartbeat memory '" + path +
                       "': " + std::strerror(error));
  }
  initialise(base, slots, 0);  // each rank that maps it joins
  return std::shared_ptr<NodeRegion>(new NodeRegion(base, bytes));
}

std::shared_ptr<NodeRegion> NodeRegion::attach(const std::string& path, int slots) {
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW);
  if (fd < 0) return nullptr;
  struct stat st {};
  const size_t bytes = region_bytes(slots);
  void* base =
      ::fstat(fd, &st) == 0 && size_t(st.st_size) == bytes ? map_shared(fd, bytes) : nullptr;
  ::close(fd);
  if (!base) return nullptr;
  auto region = std::shared_ptr<NodeRegion>(new NodeRegion(base, bytes));
  if (region->header().magic.load() != kMagic || region->slots() != slots) return nullptr;
  return region;
}

std::shared_ptr<NodeRegion> NodeRegion::private_region(int slots) {
  const size_t bytes = region_bytes(slots);
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  initialise(base, slots, slots);  // one process holds every slot
  return std::shared_ptr<NodeRegion>(new NodeRegion(base, bytes));
}

bool NodeRegion::claim(double now_s, double stale_s) {
  double held = header_->claimed_s.load();
  if (held != 0 && now_s - held < stale_s) return false;
  return header_->claimed_s.compare_exchange_strong(held, now_s);
}

void NodeRegion::release(double token, double now_s) {
  if (header_->claimed_s.compare_exchange_strong(token, 0.0)) header_->published_s.store(now_s);
}

std::string node_memory_folder() {
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0)
    return "/dev/shm";
  return std::filesystem::temp_directory_path(ec).string();
}

}  // namespace tp
