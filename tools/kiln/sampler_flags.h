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

struct SamplerFlags {
  SamplerParams params;  // logit_bias holds the --logit-bias values
  int64_t seed = -1;     // -1: a random seed (printed)
  bool ignore_eos = false;
  // At most one of these constrains the output (llama.cpp's names).
  std::string grammar, grammar_file, json_schema, json_schema_file;

  void declare(OptionParser& p);
  // The sampler for `model`, with the grammar or JSON schema attached; prints the error and
  // returns nullopt.
  std::optional<Sampler> make_sampler(const Model& model, const char* command) const;

 private:
  // The GBNF the flags ask for ("" for none), or an error naming the flag.
  Result<std::string> grammar_text() const;
};

}  // namespace kiln::cli
