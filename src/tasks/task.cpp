#include "spread/tasks/task.h"

#include "spread/tasks/contrastive.h"
#include "spread/tasks/lm.h"
#include "spread/tasks/maxsim.h"
#include "spread/tasks/mlm.h"

namespace spread {

std::unique_ptr<TrainingTask> make_task(const Recipe& recipe, const std::string& run_dir, torch::Device device,
                                        const Note& note, const DataShard& shard) {
  const std::string& objective = recipe.train.objective;
  if (objective == "mlm") return std::make_unique<MaskedLanguageModelTask>(recipe, run_dir, device, note, shard);
  if (objective == "contrastive") return std::make_unique<ContrastiveTask>(recipe, run_dir, device, note, shard);
  if (objective == "maxsim") return std::make_unique<MaxSimTask>(recipe, run_dir, device, note, shard);
  return std::make_unique<LanguageModelTask>(recipe, run_dir, device, note, shard);
}

}  // namespace spread
