// kiln's n-gram draft sources propose and accept what llama.cpp's do: for each case of
// tests/llm/data/spec_refs.json (llama-server's timings.draft_n and draft_n_accepted for a greedy
// completion, written by tests/llm/data/make_spec_refs.py), kiln generates the same tokens with the
// same settings and drafts and accepts the same numbers of tokens.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/cpu_engine.h"
#include "llm/speculative/step.h"
#include "test_data.h"

namespace kiln {
namespace {

using nlohmann::json;

json load_refs() {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/tests/llm/data/spec_refs.json");
  EXPECT_TRUE(in.good()) << "missing tests/llm/data/spec_refs.json";
  return in.good() ? json::parse(in) : json::object();
}

std::string model_path(const std::string& name) {
  if (name == "default") return std::string(KILN_SOURCE_DIR) + "/models/kjv-llama-q8_0.gguf";
  return test_data::path("models/" + name + ".gguf");
}

// The case's settings: {"types": "a,b", "<source>": {"size_n": ..., ...}, "lookup": {"static":
// FILE, "dynamic": FILE}} as llama.cpp's flags.
SpeculativeOptions options_of(const json& spec) {
  SpeculativeOptions o;
  auto sources = parse_draft_sources(spec.at("types").get<std::string>());
  EXPECT_TRUE(sources.ok()) << sources.error().message;
  if (sources.ok()) o.sources = *sources;
  auto map_options = [&](const char* key, NgramMapOptions& m) {
    if (!spec.contains(key)) return;
    const json& s = spec.at(key);
    m.size_n = s.value("size_n", m.size_n);
    m.size_m = s.value("size_m", m.size_m);
    m.min_hits = s.value("min_hits", m.min_hits);
  };
  map_options("ngram-simple", o.ngram_simple);
  map_options("ngram-map-k", o.ngram_map_k);
  map_options("ngram-map-k4v", o.ngram_map_k4v);
  if (spec.contains("lookup")) {  // files under tests/llm/data/lookup
    const std::string dir = std::string(KILN_SOURCE_DIR) + "/tests/llm/data/lookup/";
    const json& l = spec.at("lookup");
    if (l.contains("static")) o.lookup_cache_static = dir + l.at("static").get<std::string>();
    if (l.contains("dynamic")) o.lookup_cache_dynamic = dir + l.at("dynamic").get<std::string>();
  }
  if (spec.contains("ngram-mod")) {
    const json& s = spec.at("ngram-mod");
    o.ngram_mod.n_match = s.value("n_match", o.ngram_mod.n_match);
    o.ngram_mod.n_min = s.value("n_min", o.ngram_mod.n_min);
    o.ngram_mod.n_max = s.value("n_max", o.ngram_mod.n_max);
  }
  return o;
}

TEST(SpeculativeLlamaCpp, NgramDraftsEqualLlamaServers) {
  const json refs = load_refs();
  ASSERT_TRUE(refs.contains("cases"));
  CpuEngine engine(2);
  int64_t total_drafted = 0;
  for (const json& c : refs.at("cases")) {
    const std::string label = c.at("model").get<std::string>() + " " + c.at("spec").dump();
    auto model = Model::load(model_path(c.at("model").get<std::string>()));
    ASSERT_TRUE(model.ok()) << model.error().message;
    ContextOptions co;  // as the reference server: -c N -fa off -ctk f32 -ctv f32
    co.n_ctx = c.at("n_ctx").get<int64_t>();
    co.type_k = co.type_v = DType::F32;
    co.flash_attention = FlashAttention::Off;
    auto ctx = Context::create(*model, engine.backend, co);
    ASSERT_TRUE(ctx.ok()) << ctx.error().message;
    auto spec = Speculator::create(options_of(c.at("spec")), **model, nullptr, engine.backend, co);
    ASSERT_TRUE(spec.ok()) << label << ": " << spec.error().message;

    const std::vector<int32_t> prompt =
        (*model)->tokenizer().tokenize(c.at("prompt").get<std::string>(), true, true);
    SequenceState state;
    Batch b;
    for (size_t i = 0; i < prompt.size(); ++i)
      b.add(prompt[i], static_cast<int32_t>(i), 0, i + 1 == prompt.size());
    ASSERT_TRUE((*ctx)->decode(b).ok());
    state.tokens = prompt;
    SamplerParams sp;
    sp.temperature = 0.0f;
    auto sampler = Sampler::create(sp, static_cast<int32_t>((*ctx)->n_vocab()));
    ASSERT_TRUE(sampler.ok());
    for (int32_t t : prompt) sampler->accept(t);
    const auto drafter = (*spec)->drafter(0);
    ASSERT_TRUE(drafter->begin(state.tokens).ok());
    auto out = generate_tokens(**ctx, state, *sampler, (*ctx)->logits(prompt.size() - 1),
                               c.at("n_predict").get<int64_t>(), drafter.get());
    ASSERT_TRUE(out.ok()) << out.error().message;
    std::vector<int32_t> tokens = *out;
    if (!tokens.empty() && (*model)->tokenizer().is_eog(tokens.back()) &&
        tokens.size() > c.at("tokens").size())
      tokens.pop_back();  // llama-server does not return the end-of-generation token
    std::printf("[ spec     ] %s: drafted %lld accepted %lld (llama.cpp %lld, %lld)\n", label.c_str(),
                static_cast<long long>(drafter->n_drafted()), static_cast<long long>(drafter->n_accepted()),
                c.at("draft_n").get<long long>(), c.at("draft_n_accepted").get<long long>());
    EXPECT_EQ(tokens, c.at("tokens").get<std::vector<int32_t>>()) << label;
    EXPECT_EQ(drafter->n_drafted(), c.at("draft_n").get<int64_t>()) << label;
    EXPECT_EQ(drafter->n_accepted(), c.at("draft_n_accepted").get<int64_t>()) << label;
    total_drafted += drafter->n_drafted();
  }
  EXPECT_GT(total_drafted, 0) << "the references draft";
}

}  // namespace
}  // namespace kiln
