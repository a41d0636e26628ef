// Reasoning options with llama.cpp's flag names (-rea/--reasoning, --reasoning-budget,
// --reasoning-budget-message), shared by `kiln serve` and `kiln chat`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"
#include "options.h"

namespace kiln::cli {

struct ReasoningFlags {
  std::string reasoning = "auto";  // -rea: on|off|auto (llama.cpp's spellings accepted)
  int32_t budget = -1;             // --reasoning-budget: tokens per block; -1 no cap, 0 end at once
  std::string budget_message;      // --reasoning-budget-message

  void declare(OptionParser& p);
  // The template's enable_thinking that -rea asks for: nullopt for auto (the template's
  // default). Errors name the flag and the value.
  Result<std::optional<bool>> enable_thinking() const;
};

}  // namespace kiln::cli
