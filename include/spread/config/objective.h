#pragma once
// The training objectives and, for each, the traits that the rest of spread asks of it: which data and attention it
// needs, what head the model carries (and so what evaluation, export, generation and mining do with a trained
// model), how much activation memory a micro-step takes, and how its task is made. Nothing outside tasks/ compares
// objectives: it asks these traits.
//
// The traits are declared here, below every part that asks them (the recipe parses train.objective), and defined
// beside each task in tasks/. Adding an objective: an enumerator below, a task (tasks/NAME.h, tasks/NAME.cpp) that
// defines its ObjectiveTraits, and its entry in the registry (src/tasks/objective.cpp: the declaration and the line
// of the list). The test
// ObjectiveRegistry.EveryObjectiveHasEveryTrait lists them all, with what each must be.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace c10 {
struct Device;
}

namespace spread {

struct Recipe;
class TrainingTask;
struct DataShard;
using Note = std::function<void(const std::string&)>;

enum class Objective { lm, mlm, contrastive, maxsim };

// What data.source must give.
enum class Inputs { text, pairs };

// The attention mask the model must have; a model folder given as train.init_from must have it too.
enum class Attention { causal, bidirectional, either };

// What the trained model ends in, which decides what is done with it afterwards.
enum class Head {
  next_token,     // vocabulary logits of the next token: spread generate, perplexity, a GPT-2 / Llama export
  masked_token,   // vocabulary logits of masked tokens (BERT's MLM transform when a folder has one); embeddings
  none,           // pooled hidden states are the embeddings: eval, mine, encode, a sentence-transformers export
  token_vectors,  // a projection to one vector per token (late interaction): MaxSim eval, a PyLate export
};

// The sizes of one micro-step that the memory estimate knows and an objective's activation formula reads.
struct MicroStepSizes {
  double batch = 0;        // train.batch_size
  double negatives = 0;    // hard negatives per example
  double world = 1;        // data-parallel processes
  double text_length = 0;  // tokens per encoder text (data.max_length, else model.block_size)
  double vocab = 0;        // rows of the vocabulary logits
};

// What one micro-step of the objective sends through the model at once (train/memory_estimate.cpp prices it).
struct ActivationShape {
  double tokens = 0;                      // token positions in the model's forward pass(es) held at once
  double sequence_length = 0;             // one sequence's length (attention probabilities are quadratic in it)
  double logit_floats = 0;                // vocabulary logits kept for the loss (logits, softmax, gradient)
  double own_floats = 0;                  // the objective's other tensors (similarity scores, head outputs)
  std::vector<std::string> length_keys;   // recipe keys, besides train.batch_size, that lower `tokens`
  std::string other_remedy;               // one more way to lower the memory, or ""
};

// An objective that predicts tokens at every position of `sequences` texts of `length` tokens: the blocks' states
// and the vocabulary logits, kept three times (logits, softmax, gradient).
inline ActivationShape token_prediction_activations(double sequences, double length, double vocab,
                                                    const std::string& length_key) {
  ActivationShape a;
  a.tokens = sequences * length;
  a.sequence_length = length;
  a.logit_floats = 3 * a.tokens * vocab;
  a.length_keys = {length_key};
  return a;
}

using TaskFactory = std::unique_ptr<TrainingTask> (*)(const Recipe& recipe, const std::string& run_dir,
                                                      const c10::Device& device, const Note& note,
                                                      const DataShard& shard);

struct ObjectiveTraits {
  Objective objective;
  const char* name;     // the recipe's spelling (train.objective)
  const char* summary;  // one line, for messages and the recipe reference
  Inputs inputs;
  Attention attention;
  Head head;
  ActivationShape (*activations)(const Recipe& recipe, const MicroStepSizes& sizes);
  TaskFactory make_task;

  // Texts are framed "[CLS] text [SEP]" (the tokenizer reserves those ids) and the model is an encoder.
  bool encoder() const { return head != Head::next_token; }
  bool fits(bool causal) const {
    return attention == Attention::either || (attention == Attention::causal) == causal;
  }
};

// Every objective, in the registry's order.
const std::vector<const ObjectiveTraits*>& objectives();
const ObjectiveTraits& traits_of(Objective objective);
std::optional<Objective> objective_named(const std::string& name);
std::string name_of(Objective objective);
// The quoted names of the objectives that satisfy `keep`, "\"a\", \"b\" or \"c\"", for messages.
std::string objective_names(const std::function<bool(const ObjectiveTraits&)>& keep);

}  // namespace spread
