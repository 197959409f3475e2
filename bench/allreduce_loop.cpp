// The reference for bench/sweep-overhead.sh: MPI_Allreduce of float sums timed the way nccl-tests
// times it (back-to-back iterations after a barrier, divided by their count, averaged over ranks),
// with nothing else: no buffers from an interface, no checks, no report. Prints one JSON object.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

struct Args {
  long long min_bytes = 4096, max_bytes = 64ll << 20;
  int iters = 20, warmup = 5;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string("--") + name + "=";
      return arg.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("min_bytes"))
      a.min_bytes = std::atoll(v);
    else if (const char* v = value("max_bytes"))
      a.max_bytes = std::atoll(v);
    else if (const char* v = value("iters"))
      a.iters = std::atoi(v);
    else if (const char* v = value("warmup"))
      a.warmup = std::atoi(v);
    else {
      std::fprintf(stderr, "allreduce_loop: unknown argument %s\n", argv[i]);
      std::exit(2);
    }
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const Args a = parse(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<float> send(size_t(a.max_bytes / 4), 1.0f), recv(send.size());
  std::string rows;
  for (long long bytes = a.min_bytes; bytes <= a.max_bytes; bytes *= 2) {
    const int count = int(bytes / 4);
    for (int i = 0; i < a.warmup; ++i)
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double started = MPI_Wtime();
    for (int i = 0; i < a.iters; ++i)
      MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mine = (MPI_Wtime() - started) / a.iters, total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    char row[96];
    std::snprintf(row, sizeof row, "%s{\"bytes\": %lld, \"time_us\": %.3f}",
                  rows.empty() ? "" : ", ", bytes, total / size * 1e6);
    rows += row;
  }
  if (rank == 0) std::printf("{\"ranks\": %d, \"rows\": [%s]}\n", size, rows.c_str());
  MPI_Finalize();
  return 0;
}
