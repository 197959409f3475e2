// The reference for the async stall in bench/checkpoint-bandwidth.sh: the time one thread takes to
// copy a given number of bytes into memory that is already allocated and touched, which is the
// least a snapshot of the state into host memory can cost. Both buffers are written once before
// the timed copies, so no page fault or zero-fill is timed. Prints JSON: bytes, the copies' times
// and their median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Args {
  unsigned long long bytes = 0;
  int repeats = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--bytes=", 0) == 0)
      a.bytes = std::strtoull(argv[i] + 8, nullptr, 10);
    else if (arg.rfind("--repeats=", 0) == 0)
      a.repeats = std::atoi(argv[i] + 10);
    else {
      std::fprintf(stderr, "memory_copy: unknown argument '%s'\n", argv[i]);
      std::exit(2);
    }
  }
  if (a.bytes == 0 || a.repeats < 1) {
    std::fprintf(stderr, "memory_copy: usage: memory_copy --bytes=N [--repeats=R]\n");
    std::exit(2);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  std::vector<unsigned char> source(args.bytes), target(args.bytes);
  // Distinct contents in both, so every page is private and resident before any timing.
  for (size_t i = 0; i < source.size(); i += 4096) source[i] = static_cast<unsigned char>(i >> 12);
  std::memset(target.data(), 0xA5, target.size());

  std::vector<double> seconds;
  for (int r = 0; r < args.repeats; ++r) {
    const auto begin = std::chrono::steady_clock::now();
    std::memcpy(target.data(), source.data(), source.size());
    const auto end = std::chrono::steady_clock::now();
    seconds.push_back(std::chrono::duration<double>(end - begin).count());
    source[size_t(r) % source.size()] ^= target[source.size() / 2];  // keep the copies live
  }
  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  std::printf("{\"bytes\": %llu, \"copy_s\": %.6f, \"copies_s\": [", args.bytes,
              sorted[sorted.size() / 2]);
  for (size_t i = 0; i < seconds.size(); ++i) std::printf("%s%.6f", i ? ", " : "", seconds[i]);
  std::printf("]}\n");
  return 0;
}
