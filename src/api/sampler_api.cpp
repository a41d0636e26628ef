// kiln.h: samplers over llm/model_sampler.h (the sampler chain with a grammar or JSON schema).
#include <nlohmann/json.hpp>

#include "api/handles.h"
#include "llm/model_sampler.h"
#include "text/grammar/json_schema.h"
#include "text/json_depth.h"

using namespace kiln;
using namespace kiln::api;

namespace {

bool given(const char* s) { return s != nullptr && s[0] != '\0'; }

// The GBNF `p` asks for: its grammar, or its JSON schema converted; "" for none.
Result<std::string> requested_gbnf(const kiln_sampler_params& p) {
  if (given(p.grammar) && given(p.json_schema))
    return make_error("give a grammar or a json_schema, not both");
  if (given(p.grammar)) return std::string(p.grammar);
  if (!given(p.json_schema)) return std::string();
  if (text::json_nests_deeper_than(p.json_schema, text::kMaxJsonDepth))
    return make_error("json_schema: nests deeper than ", text::kMaxJsonDepth, " levels");
  const auto schema = nlohmann::ordered_json::parse(p.json_schema, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return make_error("json_schema: not valid JSON");
  auto gbnf = grammar::json_schema_to_gbnf(schema);
  if (!gbnf.ok()) return make_error("json_schema: ", gbnf.error().message);
  return std::move(*gbnf);
}

}  // namespace

extern "C" {

kiln_status kiln_sampler_default_params(kiln_sampler_params* params) {
  KILN_API_TRY(check_pointer("kiln_sampler_default_params", "params", params));
  const SamplerParams d;
  *params = kiln_sampler_params{.seed = d.seed,
                                .temperature = d.temperature,
                                .top_k = d.top_k,
                                .top_p = d.top_p,
                                .min_p = d.min_p,
                                .typical_p = d.typical_p,
                                .penalty_last_n = d.penalty_last_n,
                                .repeat_penalty = d.repeat_penalty,
                                .frequency_penalty = d.frequency_penalty,
                                .presence_penalty = d.presence_penalty,
                                .grammar = nullptr,
                                .json_schema = nullptr};
  return KILN_OK;
}

kiln_status kiln_sampler_create(kiln_model* model, const kiln_sampler_params* params, kiln_sampler** out) {
  constexpr std::string_view fn = "kiln_sampler_create";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_pointer(fn, "out", out));
  kiln_sampler_params p{};
  KILN_API_TRY(kiln_sampler_default_params(&p));
  if (params != nullptr) p = *params;
  return api_call(fn, [&] {
    auto gbnf = requested_gbnf(p);
    if (!gbnf.ok()) return bad_argument(fn, gbnf.error().message);
    SamplerParams sp;
    sp.seed = p.seed;
    sp.temperature = p.temperature;
    sp.top_k = p.top_k;
    sp.top_p = p.top_p;
    sp.min_p = p.min_p;
    sp.typical_p = p.typical_p;
    sp.penalty_last_n = p.penalty_last_n;
    sp.repeat_penalty = p.repeat_penalty;
    sp.frequency_penalty = p.frequency_penalty;
    sp.presence_penalty = p.presence_penalty;
    auto sampler = make_model_sampler(*model->model, sp, *gbnf);
    if (!sampler.ok()) return bad_argument(fn, sampler.error().message);
    auto* s = new kiln_sampler{.model = model, .sampler = std::move(*sampler)};
    ++model->users;
    *out = s;
    register_handle(s);
    return KILN_OK;
  });
}

kiln_status kiln_sampler_free(kiln_sampler* sampler) {
  KILN_API_TRY(check_handle("kiln_sampler_free", "sampler", sampler));
  unregister_handle(sampler);
  --sampler->model->users;
  delete sampler;
  return KILN_OK;
}

kiln_status kiln_sampler_sample(kiln_sampler* sampler, const kiln_context* context, int64_t index,
                                int32_t* token) {
  constexpr std::string_view fn = "kiln_sampler_sample";
  KILN_API_TRY(check_handle(fn, "sampler", sampler));
  KILN_API_TRY(check_handle(fn, "context", context));
  KILN_API_TRY(check_pointer(fn, "token", token));
  if (context->model->model != sampler->model->model)
    return bad_argument(fn, "the sampler and the context are of different models");
  const float* logits = nullptr;
  int64_t n = 0;
  KILN_API_TRY(context_output(fn, context, index, /*embeddings=*/false, &logits, &n));
  return api_call(fn, [&] {
    *token = sampler->sampler.sample(std::span(logits, static_cast<size_t>(n)));
    return KILN_OK;
  });
}

kiln_status kiln_sampler_accept(kiln_sampler* sampler, int32_t token) {
  KILN_API_TRY(check_handle("kiln_sampler_accept", "sampler", sampler));
  KILN_API_TRY(check_token("kiln_sampler_accept", *sampler->model, token));
  return api_call("kiln_sampler_accept", [&] {
    sampler->sampler.accept(token);
    return KILN_OK;
  });
}

kiln_status kiln_sampler_reset(kiln_sampler* sampler) {
  KILN_API_TRY(check_handle("kiln_sampler_reset", "sampler", sampler));
  sampler->sampler.reset_history();
  return KILN_OK;
}

}  // extern "C"
