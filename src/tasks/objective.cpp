#include "spread/config/objective.h"

#include <algorithm>
#include <stdexcept>

namespace spread {

// Each is defined beside its task (tasks/NAME.cpp).
extern const ObjectiveTraits kLanguageModelObjective;
extern const ObjectiveTraits kMaskedLanguageModelObjective;
extern const ObjectiveTraits kContrastiveObjective;
extern const ObjectiveTraits kMaxSimObjective;

const std::vector<const ObjectiveTraits*>& objectives() {
  static const std::vector<const ObjectiveTraits*> registry{
      &kLanguageModelObjective,
      &kMaskedLanguageModelObjective,
      &kContrastiveObjective,
      &kMaxSimObjective,
  };
  return registry;
}

const ObjectiveTraits& traits_of(Objective objective) {
  const auto& all = objectives();
  const auto it = std::find_if(all.begin(), all.end(), [&](const auto* t) { return t->objective == objective; });
  if (it == all.end()) throw std::logic_error("objective " + std::to_string(int(objective)) + " is not registered");
  return **it;
}

std::optional<Objective> objective_named(const std::string& name) {
  for (const auto* t : objectives())
    if (name == t->name) return t->objective;
  return std::nullopt;
}

std::string name_of(Objective objective) { return traits_of(objective).name; }

std::string objective_names(const std::function<bool(const ObjectiveTraits&)>& keep) {
  std::vector<std::string> names;
  for (const auto* t : objectives())
    if (keep(*t)) names.push_back(std::string("\"") + t->name + "\"");
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace spread
