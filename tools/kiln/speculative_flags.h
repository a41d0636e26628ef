// Speculative decoding options with llama.cpp's flag names (--spec-type, -md, --spec-draft-*,
// --spec-ngram-*), shared by the subcommands that generate text.
#pragma once

#include <memory>
#include <string>

#include "llm/context.h"
#include "llm/model.h"
#include "llm/speculative/speculator.h"
#include "options.h"

namespace kiln::cli {

struct SpeculativeFlags {
  SpeculativeOptions options;
  std::string draft_model_path;  // -md
  bool types_given = false;      // --spec-type was given (else -md alone means draft-simple)

  void declare(OptionParser& p);
  // Whether any speculation was asked for.
  bool requested() const { return types_given || !draft_model_path.empty(); }
  // The options asked for, -md alone meaning draft-simple.
  SpeculativeOptions resolved() const;
  // The Speculator for `target` (the draft model loaded from -md, its context created on `backend`
  // with the target's context options `target_context`, whose n_ctx must be the target context's
  // size, and an F16 cache, llama.cpp's default; its weights placed with the target's
  // `target_weights`), or null when no speculation was asked for (or --spec-type none). Errors
  // are printed ("kiln COMMAND: ...") and set *failed.
  std::unique_ptr<Speculator> make(const Model& target, Backend& backend,
                                   const ContextOptions& target_context, const WeightOptions& target_weights,
                                   const char* command, bool* failed) const;
};

}  // namespace kiln::cli
