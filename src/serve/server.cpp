#include "serve/server.h"

#include "serve/http.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "serve/engine.h"

namespace kiln::serve {

using nlohmann::json;
using nlohmann::ordered_json;

struct Server::State {
  std::shared_ptr<const Model> model;
  std::optional<ChatTemplate> chat_template;
  std::string bos_text, eos_text;
  std::unique_ptr<CpuEngine> cpu;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Engine> engine;
  ~State() {
    if (engine) engine->stop();  // before the context it decodes with goes away
  }
};

namespace {

struct HttpError {
  int status;
  std::string message;
};

const char* error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 503: return "unavailable_error";
    case 500: return "server_error";
    default: return "invalid_request_error";
  }
}

void send_error(httplib::Response& res, const HttpError& e) {
  res.status = e.status;
  json body = {{"error", {{"message", e.message}, {"type", error_type(e.status)}, {"code", e.status}}}};
  res.set_content(body.dump(), "application/json");
}

// Invalid UTF-8 inside strings (a piece cut mid-character) becomes U+FFFD.
void send_json(httplib::Response& res, const json& body) {
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string make_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  return std::string(prefix) + std::to_string(unix_time()) + "-" + std::to_string(counter++);
}

// A JSON request body: an object, or a 400 naming the problem.
std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    send_error(res, {400, "the request body is not valid JSON"});
    return std::nullopt;
  }
  if (!body.is_object()) {
    send_error(res, {400, "the request body must be a JSON object"});
    return std::nullopt;
  }
  return body;
}

// Reads an optional numeric field; a 400 when it has another type.
template <class T>
std::optional<HttpError> read_number(const json& body, const char* key, T& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return HttpError{400, std::string("field '") + key + "' must be a number"};
  if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer() && !it->is_number_unsigned())
      return HttpError{400, std::string("field '") + key + "' must be an integer"};
  }
  out = it->get<T>();
  return std::nullopt;
}

std::optional<HttpError> read_bool(const json& body, const char* key, bool& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return HttpError{400, std::string("field '") + key + "' must be a boolean"};
  out = it->get<bool>();
  return std::nullopt;
}

// What the completion routes share: sampling, limits, stop strings, streaming.
struct Parsed {
  GenerationRequest gen;
  bool stream = false;
  bool include_usage = false;
};

std::optional<HttpError> parse_common(const json& body, const Model& model, Parsed& p) {
  // Refused: features this server does not implement.
  if (auto it = body.find("tools"); it != body.end() && !it->is_null() && !(it->is_array() && it->empty()))
    return HttpError{400, "field 'tools': tool calls are not supported"};
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || it->value("type", std::string()) != "text")
      return HttpError{400, "field 'response_format': only {\"type\": \"text\"} is supported"};
  }
  int64_t n = 1;
  if (auto e = read_number(body, "n", n)) return e;
  if (n != 1) return HttpError{400, "field 'n': only n = 1 is supported (got " + std::to_string(n) + ")"};
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null() && *it != false && *it != 0)
    return HttpError{400, "field 'logprobs': log probabilities are not supported"};

  SamplerParams& sp = p.gen.sampler;
  sp.temperature = 1.0f;  // OpenAI's defaults
  sp.top_p = 1.0f;
  sp.top_k = 0;
  sp.min_p = 0.0f;
  if (auto e = read_number(body, "temperature", sp.temperature)) return e;
  if (auto e = read_number(body, "top_p", sp.top_p)) return e;
  if (auto e = read_number(body, "top_k", sp.top_k)) return e;
  if (auto e = read_number(body, "min_p", sp.min_p)) return e;
  if (auto e = read_number(body, "presence_penalty", sp.presence_penalty)) return e;
  if (auto e = read_number(body, "frequency_penalty", sp.frequency_penalty)) return e;
  if (sp.presence_penalty != 0 || sp.frequency_penalty != 0) sp.penalty_last_n = -1;
  int64_t seed = -1;
  if (auto e = read_number(body, "seed", seed)) return e;
  sp.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  int64_t max_tokens = -1;
  if (auto e = read_number(body, "max_tokens", max_tokens)) return e;
  if (auto e = read_number(body, "max_completion_tokens", max_tokens)) return e;
  if (body.contains("max_tokens") || body.contains("max_completion_tokens")) {
    if (max_tokens < 1 && max_tokens != -1)
      return HttpError{400, "field 'max_tokens' must be at least 1 (got " + std::to_string(max_tokens) + ")"};
  }
  if (max_tokens > INT32_MAX) max_tokens = -1;
  p.gen.max_tokens = static_cast<int32_t>(max_tokens);
  if (auto e = read_bool(body, "stream", p.stream)) return e;
  if (auto e = read_bool(body, "cache_prompt", p.gen.cache_prompt)) return e;
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return HttpError{400, "field 'stream_options' must be an object"};
    if (auto e = read_bool(*it, "include_usage", p.include_usage)) return e;
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      p.gen.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const auto& s : *it) {
        if (!s.is_string()) return HttpError{400, "field 'stop' must be a string or a list of strings"};
        p.gen.stop.push_back(s.get<std::string>());
      }
    } else {
      return HttpError{400, "field 'stop' must be a string or a list of strings"};
    }
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return HttpError{400, "field 'logit_bias' must be an object of token id -> bias"};
    for (const auto& [key, value] : it->items()) {
      int32_t id = -1;
      try {
        size_t used = 0;
        id = std::stoi(key, &used);
        if (used != key.size()) id = -1;
      } catch (...) {
        id = -1;
      }
      if (id < 0 || id >= model.tokenizer().n_tokens())
        return HttpError{400, "field 'logit_bias': '" + key + "' is not a token id of this vocabulary (0.." +
                                  std::to_string(model.tokenizer().n_tokens() - 1) + ")"};
      if (!value.is_number()) return HttpError{400, "field 'logit_bias': the bias of " + key + " must be a number"};
      sp.logit_bias.emplace_back(id, value.get<float>());
    }
  }
  return std::nullopt;
}

json usage_json(const Generation& g) {
  return {{"prompt_tokens", g.n_prompt()},
          {"completion_tokens", g.n_generated()},
          {"total_tokens", g.n_prompt() + g.n_generated()},
          {"prompt_tokens_details", {{"cached_tokens", g.n_cached()}}}};
}

}  // namespace

Server::Server(ServerOptions options) : opt_(std::move(options)), http_(std::make_unique<httplib::Server>()) {
  // Each streaming client holds an HTTP thread while it waits: enough for every slot and queue.
  const size_t n_threads = static_cast<size_t>(opt_.n_parallel + opt_.queue_limit + 4);
  http_->new_task_queue = [n_threads] { return new httplib::ThreadPool(n_threads); };
  routes();
}

Server::~Server() { stop(); }

std::shared_ptr<Server::State> Server::ready() const {
  std::lock_guard lock(mutex_);
  return state_;
}

Result<int> Server::listen(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
    if (bound < 0) return make_error("serve: cannot bind ", host, " to any port");
  } else if (!http_->bind_to_port(host, port)) {
    return make_error("serve: cannot bind ", host, ":", port, " (in use, or not an address of this machine)");
  }
  thread_ = std::thread([this] { http_->listen_after_bind(); });
  return bound;
}

Status Server::attach(std::shared_ptr<const Model> model) {
  auto st = std::make_shared<State>();
  st->model = model;
  const auto& tok = model->tokenizer();
  std::string source = opt_.chat_template_source;
  if (source.empty()) {
    if (auto t = model->file().get_string("tokenizer.chat_template"); t.ok()) source = *t;
  }
  if (source.empty()) {
    st->chat_template = ChatTemplate::chatml();
  } else {
    auto t = ChatTemplate::parse(source);
    if (!t.ok()) return make_error("serve: the chat template: ", t.error().message);
    st->chat_template = std::move(*t);
  }
  if (tok.bos() >= 0) {
    if (auto p = tok.token_to_piece(tok.bos(), true); p.ok()) st->bos_text = *p;
  }
  if (tok.eos() >= 0) {
    if (auto p = tok.token_to_piece(tok.eos(), true); p.ok()) st->eos_text = *p;
  }
  if (opt_.n_parallel < 1 || opt_.n_parallel > kMaxSequences)
    return make_error("serve: --parallel ", opt_.n_parallel, " is outside 1..", kMaxSequences);
  st->cpu = std::make_unique<CpuEngine>(opt_.n_threads);
  KILN_ASSIGN_OR_RETURN(st->ctx, Context::create(model, st->cpu->backend, opt_.context));
  if (st->ctx->n_ctx() / opt_.n_parallel < 2)
    return make_error("serve: a context of ", st->ctx->n_ctx(), " tokens is too small for ", opt_.n_parallel,
                      " slots");
  st->engine = std::make_unique<Engine>(*st->ctx, opt_.n_parallel, opt_.queue_limit);
  std::lock_guard lock(mutex_);
  state_ = std::move(st);
  return {};
}

void Server::stop() {
  std::shared_ptr<State> st;
  {
    std::lock_guard lock(mutex_);
    st = state_;
  }
  if (st) st->engine->stop();  // ends every generation: their handlers return
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

void Server::routes() {
  auto& h = *http_;
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.api_key.empty() || req.path == "/health" || req.path == "/v1/health")
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + opt_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, {401, "invalid or missing API key (send 'Authorization: Bearer KEY')"});
    return httplib::Server::HandlerResponse::Handled;
  });

  auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (!ready()) return send_error(res, {503, "the model is loading"});
    send_json(res, {{"status", "ok"}});
  };
  h.Get("/health", health);
  h.Get("/v1/health", health);

  h.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    auto st = ready();
    if (!st) return send_error(res, {503, "the model is loading"});
    send_json(res, {{"object", "list"},
                    {"data", json::array({{{"id", st->model->name()},
                                           {"object", "model"},
                                           {"created", unix_time()},
                                           {"owned_by", "kiln"}}})}});
  });

  h.Get("/slots", [this](const httplib::Request&, httplib::Response& res) {
    auto st = ready();
    if (!st) return send_error(res, {503, "the model is loading"});
    json out = json::array();
    for (const SlotInfo& s : st->engine->slots())
      out.push_back({{"id", s.id}, {"is_processing", s.processing}, {"n_ctx", st->engine->n_ctx_slot()},
                     {"n_cached", s.n_cached}});
    send_json(res, out);
  });

  h.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    auto st = ready();
    if (!st) return send_error(res, {503, "the model is loading"});
    auto body = parse_body(req, res);
    if (!body) return;
    auto it = body->find("content");
    if (it == body->end() || !it->is_string()) return send_error(res, {400, "field 'content' must be a string"});
    bool add_special = false, parse_special = true, with_pieces = false;
    for (auto [key, out] : {std::pair{"add_special", &add_special}, std::pair{"parse_special", &parse_special},
                            std::pair{"with_pieces", &with_pieces}})
      if (auto e = read_bool(*body, key, *out)) return send_error(res, *e);
    const auto& tok = st->model->tokenizer();
    const auto ids = tok.tokenize(it->get<std::string>(), add_special, parse_special);
    json tokens = json::array();
    for (int32_t id : ids) {
      if (!with_pieces) {
        tokens.push_back(id);
        continue;
      }
      auto piece = tok.token_to_piece(id, true);
      const std::string text = piece.ok() ? *piece : std::string();
      json jp = text;
      if (!valid_utf8(text)) {
        jp = json::array();  // not valid UTF-8 on its own: its bytes, as llama-server does
        for (unsigned char c : text) jp.push_back(c);
      }
      json entry = json::object();
      entry["id"] = id;
      entry["piece"] = std::move(jp);
      tokens.push_back(std::move(entry));
    }
    send_json(res, {{"tokens", tokens}});
  });

  h.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    auto st = ready();
    if (!st) return send_error(res, {503, "the model is loading"});
    auto body = parse_body(req, res);
    if (!body) return;
    auto it = body->find("tokens");
    if (it == body->end() || !it->is_array()) return send_error(res, {400, "field 'tokens' must be a list of token ids"});
    std::vector<int32_t> ids;
    for (const auto& t : *it) {
      if (!t.is_number_integer()) return send_error(res, {400, "field 'tokens' must be a list of token ids"});
      ids.push_back(t.get<int32_t>());
    }
    auto text = st->model->tokenizer().detokenize(ids, false, false);
    if (!text.ok()) return send_error(res, {400, "field 'tokens': " + text.error().message});
    send_json(res, {{"content", *text}});
  });

  // The completion routes: `chat` selects the chat shape.
  auto complete = [this](bool chat) {
    return [this, chat](const httplib::Request& req, httplib::Response& res) {
      auto st = ready();
      if (!st) return send_error(res, {503, "the model is loading"});
      auto body = parse_body(req, res);
      if (!body) return;
      Parsed p;
      if (auto e = parse_common(*body, *st->model, p)) return send_error(res, *e);
      const auto& tok = st->model->tokenizer();
      if (chat) {
        auto it = body->find("messages");
        if (it == body->end() || !it->is_array() || it->empty())
          return send_error(res, {400, "field 'messages' must be a non-empty list of messages"});
        auto messages = chat_messages_from_json(ordered_json::parse(it->dump()));
        if (!messages.ok()) return send_error(res, {400, "field 'messages': " + messages.error().message});
        // Text parts become one string content, joined with "\n" (as llama-server does for
        // templates that expect strings); other part types are refused.
        for (ChatMessage& m : *messages) {
          if (m.parts.empty()) continue;
          std::string joined;
          for (const ChatContentPart& part : m.parts) {
            if (part.type != "text")
              return send_error(res, {400, "field 'messages': content parts of type '" + part.type + "' are not supported"});
            joined += (joined.empty() ? "" : "\n") + part.text;
          }
          m.content = std::move(joined);
          m.parts.clear();
        }
        ChatRenderOptions ro;
        ro.messages = std::move(*messages);
        ro.add_generation_prompt = true;
        ro.bos_token = st->bos_text;
        ro.eos_token = st->eos_text;
        auto text = st->chat_template->render(ro);
        if (!text.ok()) return send_error(res, {400, "the chat template: " + text.error().message});
        p.gen.prompt = tok.tokenize(*text, true, true);
        // A template that writes BOS itself, with a vocabulary that adds one: keep one.
        if (tok.add_bos() && p.gen.prompt.size() >= 2 && p.gen.prompt[0] == tok.bos() && p.gen.prompt[1] == tok.bos())
          p.gen.prompt.erase(p.gen.prompt.begin());
      } else {
        auto it = body->find("prompt");
        if (it != body->end() && it->is_array() && it->size() == 1 && (*it)[0].is_string()) it = it->begin();
        if (it == body->end() || !it->is_string())
          return send_error(res, {400, "field 'prompt' must be a string"});
        p.gen.prompt = tok.tokenize(it->get<std::string>(), true, true);
      }
      if (p.gen.prompt.empty()) return send_error(res, {400, "the prompt is empty"});
      const int32_t n_ctx_slot = st->engine->n_ctx_slot();
      if (static_cast<int64_t>(p.gen.prompt.size()) >= n_ctx_slot)
        return send_error(res, {400, "the prompt has " + std::to_string(p.gen.prompt.size()) +
                                         " tokens, more than a slot's context of " + std::to_string(n_ctx_slot) +
                                         " allows"});
      auto sampler = Sampler::create(p.gen.sampler, static_cast<int32_t>(st->ctx->n_vocab()));
      if (!sampler.ok()) return send_error(res, {400, sampler.error().message});
      auto gen_or = st->engine->submit(std::move(p.gen), std::move(*sampler));
      if (!gen_or.ok()) return send_error(res, {503, gen_or.error().message});
      std::shared_ptr<Generation> gen = *gen_or;

      const std::string id = make_id(chat ? "chatcmpl-" : "cmpl-");
      const int64_t created = unix_time();
      const std::string model_name = st->model->name();
      const char* object = chat ? (p.stream ? "chat.completion.chunk" : "chat.completion")
                                : "text_completion";
      auto envelope = [=](json choices) {
        return json{{"id", id}, {"object", object}, {"created", created}, {"model", model_name},
                    {"choices", std::move(choices)}};
      };

      if (!p.stream) {
        std::string text;
        for (;;) {
          auto c = gen->next();
          text += c.text;
          if (c.final) break;
        }
        if (!gen->error().empty()) return send_error(res, {500, gen->error()});
        json choice = {{"index", 0}, {"finish_reason", gen->finish_reason()}, {"logprobs", nullptr}};
        if (chat)
          choice["message"] = {{"role", "assistant"}, {"content", text}};
        else
          choice["text"] = text;
        json out = envelope(json::array({choice}));
        out["usage"] = usage_json(*gen);
        return send_json(res, out);
      }

      const bool include_usage = p.include_usage;
      auto first = std::make_shared<bool>(chat);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [=](size_t, httplib::DataSink& sink) {
            auto event = [&](const json& j) {
              const std::string line = "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
              return sink.write(line.data(), line.size());
            };
            auto choice = [&](const std::string& text, const json& finish) {
              json c = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
              if (chat) {
                c["delta"] = json::object();
                if (*first) c["delta"]["role"] = "assistant";
                if (!text.empty() || *first) c["delta"]["content"] = text;
                *first = false;
              } else {
                c["text"] = text;
              }
              return c;
            };
            auto c = gen->next();
            if (!c.final) return event(envelope(json::array({choice(c.text, nullptr)})));
            if (!gen->error().empty()) {
              json err = {{"error", {{"message", gen->error()}, {"type", "server_error"}, {"code", 500}}}};
              event(err);
            } else {
              if (!c.text.empty() && !event(envelope(json::array({choice(c.text, nullptr)})))) return false;
              if (!event(envelope(json::array({choice("", gen->finish_reason())})))) return false;
              if (include_usage) {
                json u = envelope(json::array());
                u["usage"] = usage_json(*gen);
                if (!event(u)) return false;
              }
            }
            static const std::string kDone = "data: [DONE]\n\n";
            sink.write(kDone.data(), kDone.size());
            sink.done();
            return true;
          },
          [gen](bool) { gen->cancel(); });
    };
  };
  h.Post("/v1/completions", complete(false));
  h.Post("/completions", complete(false));
  h.Post("/v1/chat/completions", complete(true));
  h.Post("/chat/completions", complete(true));
}

}  // namespace kiln::serve
