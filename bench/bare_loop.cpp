// The reference for bench/harness-overhead.sh: the same per-sample GEMMs, the same gradient buckets
// reduced with blocking MPI_Allreduce, and an SGD-momentum update, with no timers, hooks, faults or
// statistics. With --same-work it also synthesises each batch and shapes the gradients exactly as
// trainproof does, so the difference left is the harness alone.
#include <cblas.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "data/batch_source.h"
#include "kernels/grad_shaping.h"
#include "train/bucket_plan.h"

namespace {

struct Args {
  int layers = 4, hidden = 512, seq = 128, batch = 8, steps = 30, warmup = 5;
  double bucket_mb = 25.0;
  bool same_work = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string("--") + name + "=";
      return arg.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (auto v = value("layers"))
      a.layers = std::atoi(v);
    else if (auto v = value("hidden"))
      a.hidden = std::atoi(v);
    else if (auto v = value("seq"))
      a.seq = std::atoi(v);
    else if (auto v = value("batch"))
      a.batch = std::atoi(v);
    else if (auto v = value("steps"))
      a.steps = std::atoi(v);
    else if (auto v = value("warmup"))
      a.warmup = std::atoi(v);
    else if (auto v = value("bucket_mb"))
      a.bucket_mb = std::atof(v);
    else if (arg == "--same-work")
      a.same_work = true;
    else {
      std::fprintf(stderr, "bare_loop: unknown argument '%s'\n", argv[i]);
      std::exit(2);
    }
  }
  return a;
}

void gemm(bool ta, bool tb, int m, int n, int k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n,
              k, 1.0f, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Args a = parse(argc, argv);
  openblas_set_num_threads(1);

  const tp::ModelSpec model{a.layers, a.hidden, a.seq, a.batch};
  const tp::BatchShare share = tp::batch_share(a.batch, size, rank);
  const size_t layer = size_t(a.hidden) * a.hidden, sample = size_t(a.seq) * a.hidden;
  const int n = share.samples;
  std::vector<float> w(layer * a.layers, 0.01f), g(w.size()), m(w.size()), scratch(layer);
  std::vector<float> acts(sample * n * (a.layers + 1), 0.5f), up(sample * n), down(sample * n);
  const auto buckets = tp::plan_buckets(a.layers, layer, a.bucket_mb);
  const auto grid = tp::make_grad_grid(a.batch);
  tp::SyntheticBatchSource source(model, share, 1);
  tp::Batch batch;

  double start = 0;
  for (int step = 1; step <= a.steps; ++step) {
    if (step == a.warmup + 1) {
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    if (a.same_work) {
      source.next(step, batch);
      std::memcpy(acts.data(), batch.inputs.data(), sample * n * sizeof(float));
    }
    for (int l = 0; l < a.layers; ++l)
      for (int s = 0; s < n; ++s)
        gemm(false, false, a.seq, a.hidden, a.hidden, &acts[sample * (size_t(n) * l + s)],
             &w[layer * l], &acts[sample * (size_t(n) * (l + 1) + s)]);
    std::memcpy(up.data(), &acts[sample * size_t(n) * a.layers], up.size() * sizeof(float));
    for (int l = a.layers - 1; l >= 0; --l) {
      float* gl = &g[layer * l];
      std::fill(gl, gl + layer, 0.0f);
      for (int s = 0; s < n; ++s) {
        float* dy = &up[sample * s];
        if (a.same_work) {
          gemm(true, false, a.hidden, a.hidden, a.seq, &acts[sample * (size_t(n) * l + s)], dy,
               scratch.data());
          tp::shape_and_accumulate(scratch.data(), gl, layer, grid);
        } else {
          // Accumulating GEMM: the same FLOPs with no per-sample pass over the weights.
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, a.hidden, a.hidden, a.seq, 1.0f,
                      &acts[sample * (size_t(n) * l + s)], a.hidden, dy, a.hidden, 1.0f, gl,
                      a.hidden);
        }
        if (l > 0)
          gemm(false, true, a.seq, a.hidden, a.hidden, dy, &w[layer * l], &down[sample * s]);
      }
      up.swap(down);
    }
    for (const auto& b : buckets)
      MPI_Allreduce(MPI_IN_PLACE, &g[b.offset], int(b.count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < w.size(); ++i) {
      m[i] = 0.9f * m[i] + g[i];
      w[i] -= 1e-6f * m[i];
    }
  }
  double elapsed = MPI_Wtime() - start, slowest = 0;
  MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("{\"mean_step_s\": %.9f, \"steps\": %d, \"same_work\": %s}\n",
                slowest / (a.steps - a.warmup), a.steps - a.warmup, a.same_work ? "true" : "false");
  MPI_Finalize();
  return 0;
}
