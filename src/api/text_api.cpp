// kiln.h: tokenize and detokenize over text/tokenizer.h.
#include <algorithm>

#include "api/handles.h"

using namespace kiln;
using namespace kiln::api;

extern "C" {

kiln_status kiln_tokenize(const kiln_model* model, const char* text, int64_t text_len, int32_t add_special,
                          int32_t parse_special, int32_t* tokens, int64_t capacity, int64_t* n_tokens) {
  constexpr std::string_view fn = "kiln_tokenize";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_size(fn, "text_len", text_len));
  if (text_len > 0) KILN_API_TRY(check_pointer(fn, "text", text));
  KILN_API_TRY(check_size(fn, "capacity", capacity));
  if (capacity > 0) KILN_API_TRY(check_pointer(fn, "tokens", tokens));
  KILN_API_TRY(check_pointer(fn, "n_tokens", n_tokens));
  return api_call(fn, [&] {
    const std::vector<int32_t> ids = model->model->tokenizer().tokenize(
        std::string_view(text_len > 0 ? text : "", static_cast<size_t>(text_len)), add_special != 0,
        parse_special != 0);
    std::copy_n(ids.begin(), std::min<int64_t>(capacity, static_cast<int64_t>(ids.size())), tokens);
    *n_tokens = static_cast<int64_t>(ids.size());
    return KILN_OK;
  });
}

kiln_status kiln_detokenize(const kiln_model* model, const int32_t* tokens, int64_t n_tokens, int32_t special,
                            char* buf, int64_t size, int64_t* length) {
  constexpr std::string_view fn = "kiln_detokenize";
  KILN_API_TRY(check_handle(fn, "model", model));
  KILN_API_TRY(check_size(fn, "n_tokens", n_tokens));
  if (n_tokens > 0) KILN_API_TRY(check_pointer(fn, "tokens", tokens));
  for (int64_t i = 0; i < n_tokens; ++i) KILN_API_TRY(check_token(fn, *model, tokens[i]));
  return api_call(fn, [&] {
    auto text = model->model->tokenizer().detokenize(std::span(tokens, static_cast<size_t>(n_tokens)),
                                                     /*remove_special=*/false, special != 0);
    if (!text.ok()) return from_status(fn, text.error());
    return write_text(fn, *text, buf, size, length);
  });
}

}  // extern "C"
