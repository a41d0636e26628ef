// The sampler a generation over a model uses: a Sampler for the model's vocabulary, with the
// grammar its output must follow attached (GBNF; a JSON schema is converted to GBNF first by
// text/grammar/json_schema.h). What `kiln run --grammar/--json-schema` and the C API's
// kiln_sampler_create build.
#pragma once

#include <string_view>

#include "core/result.h"
#include "llm/model.h"
#include "llm/sampler.h"

namespace kiln {

// `gbnf` empty: no grammar. Errors: parameters out of range (Sampler::create's message), a grammar
// that does not parse (its message says where).
Result<Sampler> make_model_sampler(const Model& model, const SamplerParams& params, std::string_view gbnf);

}  // namespace kiln
