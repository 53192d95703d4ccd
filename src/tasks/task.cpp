#include "spread/tasks/task.h"

namespace spread {

std::unique_ptr<TrainingTask> make_task(const Recipe& recipe, const std::string& run_dir, torch::Device device,
                                        const Note& note, const DataShard& shard) {
  return traits_of(recipe.train.objective).make_task(recipe, run_dir, device, note, shard);
}

}  // namespace spread
