#include "sampler_flags.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "llm/model_sampler.h"
#include "messages.h"
#include "text/grammar/json_schema.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

const FloatRange kProbability = FloatRange::between(0, 1);

// "TOKEN+BIAS" or "TOKEN-BIAS", as llama.cpp's --logit-bias; BIAS may be "inf".
std::string parse_logit_bias(const std::string& v, std::vector<std::pair<int32_t, float>>* out) {
  const size_t sign = v.find_first_of("+-", 1);
  const std::string bad = "'" + v + "' is not TOKEN+BIAS or TOKEN-BIAS";
  if (sign == std::string::npos) return bad;
  int64_t id = 0;
  if (!parse_integer(v.substr(0, sign), IntRange::between(0, std::numeric_limits<int32_t>::max()), &id)
           .empty())
    return bad + " (TOKEN: a token id)";
  const std::string bias_text = v.substr(sign + 1);
  char* end = nullptr;
  const float bias = std::strtof(bias_text.c_str(), &end);
  if (bias_text.empty() || *end != '\0' || std::isnan(bias)) return bad + " (BIAS: a number or inf)";
  out->emplace_back(static_cast<int32_t>(id), v[sign] == '-' ? -bias : bias);
  return "";
}

}  // namespace

void SamplerFlags::declare(OptionParser& p) {
  p.value({"--temp"}, &params.temperature, "T", "temperature (default 0.8; 0 or less: greedy)");
  p.value({"--top-k"}, &params.top_k, "K", "top-k sampling (default 40; 0 or less: off)");
  p.value({"--top-p"}, &params.top_p, "P", "top-p sampling, 0..1 (default 0.95; 1: off)", kProbability);
  p.value({"--min-p"}, &params.min_p, "P", "min-p sampling, 0..1 (default 0.05; 0: off)", kProbability);
  p.value({"--typical"}, &params.typical_p, "P", "locally typical sampling, 0..1 (default 1: off)",
          kProbability);
  p.value({"--repeat-penalty"}, &params.repeat_penalty, "X",
          "penalty for repeated tokens, > 0 (default 1: off)", FloatRange::greater_than(0));
  p.value({"--repeat-last-n"}, &params.penalty_last_n, "N",
          "tokens the penalties look back on (default 64; -1: all)", IntRange::at_least(-1));
  p.value({"--presence-penalty"}, &params.presence_penalty, "X", "presence penalty (default 0)");
  p.value({"--frequency-penalty"}, &params.frequency_penalty, "X", "frequency penalty (default 0)");
  p.value({"-s", "--seed"}, &seed, "N", "random seed (default -1: random)", IntRange::at_least(-1));
  p.flag({"--ignore-eos"}, &ignore_eos, "keep generating past end-of-generation tokens");
  p.custom(
      {"-l", "--logit-bias"},
      [this](const std::string& v) { return parse_logit_bias(v, &params.logit_bias); }, "TOKEN(+|-)BIAS",
      "add BIAS to TOKEN's logit, e.g. 15043+1 or 2-inf (repeatable)");
  output.declare(p);
}

void GrammarFlags::declare(OptionParser& p) {
  p.value({"--grammar"}, &grammar, "GRAMMAR", "GBNF grammar the output must follow (llama.cpp's syntax)");
  p.value({"--grammar-file"}, &grammar_file, "FILE", "read the GBNF grammar from FILE");
  p.value({"-j", "--json-schema"}, &json_schema, "SCHEMA",
          "JSON schema the output must follow, e.g. '{\"type\": \"object\"}' for any JSON object");
  p.value({"-jf", "--json-schema-file"}, &json_schema_file, "FILE", "read the JSON schema from FILE");
}

Result<GrammarFlags::Constraint> GrammarFlags::read() const {
  const int given =
      !grammar.empty() + !grammar_file.empty() + !json_schema.empty() + !json_schema_file.empty();
  if (given > 1)
    return make_error("give only one of --grammar, --grammar-file, --json-schema, --json-schema-file");
  Constraint c;
  if (!grammar.empty()) c.gbnf = grammar;
  if (!grammar_file.empty()) {
    KILN_ASSIGN_OR_RETURN(c.gbnf, read_text_file(grammar_file));
  }
  if (json_schema.empty() && json_schema_file.empty()) return c;
  c.json_schema = json_schema;
  if (!json_schema_file.empty()) {
    KILN_ASSIGN_OR_RETURN(c.json_schema, read_text_file(json_schema_file));
  }
  const char* flag = json_schema_file.empty() ? "--json-schema" : "--json-schema-file";
  const auto schema = nlohmann::ordered_json::parse(c.json_schema, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return make_error(flag, ": not valid JSON");
  if (auto gbnf = grammar::json_schema_to_gbnf(schema); !gbnf.ok()) return make_error(flag, ": ", gbnf.error().message);
  return c;
}

Result<std::string> GrammarFlags::gbnf() const {
  KILN_ASSIGN_OR_RETURN(Constraint c, read());
  if (c.json_schema.empty()) return std::move(c.gbnf);
  return grammar::json_schema_to_gbnf(nlohmann::ordered_json::parse(c.json_schema));
}

std::optional<Sampler> SamplerFlags::make_sampler(const Model& model, const char* command) const {
  SamplerParams sp = params;
  if (seed < 0) {
    sp.seed = std::random_device{}();
    std::fprintf(stderr, "kiln %s: seed %llu\n", command, static_cast<unsigned long long>(sp.seed));
  } else {
    sp.seed = static_cast<uint64_t>(seed);
  }
  const auto n_vocab = static_cast<int32_t>(model.hparams().n_vocab);
  for (const auto& [id, bias] : params.logit_bias) {
    if (id >= n_vocab) {
      print_error(command, "--logit-bias: token id " + std::to_string(id) +
                               " is outside the vocabulary (0.." + std::to_string(n_vocab - 1) + ")");
      return std::nullopt;
    }
  }
  if (ignore_eos) {
    for (int32_t id : model.tokenizer().vocab().eog_ids()) sp.logit_bias.emplace_back(id, -INFINITY);
  }
  auto gbnf = output.gbnf();
  if (!gbnf.ok()) {
    print_error(command, gbnf.error().message);
    return std::nullopt;
  }
  auto s = make_model_sampler(model, sp, *gbnf);
  if (!s.ok()) {
    print_error(command, s.error().message);
    return std::nullopt;
  }
  return std::move(*s);
}

}  // namespace kiln::cli
