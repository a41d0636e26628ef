#include "serve/transcription_request.h"

#include <string>
#include <string_view>

#include "image/data_uri.h"

namespace kiln::serve {
namespace {

// ref: common_chat_get_asr_prompt's user text. (Its LFM2 preset, a system "Perform ASR.", serves
// the conformer-based lfm2a audio encoder, which kiln refuses at load.)
constexpr const char* kDefaultPrompt = "Transcribe audio to text";

// A form field's text as a JSON number (forms carry every value as text).
std::optional<HttpError> number_field(const http::FormPart& part, json& out) {
  out = json::parse(part.data, nullptr, /*allow_exceptions=*/false);
  if (!out.is_number()) return HttpError{400, field_message(part.name, "must be a number")};
  return std::nullopt;
}

}  // namespace

std::optional<HttpError> transcription_request(std::span<const http::FormPart> form,
                                               TranscriptionRequest& out) {
  const http::FormPart* file = nullptr;
  std::string prompt, language, format = "json";
  json chat = json::object();
  std::vector<std::string_view> seen;
  for (const http::FormPart& part : form) {
    for (std::string_view name : seen)
      if (name == part.name) return HttpError{400, field_message(part.name, "is given more than once")};
    seen.push_back(part.name);
    const std::string value(part.data);
    // Text fields become JSON strings and then template and tokenizer text, which are UTF-8.
    if (part.name != "file" && !valid_utf8(value))
      return HttpError{400, field_message(part.name, "must be UTF-8 text")};
    if (part.name == "file") {
      file = &part;
    } else if (part.name == "model") {
      chat["model"] = value;
    } else if (part.name == "prompt") {
      prompt = value;
    } else if (part.name == "language") {
      language = value;
    } else if (part.name == "response_format") {
      format = value;
    } else if (part.name == "stream") {
      if (value != "true" && value != "false")
        return HttpError{400, field_message("stream", "must be true or false (got '" + value + "')")};
      out.stream = value == "true";
    } else if (part.name == "temperature" || part.name == "max_tokens") {
      if (auto e = number_field(part, chat[part.name])) return e;
    } else if (part.name.starts_with("timestamp_granularities")) {
      return HttpError{400, field_message(part.name, "asks for timestamps, which kiln does not make")};
    }
    // Other fields (chunking_strategy, include[]) change nothing here, as in llama-server.
  }
  if (!file) return HttpError{400, "a transcription needs the audio as a form part named 'file'"};
  if (format != "json" && format != "text")
    return HttpError{400,
                     field_message("response_format", "must be json or text (got '" + format +
                                                          "'; srt, vtt and verbose_json carry timestamps, "
                                                          "which kiln does not make)")};
  out.text_format = format == "text";
  if (out.text_format && out.stream)
    return HttpError{400, "response_format 'text' is not streamed: ask for json to stream a transcription"};

  if (prompt.empty()) prompt = kDefaultPrompt;
  if (!language.empty()) prompt += " (language: " + language + ")";
  const json audio = {{"data", encode_base64(std::span(reinterpret_cast<const uint8_t*>(file->data.data()),
                                                       file->data.size()))}};
  // Text, then the audio: the chat route joins them as "PROMPT<__media__>", llama-server's text.
  chat["messages"] =
      json::array({{{"role", "user"},
                    {"content", json::array({{{"type", "text"}, {"text", prompt}},
                                             {{"type", "input_audio"}, {"input_audio", audio}}})}}});
  chat["stream"] = out.stream;
  out.chat = std::move(chat);
  return std::nullopt;
}

}  // namespace kiln::serve
