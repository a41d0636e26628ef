// Speculative decoding is lossless: for every fixture model, over the conformance prompts, greedy
// and sampled (temperature 0.8, fixed seeds), the tokens generated with drafts (the model as its
// own draft model; every n-gram source) equal the tokens generated without, while drafts are made
// and, when sampling, some are rejected. The default model loops at temperature 0, where n-gram
// drafts are accepted. Each run prints its drafted and accepted counts.
//
// Also the property losslessness rests on: a token decoded in a batch with single_row_order gives
// the bits (logits) of the same token decoded alone, for every fixture model, both attention paths
// and batches past the 64 rows where flash attention tiles.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/cpu_engine.h"
#include "llm/speculative/step.h"
#include "test_data.h"

namespace kiln {
namespace {

using Tokens = std::vector<int32_t>;

std::string fixture_path(const std::string& stem) {
  return test_data::path("models/" + stem + ".gguf");
}

std::vector<std::string> conformance_prompts() {
  std::ifstream in(test_data::path("reference/cases.json"));
  const nlohmann::json cases = nlohmann::json::parse(in).at("cases");
  std::vector<std::string> out;
  for (const auto& c : cases) out.push_back(c.at("text").get<std::string>());
  return out;
}

// A model and a context of it (null when either fails, with the test failed).
struct Target {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Context> ctx;
};

Target load_target(const std::string& path, CpuEngine& engine, const ContextOptions& co) {
  Target t;
  auto model = Model::load(path);
  EXPECT_TRUE(model.ok()) << model.error().message;
  if (!model.ok()) return t;
  auto ctx = Context::create(*model, engine.backend, co);
  EXPECT_TRUE(ctx.ok()) << ctx.error().message;
  if (!ctx.ok()) return t;
  t.model = *model;
  t.ctx = std::move(*ctx);
  return t;
}

ContextOptions small_context() {
  ContextOptions co;
  co.n_ctx = 512;
  return co;
}

struct Generation {
  Tokens tokens;
  int64_t drafted = 0, accepted = 0;
};

// Generates n_gen tokens after `prompt` in sequence 0 of `ctx` (cleared first).
Generation generate(Context& ctx, const std::string& prompt, int64_t n_gen, const SamplerParams& sp,
                    Speculator* spec) {
  ctx.clear();
  const Tokens tokens = ctx.model().tokenizer().tokenize(prompt, true, false);
  SequenceState state;
  Batch batch;
  for (size_t i = 0; i < tokens.size(); ++i)
    batch.add(tokens[i], static_cast<int32_t>(i), 0, i + 1 == tokens.size());
  const Status st = ctx.decode(batch);
  EXPECT_TRUE(st.ok()) << st.error().message;
  state.tokens = tokens;
  auto sampler = Sampler::create(sp, static_cast<int32_t>(ctx.n_vocab()));
  EXPECT_TRUE(sampler.ok());
  for (int32_t t : tokens) sampler->accept(t);
  const auto drafter = spec ? spec->drafter(0) : nullptr;
  if (drafter) {
    EXPECT_TRUE(drafter->begin(state.tokens).ok());
  }
  auto out = generate_tokens(ctx, state, *sampler, ctx.logits(tokens.size() - 1), n_gen, drafter.get());
  EXPECT_TRUE(out.ok()) << out.error().message;
  Generation r;
  if (out.ok()) r.tokens = std::move(*out);
  if (drafter) {
    r.drafted = drafter->n_drafted();
    r.accepted = drafter->n_accepted();
  }
  return r;
}

SamplerParams sampling(float temperature, uint64_t seed) {
  SamplerParams p;
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

// draft-simple with the target as its own draft model.
SpeculativeOptions self_draft(int32_t n_max) {
  SpeculativeOptions o;
  o.sources = {DraftSource::DraftSimple};
  o.draft.n_max = n_max;
  return o;
}

// Every n-gram source, sized to draft on short texts.
SpeculativeOptions all_ngram_sources() {
  SpeculativeOptions o;
  o.sources = {DraftSource::NgramSimple, DraftSource::NgramMapK, DraftSource::NgramMapK4v,
               DraftSource::NgramMod, DraftSource::NgramCache};
  o.ngram_simple = {.size_n = 2, .size_m = 8, .min_hits = 1};
  o.ngram_map_k = {.size_n = 2, .size_m = 6, .min_hits = 1};
  o.ngram_map_k4v = {.size_n = 3, .size_m = 6, .min_hits = 1};
  o.ngram_mod = {.n_match = 3, .n_max = 8, .n_min = 1};
  return o;
}

struct Config {
  std::string model;
  bool f16_flash;  // else F32 cache, plain attention
};

class SpeculativeLossless : public ::testing::TestWithParam<Config> {
 protected:
  static ContextOptions context_options(const Config& c) {
    ContextOptions o;
    o.n_ctx = 512;
    if (!c.f16_flash) {
      o.type_k = o.type_v = DType::F32;
      o.flash_attention = FlashAttention::Off;
    }
    return o;
  }
  CpuEngine engine_{2};
};

TEST_P(SpeculativeLossless, SameTokensWithTheModelAsItsOwnDraft) {
  const Config& c = GetParam();
  const ContextOptions co = context_options(c);
  const Target target = load_target(fixture_path(c.model), engine_, co);
  ASSERT_TRUE(target.ctx);
  auto spec = Speculator::create(self_draft(4), *target.model, target.model, engine_.backend, co);
  ASSERT_TRUE(spec.ok()) << spec.error().message;

  const auto prompts = conformance_prompts();
  ASSERT_EQ(prompts.size(), 5u);
  int64_t drafted[2] = {0, 0}, accepted[2] = {0, 0};
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (int t = 0; t < 2; ++t) {
      const SamplerParams sp = sampling(t == 0 ? 0.0f : 0.8f, 1000 + i);
      const Generation plain = generate(*target.ctx, prompts[i], 16, sp, nullptr);
      const Generation spec_run = generate(*target.ctx, prompts[i], 16, sp, spec->get());
      std::printf("[ spec     ] %s %s case %zu temp %.1f: drafted %lld, accepted %lld\n", c.model.c_str(),
                  c.f16_flash ? "f16-fa" : "f32", i, sp.temperature, static_cast<long long>(spec_run.drafted),
                  static_cast<long long>(spec_run.accepted));
      ASSERT_EQ(plain.tokens.size(), 16u);
      EXPECT_EQ(spec_run.tokens, plain.tokens) << "case " << i << ", temperature " << sp.temperature;
      EXPECT_LE(spec_run.accepted, spec_run.drafted);
      drafted[t] += spec_run.drafted;
      accepted[t] += spec_run.accepted;
    }
  }
  EXPECT_GT(accepted[0], 0) << "the model drafting for itself, greedy";
  EXPECT_GT(drafted[1], accepted[1]) << "sampling at 0.8 rejects some greedy drafts";
}

// Every fixture with llama.cpp's default cache (F16, flash attention); the plain attention path
// with an F32 cache (whose kqv sum changes order with the number of queries) on two of them.
std::vector<Config> configs() {
  std::vector<Config> v;
  for (const char* m : {"llama-spm-e128-f32", "llama-spm-e256-Q4_0", "llama-spm-e256-Q4_K_M",
                        "llama-spm-e256-Q6_K", "qwen2-e64-Q8_0", "qwen3-e64-Q8_0"})
    v.push_back({m, true});
  for (const char* m : {"llama-spm-e128-f32", "llama-spm-e256-Q4_K_M"}) v.push_back({m, false});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SpeculativeLossless, ::testing::ValuesIn(configs()),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           std::string n = info.param.model + (info.param.f16_flash ? "_f16_fa" : "_f32");
                           for (char& ch : n) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return n;
                         });

// The draft model's weights are placed with the WeightOptions given (the commands pass the target's
// -t, --no-mmap and --mlock): copied on three threads, nothing is read from the mapped file, and the
// drafts are the default placement's.
TEST(SpeculativeDraftWeights, PlacedWithTheWeightOptionsGiven) {
  CpuEngine engine(2);
  const Target target = load_target(fixture_path("llama-spm-e256-Q4_0"), engine, small_context());
  ASSERT_TRUE(target.ctx);
  WeightOptions copy_on_three;
  copy_on_three.copy_all = true;
  copy_on_three.prepare_threads = 3;
  auto mapped =
      Speculator::create(self_draft(4), *target.model, target.model, engine.backend, small_context());
  auto copied = Speculator::create(self_draft(4), *target.model, target.model, engine.backend,
                                   small_context(), copy_on_three);
  ASSERT_TRUE(mapped.ok() && copied.ok());
  const DeviceWeights& m = (*mapped)->draft_model()->context().weights();
  const DeviceWeights& c = (*copied)->draft_model()->context().weights();
  EXPECT_GT(m.mapped_bytes(), 0u);
  EXPECT_EQ(c.mapped_bytes(), 0u);
  EXPECT_GT(c.buffer_bytes(), m.buffer_bytes());
  const std::string prompt = conformance_prompts().at(0);
  const Generation a = generate(*target.ctx, prompt, 12, sampling(0.0f, 1), mapped->get());
  const Generation b = generate(*target.ctx, prompt, 12, sampling(0.0f, 1), copied->get());
  EXPECT_GT(a.drafted, 0);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.drafted, b.drafted);
  EXPECT_EQ(a.accepted, b.accepted);
}

// The server's way: several sequences draft, all their verification rows go into one batch, each
// is verified with its own sampler; every sequence gets the tokens it gets alone without drafts.
TEST(SpeculativeLosslessBatched, SequencesVerifyTogetherInOneBatch) {
  CpuEngine engine(2);
  const Target target = load_target(fixture_path("llama-spm-e256-Q4_0"), engine, small_context());
  ASSERT_TRUE(target.ctx);
  auto spec = Speculator::create(self_draft(5), *target.model, target.model, engine.backend, small_context());
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  const std::vector<std::string> prompts = conformance_prompts();
  constexpr int kSeqs = 3, kGen = 16;

  std::vector<Tokens> alone;
  for (int s = 0; s < kSeqs; ++s)
    alone.push_back(
        generate(*target.ctx, prompts[static_cast<size_t>(s)], kGen, sampling(s * 0.5f, 7 + s), nullptr)
            .tokens);

  Context& x = *target.ctx;
  x.clear();
  std::vector<SequenceState> state(kSeqs);
  std::vector<Sampler> samplers;
  std::vector<std::unique_ptr<SequenceDrafter>> drafters;
  std::vector<Tokens> out(kSeqs);
  std::vector<int32_t> sampled(kSeqs);
  for (int s = 0; s < kSeqs; ++s) {
    state[static_cast<size_t>(s)].seq = s;
    const Tokens p = x.model().tokenizer().tokenize(prompts[static_cast<size_t>(s)], true, false);
    Batch b;
    for (size_t i = 0; i < p.size(); ++i) b.add(p[i], static_cast<int32_t>(i), s, i + 1 == p.size());
    ASSERT_TRUE(x.decode(b).ok());
    state[static_cast<size_t>(s)].tokens = p;
    auto sm = Sampler::create(sampling(s * 0.5f, 7 + s), static_cast<int32_t>(x.n_vocab()));
    ASSERT_TRUE(sm.ok());
    for (int32_t t : p) sm->accept(t);
    sampled[static_cast<size_t>(s)] = sm->sample(x.logits(p.size() - 1));
    sm->accept(sampled[static_cast<size_t>(s)]);
    out[static_cast<size_t>(s)].push_back(sampled[static_cast<size_t>(s)]);
    samplers.push_back(std::move(*sm));
    drafters.push_back((*spec)->drafter(s));
    ASSERT_TRUE(drafters.back()->begin(p).ok());
  }
  int64_t drafted = 0;
  while (true) {
    Batch b;
    std::vector<Tokens> drafts(kSeqs);
    std::vector<size_t> first(kSeqs);
    std::vector<int32_t> pos(kSeqs);
    bool any = false;
    for (size_t s = 0; s < kSeqs; ++s) {
      if (out[s].size() >= kGen) continue;
      pos[s] = static_cast<int32_t>(state[s].tokens.size());
      const int32_t budget = n_draft_budget(x.n_ctx(), pos[s], kGen, static_cast<int64_t>(out[s].size()));
      auto d = drafters[s]->propose(state[s].tokens, sampled[s], budget);
      ASSERT_TRUE(d.ok()) << d.error().message;
      drafts[s] = *d;
      drafted += static_cast<int64_t>(d->size());
      first[s] = add_verification_rows(b, static_cast<int32_t>(s), pos[s], sampled[s], drafts[s]);
      any = true;
    }
    if (!any) break;
    ASSERT_TRUE(x.decode(b, {.single_row_order = true}).ok());
    for (size_t s = 0; s < kSeqs; ++s) {
      if (out[s].size() >= kGen) continue;
      const Verdict v = conclude_verification(x, static_cast<int32_t>(s), pos[s], first[s], drafts[s],
                                              samplers[s], drafters[s].get());
      state[s].tokens.push_back(sampled[s]);
      state[s].tokens.insert(state[s].tokens.end(), v.tokens.begin(), v.tokens.end() - 1);
      for (int32_t t : v.tokens) {
        if (out[s].size() < kGen) out[s].push_back(t);
      }
      sampled[s] = v.tokens.back();
    }
  }
  EXPECT_GT(drafted, 0);
  for (size_t s = 0; s < kSeqs; ++s) EXPECT_EQ(out[s], alone[s]) << "sequence " << s;
}

TEST(SpeculativeLosslessDefaultModel, NgramDraftsWhereTheTextLoops) {
  CpuEngine engine(2);
  const Target target =
      load_target(std::string(KILN_SOURCE_DIR) + "/models/kjv-llama-q8_0.gguf", engine, small_context());
  ASSERT_TRUE(target.ctx);
  SpeculativeOptions simple;
  simple.sources = {DraftSource::NgramSimple};
  simple.ngram_simple.size_n = 2;
  for (const SpeculativeOptions& o : {simple, all_ngram_sources()}) {
    auto spec = Speculator::create(o, *target.model, nullptr, engine.backend, small_context());
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    for (const float temperature : {0.0f, 0.8f}) {
      const char* prompt = "And God said unto Moses,";
      const Generation plain = generate(*target.ctx, prompt, 64, sampling(temperature, 3), nullptr);
      const Generation ngram = generate(*target.ctx, prompt, 64, sampling(temperature, 3), spec->get());
      std::printf("[ spec     ] default model, %zu n-gram sources, temp %.1f: drafted %lld, accepted %lld\n",
                  o.sources.size(), temperature, static_cast<long long>(ngram.drafted),
                  static_cast<long long>(ngram.accepted));
      EXPECT_EQ(ngram.tokens, plain.tokens) << temperature;
      if (temperature == 0.0f) {
        EXPECT_GT(ngram.accepted, 0) << "the greedy text loops";
      }
    }
  }
}

// A batch decoded with single_row_order gives each row the logits of that token decoded alone
// (two contexts, so that both hold the tokens in the same cells).
TEST_P(SpeculativeLossless, BatchedRowsEqualRowsDecodedAlone) {
  const Config& c = GetParam();
  auto model = Model::load(fixture_path(c.model));
  ASSERT_TRUE(model.ok()) << model.error().message;
  const ContextOptions co = context_options(c);
  auto one_by_one = Context::create(*model, engine_.backend, co);
  auto batched = Context::create(*model, engine_.backend, co);
  ASSERT_TRUE(one_by_one.ok() && batched.ok());
  const Tokens prompt = (*model)->tokenizer().tokenize(conformance_prompts()[0], true, false);
  Tokens rows;
  for (int32_t i = 0; i < 70; ++i)
    rows.push_back((i * 7919 + 13) % static_cast<int32_t>((*model)->hparams().n_vocab));
  for (Context* x : {one_by_one->get(), batched->get()}) {
    Batch b;
    for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], static_cast<int32_t>(i), 0, false);
    ASSERT_TRUE(x->decode(b).ok());
  }
  std::vector<std::vector<float>> alone;
  Batch b;
  for (size_t i = 0; i < rows.size(); ++i) {
    b.clear();
    b.add(rows[i], static_cast<int32_t>(prompt.size() + i), 0, true);
    ASSERT_TRUE((*one_by_one)->decode(b).ok());
    alone.emplace_back((*one_by_one)->logits(0).begin(), (*one_by_one)->logits(0).end());
  }
  b.clear();
  for (size_t i = 0; i < rows.size(); ++i) b.add(rows[i], static_cast<int32_t>(prompt.size() + i), 0, true);
  ASSERT_TRUE((*batched)->decode(b, {.single_row_order = true}).ok());
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto l = (*batched)->logits(i);
    ASSERT_EQ(l.size(), alone[i].size());
    EXPECT_EQ(std::memcmp(l.data(), alone[i].data(), l.size_bytes()), 0)
        << "row " << i << " of " << rows.size();
  }
}

}  // namespace
}  // namespace kiln
