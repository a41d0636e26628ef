#include "llm/reverse_prompts.h"

#include <algorithm>

namespace kiln {
namespace {

constexpr size_t kTailTokens = 32;  // llama.cpp's n_prev for the reverse-prompt check

}  // namespace

ReversePrompts::ReversePrompts(const text::Tokenizer& tok, std::vector<std::string> prompts, size_t slack)
    : tok_(&tok), slack_(slack) {
  std::erase(prompts, std::string());
  prompts_ = std::move(prompts);
  for (const std::string& p : prompts_) {
    const std::vector<int32_t> ids = tok.tokenize(p, /*add_special=*/false, /*parse_special=*/true);
    if (ids.size() == 1) single_tokens_.push_back(ids[0]);
  }
}

bool ReversePrompts::found(std::span<const int32_t> earlier, int32_t last) const {
  if (prompts_.empty()) return false;
  if (std::find(single_tokens_.begin(), single_tokens_.end(), last) != single_tokens_.end()) return true;
  std::string tail;
  const auto append = [&](int32_t id) {
    if (auto piece = tok_->token_to_piece(id, /*special=*/true); piece.ok()) tail += *piece;
  };
  for (const int32_t id : earlier.last(std::min(earlier.size(), kTailTokens - 1))) append(id);
  append(last);
  return std::any_of(prompts_.begin(), prompts_.end(), [&](const std::string& p) {
    const size_t from = tail.size() > p.size() + slack_ ? tail.size() - p.size() - slack_ : 0;
    return tail.find(p, from) != std::string::npos;
  });
}

}  // namespace kiln
