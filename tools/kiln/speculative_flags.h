// Speculative decoding options with llama.cpp's flag names (--spec-type, -md, --spec-draft-*,
// --spec-ngram-*, and the draft model's placement: -devd, -ngld, -otd), shared by the subcommands
// that generate text.
#pragma once

#include <memory>
#include <string>

#include "llm/context.h"
#include "llm/model.h"
#include "llm/model_placement.h"
#include "llm/speculative/speculator.h"
#include "model_flags.h"
#include "options.h"

namespace kiln::cli {

struct SpeculativeFlags {
  SpeculativeOptions options;
  std::string draft_model_path;  // -md
  bool types_given = false;      // --spec-type was given (else -md alone means draft-simple)
  DraftPlacementFlags placement;  // -devd, -ngld, -otd

  void declare(OptionParser& p);
  // Whether any speculation was asked for.
  bool requested() const { return types_given || !draft_model_path.empty(); }
  // The options asked for, -md alone meaning draft-simple.
  SpeculativeOptions resolved() const;
  // The Speculator for `target`, whose context is mc.context, placed with `target_flags`: the draft
  // model loaded from -md, placed on mc.devices by the target's flags and -devd, -ngld, -otd
  // (place_draft_context), its context with the target's context options `target_context`, whose
  // n_ctx must be the target context's size, and an F16 cache, llama.cpp's default; or null when no
  // speculation was asked for (or --spec-type none). Errors are printed ("kiln COMMAND: ...") and
  // set *failed.
  std::unique_ptr<Speculator> make(const Model& target, const ModelFlags& target_flags, const ModelContext& mc,
                                   const ContextOptions& target_context, const char* command, bool* failed) const;
};

}  // namespace kiln::cli
