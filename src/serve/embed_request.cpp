#include "serve/embed_request.h"

#include <algorithm>
#include <bit>

#include "image/data_uri.h"

namespace kiln::serve {
namespace {

constexpr const char* kInputShape =
    "field 'input' must be a string, a list of strings, a list of token ids or a list of lists of token ids";

bool is_token_id(const json& j) { return j.is_number_integer() || j.is_number_unsigned(); }

// One input's tokens from a string or a list of ids (`where` names it in errors).
std::optional<HttpError> read_input(const json& j, const Model& model, const std::string& where,
                                    std::vector<int32_t>& out) {
  if (j.is_string()) {
    out = model.tokenizer().tokenize(j.get<std::string>(), true, true);
    return std::nullopt;
  }
  if (!j.is_array()) return HttpError{400, kInputShape};
  const int64_t n_vocab = model.hparams().n_vocab;
  for (const auto& t : j) {
    if (!is_token_id(t)) return HttpError{400, kInputShape};
    const bool negative = t.is_number_integer() && t.get<int64_t>() < 0;
    if (negative || t.get<uint64_t>() >= static_cast<uint64_t>(n_vocab))
      return HttpError{400, where + ": token id " + t.dump() + " is outside the vocabulary [0, " +
                                std::to_string(n_vocab) + ")"};
    out.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return std::nullopt;
}

}  // namespace

std::optional<HttpError> parse_embed_request(const json& body, const Model& model, int64_t max_tokens,
                                             bool oai, EmbedRequest& out) {
  auto it = body.find("input");
  if (it == body.end() && !oai) it = body.find("content");
  if (it == body.end() || it->is_null())
    return HttpError{400, oai ? "field 'input' is required" : "field 'input' (or 'content') is required"};
  const json& input = *it;

  out.inputs.clear();
  if (input.is_string() || (input.is_array() && !input.empty() && is_token_id(input[0]))) {
    out.inputs.emplace_back();
    if (auto e = read_input(input, model, "input", out.inputs.back())) return e;
  } else if (input.is_array()) {
    if (input.empty()) return HttpError{400, "field 'input' is an empty list"};
    for (size_t i = 0; i < input.size(); ++i) {
      out.inputs.emplace_back();
      if (auto e = read_input(input[i], model, "input " + std::to_string(i), out.inputs.back())) return e;
    }
  } else {
    return HttpError{400, kInputShape};
  }
  for (size_t i = 0; i < out.inputs.size(); ++i) {
    const auto n = static_cast<int64_t>(out.inputs[i].size());
    const std::string name = out.inputs.size() == 1 ? std::string("the input") : "input " + std::to_string(i);
    if (n == 0) return HttpError{400, name + " is empty (no tokens to embed)"};
    if (n > max_tokens)
      return HttpError{400, name + " has " + std::to_string(n) + " tokens; the context allows at most " +
                                std::to_string(max_tokens)};
  }

  out.base64 = false;
  if (auto f = body.find("encoding_format"); f != body.end() && !f->is_null()) {
    if (!f->is_string() || (*f != "float" && *f != "base64"))
      return HttpError{400, "field 'encoding_format' must be \"float\" or \"base64\""};
    out.base64 = *f == "base64";
  }
  if (auto d = body.find("dimensions"); d != body.end() && !d->is_null()) {
    const int64_t n_embd = model.hparams().n_embd;
    if (!is_token_id(*d)) return HttpError{400, "field 'dimensions' must be an integer"};
    const bool same = d->is_number_unsigned() ? d->get<uint64_t>() == static_cast<uint64_t>(n_embd)
                                              : d->get<int64_t>() == n_embd;
    if (!same)
      return HttpError{400, "field 'dimensions' is " + d->dump() + ", but this model's embeddings have " +
                                std::to_string(n_embd) + " dimensions (kiln does not shorten them)"};
  }
  return std::nullopt;
}

std::string base64_floats(std::span<const float> v) {
  std::vector<uint8_t> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<size_t>(b)] = static_cast<uint8_t>(u >> (8 * b));
  }
  return encode_base64(bytes);
}

json oai_embeddings_json(const EmbedRequest& req, const std::vector<std::vector<float>>& vectors,
                         const std::string& model_name) {
  json data = json::array();
  int64_t n_tokens = 0;
  for (size_t i = 0; i < vectors.size(); ++i) {
    json e = {{"object", "embedding"}, {"index", i}};
    if (req.base64)
      e["embedding"] = base64_floats(vectors[i]);
    else
      e["embedding"] = vectors[i];
    data.push_back(std::move(e));
    n_tokens += static_cast<int64_t>(req.inputs[i].size());
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model_name},
          {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}};
}

json native_embeddings_json(const std::vector<std::vector<float>>& vectors, int64_t n_embd) {
  json out = json::array();
  const auto width = static_cast<std::ptrdiff_t>(n_embd);
  for (size_t i = 0; i < vectors.size(); ++i) {
    json rows = json::array();
    for (auto r = vectors[i].begin(); r != vectors[i].end(); r += width)
      rows.push_back(std::vector<float>(r, r + width));
    out.push_back({{"index", i}, {"embedding", std::move(rows)}});
  }
  return out;
}

}  // namespace kiln::serve
