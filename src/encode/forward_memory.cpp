#include "spread/encode/forward_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "spread/runtime/memory.h"
#include "spread/util/error.h"

namespace spread {

double forward_pass_bytes(const TransformerConfig& config, int64_t batch, int64_t length, bool logits) {
  const double tokens = double(batch) * double(length);
  const double per_token = 8.0 * double(config.n_embd) + 2.0 * double(config.mlp_width()) +
                           3.0 * double(config.n_head) * double(length) +
                           (logits ? 3.0 * double(config.vocab_size) : 0.0);
  return 4.0 * tokens * per_token;
}

void check_forward_memory(const TransformerConfig& config, int64_t batch, int64_t length, bool logits) {
  if (batch <= 0 || length <= 0 || !memory_checks_enabled()) return;
  const double need = forward_pass_bytes(config, batch, length, logits);
  const AvailableMemory available = available_memory();
  if (available.bytes <= 0 || need <= available.bytes) return;
  const auto fits = int64_t(std::floor(double(batch) * available.bytes / need));
  throw UserError(fmt::format(
      "a forward pass over a batch of {} x {} tokens needs about {}, more than the {} available ({}): lower "
      "--batch-size to {} or less (SPREAD_MEMORY_CHECK=0 skips this check)",
      batch, length, memory_size_text(need), memory_size_text(available.bytes), available.source,
      std::max<int64_t>(1, fits)));
}

}  // namespace spread
