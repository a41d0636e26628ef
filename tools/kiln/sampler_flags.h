// Sampling options with llama.cpp's flag names and meanings (--temp 0 or less: greedy; --top-k 0
// or less, --top-p 1, --min-p 0, --typical 1: off), shared by the subcommands that generate text.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "llm/model.h"
#include "llm/sampler.h"
#include "options.h"

namespace kiln::cli {

// The output-constraint flags (llama.cpp's names), at most one of them: --grammar,
// --grammar-file, -j/--json-schema, -jf/--json-schema-file.
struct GrammarFlags {
  std::string grammar, grammar_file, json_schema, json_schema_file;

  void declare(OptionParser& p);
  // What they give, files read: a GBNF grammar or a JSON schema's text (checked: JSON that
  // converts to a grammar); both empty for none. Errors name the flag.
  struct Constraint {
    std::string gbnf, json_schema;
  };
  Result<Constraint> read() const;
  // The GBNF the flags ask for, a schema converted ("" for none).
  Result<std::string> gbnf() const;
};

struct SamplerFlags {
  SamplerParams params;  // logit_bias holds the --logit-bias values
  int64_t seed = -1;     // -1: a random seed (printed)
  bool ignore_eos = false;
  GrammarFlags output;  // the grammar or JSON schema the output must follow

  void declare(OptionParser& p);
  // The sampler for `model`, with the grammar or JSON schema attached; prints the error and
  // returns nullopt.
  std::optional<Sampler> make_sampler(const Model& model, const char* command) const;
};

}  // namespace kiln::cli
