#include "reasoning_flags.h"

namespace kiln::cli {

void ReasoningFlags::declare(OptionParser& p) {
  p.value({"-rea", "--reasoning"}, &reasoning, "on|off|auto",
          "thinking in the chat template (enable_thinking): on, off, or auto (default: the template's)");
  p.value({"--reasoning-budget"}, &budget, "N",
          "tokens a reasoning block may take before its end tag is forced: -1 no cap (default), 0 end at once",
          IntRange::at_least(-1));
  p.value({"--reasoning-budget-message"}, &budget_message, "MESSAGE",
          "text written before the forced end tag when the budget runs out (default: none)");
}

Result<std::optional<bool>> ReasoningFlags::enable_thinking() const {
  // ref: llama.cpp common/arg.cpp --reasoning (is_truthy / is_falsey / is_autoy).
  if (reasoning == "on" || reasoning == "enabled" || reasoning == "true" || reasoning == "1") return std::optional(true);
  if (reasoning == "off" || reasoning == "disabled" || reasoning == "false" || reasoning == "0")
    return std::optional(false);
  if (reasoning == "auto" || reasoning == "-1") return std::optional<bool>();
  return make_error("--reasoning: '", reasoning, "' is not on, off or auto");
}

}  // namespace kiln::cli
