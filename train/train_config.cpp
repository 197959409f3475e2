#include "train/train_config.h"

#include <iomanip>
#include <sstream>
#include <string>

#include "common/digest.h"

namespace tp {

std::string scenario_hash(const TrainConfig& c) {
  // The batch as it was set: a per-rank batch hashes alike at every world size (a restore checks
  // the world size on its own). A global batch keeps the text it always had, so checkpoints of
  // earlier versions still restore.
  const std::string batch = c.batch_per_rank > 0
                                ? "model.batch_per_rank=" + std::to_string(c.batch_per_rank)
                                : "model.batch=" + std::to_string(c.model.global_batch);
  std::ostringstream canonical;
  canonical << std::setprecision(9) << "model.layers=" << c.model.layers
            << ";model.hidden=" << c.model.hidden << ";model.seq=" << c.model.seq << ";" << batch
            << ";model.dtype=" << c.dtype << ";train.seed=" << c.seed
            << ";train.optimizer=" << int(c.optimizer.kind) << ";lr=" << c.optimizer.lr
            << ";momentum=" << c.optimizer.momentum << ";beta1=" << c.optimizer.beta1
            << ";beta2=" << c.optimizer.beta2 << ";eps=" << c.optimizer.eps << ";data=";
  // A dataset's content is a function of its samples, lengths and the seed, never of its
  // format or shard count, so those may change between a checkpoint and its resume.
  if (c.data.dir.empty())
    canonical << "synthetic-philox4x32-10";
  else
    canonical << "dataset:samples=" << c.data.samples << ",bytes=" << c.data.sample_bytes
              << ",spread=" << c.data.spread << ",rank_shift=" << c.data.rank_shift;
  const std::string text = canonical.str();
  return digest_of(text.data(), text.size()).hex();
}

void resolve_global_batch(TrainConfig& c, int world_size) {
  if (c.batch_per_rank > 0) c.model.global_batch = c.batch_per_rank * int64_t(world_size);
}

}  // namespace tp
