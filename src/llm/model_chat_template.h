// Which chat template a model talks through, chosen one way for every front end (`kiln chat` and
// `kiln serve`): a template the user gives (--chat-template-file)
// first, else the model's own (GGUF `tokenizer.chat_template`), else ChatML, llama.cpp's fallback.
// Templates render with the vocabulary's own BOS/EOS texts, which come with the choice.
#pragma once

#include <string>

#include "core/result.h"
#include "llm/model.h"
#include "text/chat_template.h"

namespace kiln {

struct ModelChatTemplate {
  ChatTemplate chat_template;
  std::string source;              // its Jinja text (ChatTemplate::kChatmlSource for the fallback)
  std::string bos_text, eos_text;  // the vocabulary's BOS/EOS token texts; empty when it has none
  std::string origin;              // where the template came from, for messages
};

// `override_source` non-empty: that template text. Errors: a template that does not parse
// ("the chat template (ORIGIN): jinja: line L, column C: ...").
Result<ModelChatTemplate> choose_chat_template(const Model& model, const std::string& override_source);

}  // namespace kiln
