// The JSON side of the embedding routes: reading a request's inputs and options, writing the
// response in OpenAI's shape (/v1/embeddings) or llama-server's (/embeddings).
// Stateless; safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "llm/model.h"
#include "serve/api_json.h"

namespace kiln::serve {

struct EmbedRequest {
  std::vector<std::vector<int32_t>> inputs;  // token ids per input, each non-empty
  bool base64 = false;                       // encoding_format "base64" (OpenAI route only)
};

// Reads `input` (with oai false, also llama-server's `content`): a string, a list of strings, a
// list of token ids, or a list mixing strings and lists of token ids. Strings are tokenized as
// llama-server does (special tokens added and parsed). Also `encoding_format` ("float" or
// "base64") and `dimensions` (must equal n_embd: kiln does not truncate). A 400 for a wrong type,
// an empty input, a token id outside the vocabulary, or an input longer than max_tokens.
std::optional<HttpError> parse_embed_request(const json& body, const Model& model, int64_t max_tokens,
                                             bool oai, EmbedRequest& out);

// The little-endian float32 bytes of v, in base64 (RFC 4648, padded): OpenAI's
// encoding_format "base64".
std::string base64_floats(std::span<const float> v);

// {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...] | "base64"}],
//  "model": model_name, "usage": {"prompt_tokens": N, "total_tokens": N}}
json oai_embeddings_json(const EmbedRequest& req, const std::vector<std::vector<float>>& vectors,
                         const std::string& model_name);
// llama-server's /embeddings: [{"index": i, "embedding": [[...], ...]}]: one row per token with
// pooling none, else one row (the pooled vector). vectors[i] holds rows of n_embd floats.
json native_embeddings_json(const std::vector<std::vector<float>>& vectors, int64_t n_embd);

}  // namespace kiln::serve
