// Embeddings: the pooled final hidden states of a token sequence, as llama.cpp computes them.
//
// A Context created with ContextOptions::embeddings outputs, per marked token, the hidden state
// after the output norm (llama.cpp's result_norm). embed_tokens() decodes one sequence with such a
// context and pools its rows:
//   none  every token's vector, [n_tokens][n_embd]
//   mean  the average over the sequence's tokens
//   cls   the first token's vector
//   last  the last token's vector
// ref: llama.cpp src/llama-graph.cpp build_pooling (mean: a product with weights 1/n_tokens; cls and
// last: a row pick). Vectors are returned raw; servers normalise them (normalize_euclidean).
//
// Attention stays causal, as llama.cpp keeps it for llama/qwen models whatever the pooling; a
// model whose metadata asks for non-causal attention is refused (check_embedding_model).
// Thread-safety: the functions are stateless; embed_tokens uses the context (one pass at a time).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "llm/context.h"
#include "llm/model.h"

namespace kiln {

// The values of llama.cpp's enum llama_pooling_type (GGUF {arch}.pooling_type); kiln has no
// ranking head, so llama.cpp's 4 (rank) has no value here.
enum class Pooling : uint8_t { None = 0, Mean = 1, Cls = 2, Last = 3 };

std::string_view pooling_name(Pooling p);
// "none" | "mean" | "cls" | "last"; anything else is an Error naming the value.
Result<Pooling> parse_pooling(std::string_view name);
// The model's {arch}.pooling_type when the file has it, else Mean. Rank (4) and unknown values are
// refused with a message naming them.
Result<Pooling> model_pooling(const Model& model);
// An Error when the model cannot give embeddings as llama.cpp would: its metadata asks for
// non-causal attention ({arch}.attention.causal = false), which kiln's decoder does not compute.
Status check_embedding_model(const Model& model);

// Pools `hidden`, the [n_tokens][n_embd] rows of one sequence in position order (n_tokens >= 1),
// into [n_embd]; None returns the rows unchanged.
std::vector<float> pool_hidden(std::span<const float> hidden, int64_t n_embd, Pooling p);

// Scales v to Euclidean norm 1 (a zero vector stays zero).
// ref: llama.cpp common/common.cpp common_embd_normalize with embd_norm = 2 (llama-server's
// default): the sum of squares in double, the scale 1/norm rounded to float.
void normalize_euclidean(std::span<float> v);

// Embeds `tokens` (1 .. ctx.n_ctx() ids) as sequence 0 of `ctx`, which must output embeddings;
// the context's cache is cleared first. Returns pool_hidden() of the sequence's hidden states:
// [n_tokens][n_embd] for None, else [n_embd]. Errors: an empty or too long sequence, a context
// without embeddings, bad token ids (from Context::decode).
Result<std::vector<float>> embed_tokens(Context& ctx, std::span<const int32_t> tokens, Pooling p);

}  // namespace kiln
