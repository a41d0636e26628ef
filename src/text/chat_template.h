// ChatTemplate: a model's chat template (Jinja, from GGUF `tokenizer.chat_template`) turned
// into prompt text for a conversation. Thread-safe: render() may run concurrently.
//
//   auto tmpl = ChatTemplate::parse(source);   // or ChatTemplate::chatml() when a model has none
//   auto prompt = tmpl->render({.messages = msgs, .add_generation_prompt = true,
//                               .bos_token = "<s>", .eos_token = "</s>"});
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "text/jinja/template.h"

namespace kiln {

// One part of a multi-part message content (OpenAI style): {"type": "text", "text": "..."}
// or another type (image, audio...) with its fields in `extra`.
struct ChatContentPart {
  std::string type = "text";
  std::string text;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // more fields of the part
};

struct ChatMessage {
  std::string role;
  // The content: a string, or (when `parts` is non-empty) an array of parts.
  std::string content;
  std::vector<ChatContentPart> parts;
  // More fields of the message as the template sees them (tool_calls, name, reasoning_content...).
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

struct ChatRenderOptions {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  // More template variables (tools, enable_thinking, ...); must be an object.
  nlohmann::ordered_json extra_context = nlohmann::ordered_json::object();
  // Time behind strftime_now(); empty: the system clock.
  std::function<std::chrono::system_clock::time_point()> clock;
};

class ChatTemplate {
 public:
  // llama.cpp's fallback for a model without a template (ChatML):
  //   <|im_start|>{role}\n{content}<|im_end|>\n ... then <|im_start|>assistant\n if asked.
  static constexpr const char* kChatmlSource =
      "{%- for message in messages -%}\n"
      "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
      "{%- endfor -%}\n"
      "{%- if add_generation_prompt -%}\n"
      "{{- '<|im_start|>assistant\\n' -}}\n"
      "{%- endif -%}\n";

  // Errors name the line and column: "jinja: line 3, column 5: unknown filter 'foo'".
  static Result<ChatTemplate> parse(std::string source);
  static ChatTemplate chatml();

  // The prompt text. Template errors and raise_exception() come back as errors.
  Result<std::string> render(const ChatRenderOptions& options) const;

  // The Jinja source it was parsed from.
  const std::string& source() const { return source_; }

 private:
  ChatTemplate(jinja::Template t, std::string source) : template_(std::move(t)), source_(std::move(source)) {}
  jinja::Template template_;
  std::string source_;
};

// The messages of an OpenAI-style JSON array ([{"role": ..., "content": string | parts}, ...]),
// other fields kept in `extra`. Errors name the message index and the field.
Result<std::vector<ChatMessage>> chat_messages_from_json(const nlohmann::ordered_json& messages);

}  // namespace kiln
