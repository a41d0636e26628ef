// libFuzzer target for everything a client controls before a generation starts: the HTTP request
// parser (src/serve/http/request_parser.h) and the JSON request parsing of the generation routes
// (the body as a bounded-depth JSON object, the completion fields of the three APIs, the prompt,
// the messages and tools planned into a chat prompt through the Qwen2 test model's Jinja template
// by the text layer's chat::plan_chat, which serve/chat_request.cpp calls), and multipart form
// bodies (serve/http/multipart.h) read as a transcription form. Any input must end in a request
// or a clean error, never a crash, a sanitizer report, a leak or a hang.
// Input: byte 0 chooses the mode; the rest is either raw bytes from a client (parsed as pipelined
// requests, delivered in pieces whose size byte 1 chooses) or a request body.
// Run: fuzz/run_fuzz.sh http_request [SECONDS]
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "core/gguf.h"
#include "serve/api_json.h"
#include "serve/completion_request.h"
#include "serve/http/multipart.h"
#include "serve/http/request_parser.h"
#include "serve/transcription_request.h"
#include "test_data.h"
#include "text/chat/chat_plan.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace {

using namespace kiln;
using namespace kiln::serve;

// The Qwen2 fixture's vocabulary and chat template, loaded once.
struct Model {
  std::unique_ptr<text::Tokenizer> tok;
  std::unique_ptr<ChatTemplate> chat;
  chat::ChatSyntax syntax;
  std::string bos, eos;
};

const Model& model() {
  static const Model m = [] {
    Model out;
    const std::string path = test_data::path("models/qwen2-e64-Q8_0.gguf");
    auto file = GgufFile::open(path);
    if (!file.ok()) {
      std::fprintf(stderr, "http_request_fuzz: %s\n", file.error().message.c_str());
      std::abort();
    }
    auto tok = text::Tokenizer::from_gguf(**file);
    auto source = (*file)->get_string("tokenizer.chat_template");
    auto chat = source.ok() ? ChatTemplate::parse(std::string(*source))
                            : Result<ChatTemplate>(ChatTemplate::chatml());
    if (!tok.ok() || !chat.ok()) {
      std::fprintf(stderr, "http_request_fuzz: the fixture's tokenizer or template does not load\n");
      std::abort();
    }
    out.tok = std::make_unique<text::Tokenizer>(std::move(*tok));
    out.chat = std::make_unique<ChatTemplate>(std::move(*chat));
    out.syntax = chat::detect_chat_syntax(*out.chat);
    out.eos = "<|endoftext|>";
    return out;
  }();
  return m;
}

void parse_body_fields(std::string_view text) {
  json body;
  if (parse_json_object(text, body)) return;
  const Model& m = model();
  for (CompletionApi api : {CompletionApi::Chat, CompletionApi::Completions, CompletionApi::Native}) {
    CompletionRequest p;
    (void)parse_completion_fields(body, *m.tok, p, api);
  }
  if (auto it = body.find("prompt");
      it != body.end() && (!it->is_string() || it->get_ref<const std::string&>().size() < 4096)) {
    std::vector<int32_t> ids;
    (void)parse_prompt(*it, *m.tok, "prompt", /*n_ctx_slot=*/4096, ids);
  }
  auto messages = body.find("messages");
  if (messages == body.end()) return;
  chat::ChatRequest r;
  auto parsed = chat_messages_from_json(ordered_json(*messages));
  if (!parsed.ok()) return;
  r.messages = std::move(*parsed);
  if (auto tools = body.find("tools"); tools != body.end()) {
    auto defs = chat::tools_from_json(ordered_json(*tools));
    if (!defs.ok()) return;
    r.tools = std::move(*defs);
  }
  r.bos_token = m.bos;
  r.eos_token = m.eos;
  auto plan = chat::plan_chat(*m.chat, m.syntax, r);
  if (plan.ok()) (void)tokenize_chat(*m.tok, plan->prompt.substr(0, 4096));
}

void parse_wire(std::string_view wire, size_t piece) {
  http::RequestParser parser({.max_head = 4096, .max_headers = 32, .max_body = 1 << 16});
  std::string in;
  size_t at = 0;
  for (int requests = 0; requests < 16;) {
    // Bytes arrive `piece` at a time, as from a socket.
    if (at < wire.size()) {
      const size_t n = std::min(piece, wire.size() - at);
      in.append(wire.substr(at, n));
      at += n;
    }
    const size_t used = parser.feed(in);
    in.erase(0, used);
    const auto state = parser.state();
    if (state == http::RequestParser::State::Failed) return;
    if (state == http::RequestParser::State::Done) {
      const http::Request r = parser.take_request();
      if (http::is_multipart_form(r.header("Content-Type"))) {
        auto form = http::parse_multipart_form(r.header("Content-Type"), r.body);
        TranscriptionRequest t;
        if (form.ok() && !transcription_request(*form, t)) parse_body_fields(t.chat.dump());
      } else {
        parse_body_fields(r.body);
      }
      parser.reset();
      ++requests;
      continue;
    }
    if (used == 0 && at >= wire.size()) {
      parser.end_of_input();
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  if (data[0] & 1)
    parse_body_fields(rest);
  else
    parse_wire(rest, 1 + data[1] % 64);
  return 0;
}
