#include "sampler_flags.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "text/grammar/grammar_constraint.h"
#include "text/grammar/json_schema.h"
#include "text_file.h"

namespace kiln::cli {

void SamplerFlags::declare(OptionParser& p) {
  p.value({"--temp"}, &params.temperature, "T", "temperature (default 0.8; 0: greedy)");
  p.value({"--top-k"}, &params.top_k, "K", "top-k sampling (default 40; 0: off)");
  p.value({"--top-p"}, &params.top_p, "P", "top-p sampling (default 0.95; 1: off)");
  p.value({"--min-p"}, &params.min_p, "P", "min-p sampling (default 0.05; 0: off)");
  p.value({"--typical"}, &params.typical_p, "P", "locally typical sampling (default 1: off)");
  p.value({"--repeat-penalty"}, &params.repeat_penalty, "X", "penalty for repeated tokens (default 1: off)");
  p.value({"--repeat-last-n"}, &params.penalty_last_n, "N", "tokens the penalties look back on (default 64; -1: all)");
  p.value({"--presence-penalty"}, &params.presence_penalty, "X", "presence penalty (default 0)");
  p.value({"--frequency-penalty"}, &params.frequency_penalty, "X", "frequency penalty (default 0)");
  p.value({"-s", "--seed"}, &seed, "N", "random seed (default -1: random)");
  p.flag({"--ignore-eos"}, &ignore_eos, "keep generating past end-of-generation tokens");
  p.custom({"-l", "--logit-bias"}, [this](const std::string& v) {
    logit_bias.push_back(v);
    return std::string();
  }, "TOKEN(+|-)BIAS", "add BIAS to TOKEN's logit, e.g. 15043+1 or 2-inf (repeatable)");
  p.value({"--grammar"}, &grammar, "GRAMMAR", "GBNF grammar the output must follow (llama.cpp's syntax)");
  p.value({"--grammar-file"}, &grammar_file, "FILE", "read the GBNF grammar from FILE");
  p.value({"-j", "--json-schema"}, &json_schema, "SCHEMA",
          "JSON schema the output must follow, e.g. '{\"type\": \"object\"}' for any JSON object");
  p.value({"-jf", "--json-schema-file"}, &json_schema_file, "FILE", "read the JSON schema from FILE");
}

Result<std::string> SamplerFlags::grammar_text() const {
  const int given = !grammar.empty() + !grammar_file.empty() + !json_schema.empty() + !json_schema_file.empty();
  if (given > 1) return make_error("give only one of --grammar, --grammar-file, --json-schema, --json-schema-file");
  if (!grammar.empty()) return grammar;
  if (!grammar_file.empty()) return read_text_file(grammar_file);
  if (json_schema.empty() && json_schema_file.empty()) return std::string();
  std::string text = json_schema;
  if (!json_schema_file.empty()) {
    KILN_ASSIGN_OR_RETURN(text, read_text_file(json_schema_file));
  }
  const char* flag = json_schema_file.empty() ? "--json-schema" : "--json-schema-file";
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return make_error(flag, ": not valid JSON");
  auto gbnf = grammar::json_schema_to_gbnf(schema);
  if (!gbnf.ok()) return make_error(flag, ": ", gbnf.error().message);
  return std::move(*gbnf);
}

std::optional<Sampler> SamplerFlags::make_sampler(const Model& model, const char* command) const {
  SamplerParams sp = params;
  if (seed < 0) {
    sp.seed = std::random_device{}();
    std::fprintf(stderr, "kiln %s: seed %llu\n", command, static_cast<unsigned long long>(sp.seed));
  } else {
    sp.seed = static_cast<uint64_t>(seed);
  }
  for (const auto& lb : logit_bias) {
    const size_t sign = lb.find_first_of("+-", 1);
    if (sign == std::string::npos) {
      std::fprintf(stderr, "kiln %s: --logit-bias '%s' is not TOKEN+BIAS or TOKEN-BIAS\n", command, lb.c_str());
      return std::nullopt;
    }
    const std::string id_text = lb.substr(0, sign);
    char* end = nullptr;
    const long id = std::strtol(id_text.c_str(), &end, 10);
    const std::string bias_text = lb.substr(sign + 1);
    float bias = 0.0f;
    if (bias_text == "inf") {
      bias = INFINITY;
    } else {
      char* bend = nullptr;
      bias = std::strtof(bias_text.c_str(), &bend);
      if (bias_text.empty() || *bend != '\0') {
        std::fprintf(stderr, "kiln %s: --logit-bias '%s': bad bias\n", command, lb.c_str());
        return std::nullopt;
      }
    }
    if (id_text.empty() || *end != '\0' || id < 0 || id > std::numeric_limits<int32_t>::max()) {
      std::fprintf(stderr, "kiln %s: --logit-bias '%s': bad token id\n", command, lb.c_str());
      return std::nullopt;
    }
    sp.logit_bias.emplace_back(static_cast<int32_t>(id), lb[sign] == '-' ? -bias : bias);
  }
  if (ignore_eos) {
    for (int32_t id : model.tokenizer().vocab().eog_ids()) sp.logit_bias.emplace_back(id, -INFINITY);
  }
  auto s = Sampler::create(sp, static_cast<int32_t>(model.hparams().n_vocab));
  if (!s.ok()) {
    std::fprintf(stderr, "kiln %s: %s\n", command, s.error().message.c_str());
    return std::nullopt;
  }
  auto gbnf = grammar_text();
  if (!gbnf.ok()) {
    std::fprintf(stderr, "kiln %s: %s\n", command, gbnf.error().message.c_str());
    return std::nullopt;
  }
  if (!gbnf->empty()) {
    auto constraint = grammar::GrammarConstraint::create({.gbnf = *gbnf}, model.grammar_vocab(), &model.tokenizer());
    if (!constraint.ok()) {
      std::fprintf(stderr, "kiln %s: %s\n", command, constraint.error().message.c_str());
      return std::nullopt;
    }
    s->set_grammar(std::move(*constraint));
  }
  return std::move(*s);
}

}  // namespace kiln::cli
