#include "llm/model_sampler.h"

#include <string>

#include "text/grammar/grammar_constraint.h"

namespace kiln {

Result<Sampler> make_model_sampler(const Model& model, const SamplerParams& params, std::string_view gbnf) {
  KILN_ASSIGN_OR_RETURN(Sampler s, Sampler::create(params, static_cast<int32_t>(model.hparams().n_vocab)));
  if (gbnf.empty()) return s;
  const grammar::GrammarSpec spec{.gbnf = std::string(gbnf), .lazy = false, .triggers = {}};
  KILN_ASSIGN_OR_RETURN(auto constraint,
                        grammar::GrammarConstraint::create(spec, model.grammar_vocab(), &model.tokenizer()));
  s.set_grammar(std::move(constraint));
  return s;
}

}  // namespace kiln
