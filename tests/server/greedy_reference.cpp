#include "greedy_reference.h"

#include <gtest/gtest.h>

#include <cmath>

#include "llm/context.h"
#include "llm/cpu_engine.h"
#include "llm/sampler.h"

namespace kiln::test {

std::vector<GreedyStep> greedy_reference(std::shared_ptr<const Model> model, const std::vector<int32_t>& ids, int n) {
  CpuEngine cpu(1);
  ContextOptions co;
  co.n_ctx = 1024;
  auto ctx = Context::create(model, cpu.backend, co);
  EXPECT_TRUE(ctx.ok()) << (ctx.ok() ? "" : ctx.error().message);
  if (!ctx.ok() || ids.empty()) return {};
  const auto& tok = model->tokenizer();
  Batch b;
  for (size_t i = 0; i < ids.size(); ++i) b.add(ids[i], static_cast<int32_t>(i), 0, i + 1 == ids.size());
  EXPECT_TRUE((*ctx)->decode(b).ok());
  std::vector<GreedyStep> out;
  int32_t pos = static_cast<int32_t>(ids.size());
  auto logits = (*ctx)->logits(b.size() - 1);
  for (int i = 0; i < n; ++i) {
    GreedyStep s;
    s.token = sampling::argmax(logits);
    if (tok.is_eog(s.token)) break;
    s.piece = *tok.token_to_piece(s.token, false);
    double max = -INFINITY, sum = 0;
    for (float x : logits) max = std::max(max, static_cast<double>(x));
    for (float x : logits) sum += std::exp(x - max);
    for (float x : logits) s.logprobs.push_back(x - max - std::log(sum));
    out.push_back(std::move(s));
    b.clear();
    b.add(out.back().token, pos++, 0, true);
    EXPECT_TRUE((*ctx)->decode(b).ok());
    logits = (*ctx)->logits(0);
  }
  return out;
}

std::vector<std::string> pieces_of(const std::vector<GreedyStep>& steps) {
  std::vector<std::string> out;
  for (const auto& s : steps) out.push_back(s.piece);
  return out;
}

std::string text_of(const std::vector<GreedyStep>& steps) {
  std::string out;
  for (const auto& s : steps) out += s.piece;
  return out;
}

}  // namespace kiln::test
