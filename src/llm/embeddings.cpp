#include "llm/embeddings.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace kiln {

std::string_view pooling_name(Pooling p) {
  switch (p) {
    case Pooling::None:
      return "none";
    case Pooling::Mean:
      return "mean";
    case Pooling::Cls:
      return "cls";
    case Pooling::Last:
      return "last";
  }
  return "?";
}

Result<Pooling> parse_pooling(std::string_view name) {
  for (Pooling p : {Pooling::None, Pooling::Mean, Pooling::Cls, Pooling::Last}) {
    if (name == pooling_name(p)) return p;
  }
  return make_error("pooling '", name, "' is not one of none, mean, cls, last");
}

Result<Pooling> model_pooling(const Model& model) {
  const std::string key = model.hparams().arch_key + ".pooling_type";
  if (model.file().find(key) == nullptr) return Pooling::Mean;
  KILN_ASSIGN_OR_RETURN(const int64_t type, model.file().get_i64(key));
  if (type >= 0 && type <= 3) return static_cast<Pooling>(type);
  if (type == 4)
    return make_error("model: ", key, " = 4 (rank) asks for a reranking head, which kiln does not have");
  return make_error("model: ", key, " = ", type, " is not a pooling type (0 none, 1 mean, 2 cls, 3 last)");
}

Status check_embedding_model(const Model& model) {
  const std::string key = model.hparams().arch_key + ".attention.causal";
  if (model.file().find(key) == nullptr) return ok_status();
  KILN_ASSIGN_OR_RETURN(const bool causal, model.file().get_bool(key));
  if (!causal)
    return make_error("model: ", key,
                      " = false asks for non-causal attention, which kiln's decoder does not compute");
  return ok_status();
}

std::vector<float> pool_hidden(std::span<const float> hidden, int64_t n_embd, Pooling p) {
  KILN_ASSERT(n_embd > 0 && !hidden.empty() && hidden.size() % static_cast<size_t>(n_embd) == 0,
              "pool_hidden: rows of n_embd floats");
  const size_t width = static_cast<size_t>(n_embd);
  const size_t n_tokens = hidden.size() / width;
  switch (p) {
    case Pooling::None:
      return {hidden.begin(), hidden.end()};
    case Pooling::Cls:
      return {hidden.begin(), hidden.begin() + static_cast<std::ptrdiff_t>(width)};
    case Pooling::Last:
      return {hidden.end() - static_cast<std::ptrdiff_t>(width), hidden.end()};
    case Pooling::Mean:
      break;
  }
  // ref: llama.cpp weights every row by 1/n_tokens (inp_mean) and sums the products.
  const float w = 1.0f / static_cast<float>(n_tokens);
  std::vector<float> out(width, 0.0f);
  for (size_t t = 0; t < n_tokens; ++t) {
    const float* row = hidden.data() + t * width;
    for (size_t e = 0; e < width; ++e) out[e] += row[e] * w;
  }
  return out;
}

void normalize_euclidean(std::span<float> v) {
  double sum = 0.0;
  for (float x : v) sum += x * x;
  sum = std::sqrt(sum);
  const float scale = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (float& x : v) x *= scale;
}

Result<std::vector<float>> embed_tokens(Context& ctx, std::span<const int32_t> tokens, Pooling p) {
  if (!ctx.outputs_embeddings()) return make_error("embed: the context was not created with embeddings on");
  const auto n = static_cast<int64_t>(tokens.size());
  if (n == 0) return make_error("embed: no tokens");
  if (n > ctx.n_ctx()) return make_error("embed: ", n, " tokens do not fit the context of ", ctx.n_ctx());
  ctx.clear();
  // The rows pooling reads: every token for none and mean, else the first or the last.
  auto wanted = [&](int64_t i) {
    return p == Pooling::Cls ? i == 0 : p == Pooling::Last ? i == n - 1 : true;
  };
  const size_t width = static_cast<size_t>(ctx.n_embd());
  std::vector<float> hidden;
  hidden.reserve(static_cast<size_t>(p == Pooling::Cls || p == Pooling::Last ? 1 : n) * width);
  Batch batch;
  const int64_t chunk = ctx.n_batch();
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    batch.clear();
    for (int64_t i = begin; i < end; ++i)
      batch.add(tokens[static_cast<size_t>(i)], static_cast<int32_t>(i), 0, wanted(i));
    KILN_TRY(ctx.decode(batch));
    for (int64_t i = begin; i < end; ++i) {
      if (!wanted(i)) continue;
      const std::span<const float> row = ctx.embeddings(static_cast<size_t>(i - begin));
      KILN_ASSERT(row.size() == width, "embed: a marked row has its hidden state");
      hidden.insert(hidden.end(), row.begin(), row.end());
    }
  }
  ctx.clear();
  return pool_hidden(hidden, ctx.n_embd(), p);
}

}  // namespace kiln
