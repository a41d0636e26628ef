#include "llm/model_chat_template.h"

#include <optional>

namespace kiln {

Result<ModelChatTemplate> choose_chat_template(const Model& model, const std::string& override_source) {
  std::string source = override_source;
  std::string origin = "the given template";
  if (source.empty()) {
    if (auto t = model.file().get_string("tokenizer.chat_template"); t.ok()) {
      source = *t;
      origin = "the model's tokenizer.chat_template";
    }
  }
  std::optional<ChatTemplate> tmpl;
  if (source.empty()) {
    tmpl = ChatTemplate::chatml();
    source = ChatTemplate::kChatmlSource;
    origin = "ChatML (the model has no template)";
  } else {
    auto parsed = ChatTemplate::parse(source);
    if (!parsed.ok()) return make_error("the chat template (", origin, "): ", parsed.error().message);
    tmpl = std::move(*parsed);
  }
  ModelChatTemplate out{.chat_template = std::move(*tmpl),
                        .source = std::move(source),
                        .bos_text = {},
                        .eos_text = {},
                        .origin = std::move(origin)};
  const auto& tok = model.tokenizer();
  if (tok.bos() >= 0) {
    if (auto p = tok.token_to_piece(tok.bos(), true); p.ok()) out.bos_text = *p;
  }
  if (tok.eos() >= 0) {
    if (auto p = tok.token_to_piece(tok.eos(), true); p.ok()) out.eos_text = *p;
  }
  return out;
}

}  // namespace kiln
