#include "text/chat_template.h"

#include "text/jinja/json.h"

namespace kiln {

Result<ChatTemplate> ChatTemplate::parse(std::string source) {
  auto t = jinja::Template::parse(source);
  if (!t.ok()) return t.error();
  return ChatTemplate(std::move(t).value(), std::move(source));
}

ChatTemplate ChatTemplate::chatml() {
  auto t = jinja::Template::parse(kChatmlSource);
  KILN_ASSERT(t.ok(), "the built-in ChatML template parses");
  return ChatTemplate(std::move(t).value(), kChatmlSource);
}

namespace {

jinja::Value message_value(const ChatMessage& m) {
  jinja::Object o;
  o.set("role", jinja::Value(m.role));
  if (m.parts.empty()) {
    o.set("content", jinja::Value(m.content));
  } else {
    jinja::Array parts;
    for (const ChatContentPart& p : m.parts) {
      jinja::Object part;
      part.set("type", jinja::Value(p.type));
      if (p.type == "text") part.set("text", jinja::Value(p.text));
      if (p.extra.is_object()) {
        for (auto it = p.extra.begin(); it != p.extra.end(); ++it)
          part.set(it.key(), jinja::from_json(it.value()));
      }
      parts.emplace_back(std::move(part));
    }
    o.set("content", jinja::Value(std::move(parts)));
  }
  if (m.extra.is_object()) {
    for (auto it = m.extra.begin(); it != m.extra.end(); ++it) o.set(it.key(), jinja::from_json(it.value()));
  }
  return jinja::Value(std::move(o));
}

}  // namespace

Result<std::string> ChatTemplate::render(const ChatRenderOptions& options) const {
  if (!options.extra_context.is_object()) {
    return make_error("chat template: extra_context must be a JSON object, got ",
                      options.extra_context.type_name());
  }
  jinja::RenderOptions r;
  r.clock = options.clock;
  // Extra variables first, so that the conversation and the special tokens always win.
  for (auto it = options.extra_context.begin(); it != options.extra_context.end(); ++it) {
    r.context.set(it.key(), jinja::from_json(it.value()));
  }
  jinja::Array messages;
  for (const ChatMessage& m : options.messages) messages.push_back(message_value(m));
  r.context.set("messages", jinja::Value(std::move(messages)));
  r.context.set("add_generation_prompt", jinja::Value(options.add_generation_prompt));
  r.context.set("bos_token", jinja::Value(options.bos_token));
  r.context.set("eos_token", jinja::Value(options.eos_token));
  return template_.render(r);
}

Result<std::vector<ChatMessage>> chat_messages_from_json(const nlohmann::ordered_json& messages) {
  if (!messages.is_array())
    return make_error("chat messages: expected a JSON array, got ", messages.type_name());
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object())
      return make_error("chat messages: message ", i, " is ", m.type_name(), ", not an object");
    ChatMessage msg;
    const auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return make_error("chat messages: message ", i, " has no string 'role'");
    msg.role = role->get<std::string>();
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (it.key() == "role") continue;
      if (it.key() != "content") {
        msg.extra[it.key()] = it.value();
        continue;
      }
      const auto& c = it.value();
      if (c.is_string()) {
        msg.content = c.get<std::string>();
      } else if (c.is_array()) {
        for (size_t k = 0; k < c.size(); ++k) {
          const auto& p = c[k];
          const auto type = p.is_object() ? p.find("type") : p.end();
          if (!p.is_object() || type == p.end() || !type->is_string()) {
            return make_error("chat messages: message ", i, " content part ", k, " has no string 'type'");
          }
          ChatContentPart part;
          part.type = type->get<std::string>();
          for (auto f = p.begin(); f != p.end(); ++f) {
            if (f.key() == "type") continue;
            if (f.key() == "text" && part.type == "text") {
              if (!f->is_string())
                return make_error("chat messages: message ", i, " part ", k, " 'text' is not a string");
              part.text = f->get<std::string>();
            } else {
              part.extra[f.key()] = f.value();
            }
          }
          msg.parts.push_back(std::move(part));
        }
      } else if (c.is_null()) {
        msg.extra["content"] = nullptr;
      } else {
        return make_error("chat messages: message ", i, " 'content' is ", c.type_name(),
                          ", not a string or an array");
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

}  // namespace kiln
