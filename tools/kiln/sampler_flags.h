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

  void declare(OptionParser& p);
  // The sampler for `model`; prints the error and returns nullopt.
  std::optional<Sampler> make_sampler(const Model& model, const char* command) const;
};

}  // namespace kiln::cli
