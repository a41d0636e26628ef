#include "convert/hf_vocab.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "core/json_file.h"
#include "convert/sentencepiece_model.h"
#include "core/mapped_file.h"
#include "text/unicode.h"

namespace kiln::convert {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr float kAddedTokenScore = -1000.0f;  // convert_hf_to_gguf.py: added and padding tokens
constexpr float kUnsetScore = -10000.0f;      // ... and ids the SentencePiece model lacks

// The pre-tokenizer split patterns kiln recognises, with llama.cpp's names for them.
// ref: llama.cpp convert_hf_to_gguf_update.py models list and src/llama-vocab.cpp.
constexpr std::string_view kLlama3Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kGpt2Regex = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";

// convert_hf_to_gguf.py does_token_look_special: added tokens some models forget to mark special.
bool looks_special(std::string_view t) {
  auto starts = [&](std::string_view p) { return t.substr(0, p.size()) == p; };
  auto ends = [&](std::string_view s) { return t.size() >= s.size() && t.substr(t.size() - s.size()) == s; };
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (starts("<|") && ends("|>")) return true;
  if (starts("<\xef\xbd\x9c") && ends("\xef\xbd\x9c>")) return true;  // "<｜" ... "｜>" (deepseek-coder)
  return starts("<unused") && ends(">");
}

Result<std::optional<json>> optional_json(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::optional<json>();
  KILN_ASSIGN_OR_RETURN(json j, read_json_file(p.string()));
  return std::optional<json>(std::move(j));
}

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;  // empty for BPE
  std::vector<int32_t> types;
};

Result<Vocab> spm_vocab(const fs::path& model_path, const fs::path& dir, const HfModelConfig& c,
                        const std::optional<json>& tokenizer_config) {
  KILN_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(model_path.string()));
  KILN_ASSIGN_OR_RETURN(SpmModel spm, parse_spm_model(mapped->bytes(), model_path.string()));
  const size_t n_vocab = static_cast<size_t>(c.n_vocab);
  Vocab v;
  for (size_t i = 0; i < n_vocab; ++i) {
    v.tokens.push_back("[PAD" + std::to_string(i) + "]");
    v.scores.push_back(kUnsetScore);
    v.types.push_back(static_cast<int32_t>(SpmPieceType::Unused));
  }
  // As the converter: pieces past vocab_size are dropped; user-defined pieces count as NORMAL.
  for (size_t i = 0; i < spm.pieces.size() && i < n_vocab; ++i) {
    const SpmPiece& p = spm.pieces[i];
    v.tokens[i] = p.piece;
    v.scores[i] = p.score;
    SpmPieceType t = p.type;
    if (t == SpmPieceType::UserDefined) t = SpmPieceType::Normal;
    v.types[i] = static_cast<int32_t>(t);
  }
  KILN_ASSIGN_OR_RETURN(auto added, optional_json(dir / "added_tokens.json"));
  if (added) {
    if (!added->is_object()) return make_error("convert: added_tokens.json is not an object");
    for (const auto& [content, id] : added->items()) {
      if (!id.is_number_unsigned())
        return make_error("convert: added_tokens.json: id of '", content, "' is not a non-negative integer");
      const uint64_t tid = id.get<uint64_t>();
      if (tid >= n_vocab) continue;  // the converter ignores (with a warning) ids past vocab_size
      v.tokens[tid] = content;
      v.scores[tid] = kAddedTokenScore;
      v.types[tid] = static_cast<int32_t>(SpmPieceType::UserDefined);
    }
  }
  if (tokenizer_config && tokenizer_config->contains("added_tokens_decoder")) {
    const json& atd = (*tokenizer_config)["added_tokens_decoder"];
    if (!atd.is_object()) return make_error("convert: tokenizer_config.json: added_tokens_decoder is not an object");
    for (const auto& [key, data] : atd.items()) {
      uint64_t tid = 0;
      try {
        size_t used = 0;
        tid = std::stoull(key, &used);
        if (used != key.size()) throw std::invalid_argument(key);
      } catch (const std::exception&) {
        return make_error("convert: tokenizer_config.json: added_tokens_decoder key '", key, "' is not a token id");
      }
      if (!data.is_object() || !data.contains("content") || !data["content"].is_string())
        return make_error("convert: tokenizer_config.json: added_tokens_decoder[", key, "] has no string 'content'");
      if (tid >= n_vocab) continue;
      std::string content = data["content"].get<std::string>();
      const bool special = data.value("special", false);
      if (special || looks_special(content)) {
        v.types[tid] = static_cast<int32_t>(SpmPieceType::Control);
      } else {
        content = text::unescape_spaces(content);
        v.types[tid] = static_cast<int32_t>(SpmPieceType::UserDefined);
      }
      v.scores[tid] = kAddedTokenScore;
      v.tokens[tid] = std::move(content);
    }
  }
  return v;
}

Result<Vocab> bpe_vocab(const json& tok, const HfModelConfig& c) {
  const json& model = tok.at("model");
  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) return make_error("convert: tokenizer.json: model.vocab is not an object");
  const json& vocab = *vocab_it;
  const size_t n_vocab = static_cast<size_t>(c.n_vocab);
  std::vector<std::optional<std::string>> by_id(n_vocab);
  std::vector<int8_t> added_kind(n_vocab, 0);  // 0 regular, 1 added special-looking/special, 2 added user-defined
  auto place = [&](uint64_t id, const std::string& content) -> Status {
    if (id >= n_vocab)
      return make_error("convert: tokenizer.json: token '", content, "' has id ", id, " >= vocab_size ", n_vocab);
    by_id[id] = content;
    return ok_status();
  };
  for (const auto& [content, id] : vocab.items()) {
    if (!id.is_number_unsigned()) return make_error("convert: tokenizer.json: id of '", content, "' is not an integer");
    KILN_TRY(place(id.get<uint64_t>(), content));
  }
  if (tok.contains("added_tokens")) {
    for (const json& at : tok["added_tokens"]) {
      if (!at.is_object() || !at.contains("id") || !at["id"].is_number_unsigned() || !at.contains("content") ||
          !at["content"].is_string())
        return make_error("convert: tokenizer.json: an added_tokens entry lacks an integer id or string content");
      const uint64_t id = at["id"].get<uint64_t>();
      const std::string content = at["content"].get<std::string>();
      KILN_TRY(place(id, content));
      added_kind[id] = (at.value("special", false) || looks_special(content)) ? 1 : 2;
    }
  }
  Vocab v;
  for (size_t i = 0; i < n_vocab; ++i) {
    if (!by_id[i]) {
      v.tokens.push_back("[PAD" + std::to_string(i) + "]");
      v.types.push_back(static_cast<int32_t>(SpmPieceType::Unused));
    } else if (added_kind[i] == 1) {
      v.tokens.push_back(*by_id[i]);
      v.types.push_back(static_cast<int32_t>(SpmPieceType::Control));
    } else if (added_kind[i] == 2) {
      v.tokens.push_back(text::unescape_spaces(*by_id[i]));
      v.types.push_back(static_cast<int32_t>(SpmPieceType::UserDefined));
    } else {
      v.tokens.push_back(*by_id[i]);
      v.types.push_back(static_cast<int32_t>(SpmPieceType::Normal));
    }
  }
  return v;
}

Result<std::vector<std::string>> bpe_merges(const json& tok) {
  const json merges = tok.at("model").value("merges", json::array());
  if (!merges.is_array()) return make_error("convert: tokenizer.json: model.merges is not an array");
  std::vector<std::string> out;
  out.reserve(merges.size());
  for (const json& m : merges) {
    if (m.is_string()) {
      out.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      out.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());  // newer pair format
    } else {
      return make_error("convert: tokenizer.json: merge ", out.size(), " is neither \"a b\" nor [a, b]");
    }
  }
  return out;
}

// SpecialVocab: ids of bos/eos/unk/sep/pad/cls/mask, add_*_token flags, chat template.
Status write_special(GgufWriter& w, const HfModelConfig& c, size_t n_tokens, const std::optional<json>& tokenizer_json,
                     const std::optional<json>& tokenizer_config, const fs::path& dir) {
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {"bos", "bos_token_id"},       {"eos", "eos_token_id"},     {"unk", "unknown_token_id"}, {"sep", "seperator_token_id"},
      {"pad", "padding_token_id"},   {"cls", "cls_token_id"},     {"mask", "mask_token_id"},
  };
  std::vector<std::pair<std::string, uint32_t>> ids;  // insertion order, as the converter's dict
  auto set_id = [&](std::string_view typ, const json* tid) {
    if (!tid || !tid->is_number_integer() || tid->get<int64_t>() < 0) return;
    const int64_t id = tid->get<int64_t>();
    if (static_cast<uint64_t>(id) >= n_tokens) return;
    for (const auto& [t, _] : ids) {
      if (t == typ) return;
    }
    ids.emplace_back(std::string(typ), static_cast<uint32_t>(id));
  };
  std::vector<std::pair<std::string, bool>> add_flags;
  if (tokenizer_config) {
    for (const auto& [typ, _] : kTypes) {
      const std::string key = "add_" + std::string(typ) + "_token";
      if (tokenizer_config->contains(key) && (*tokenizer_config)[key].is_boolean())
        add_flags.emplace_back(std::string(typ), (*tokenizer_config)[key].get<bool>());
      if (!tokenizer_json || !tokenizer_json->contains("added_tokens")) continue;
      const json* entry = tokenizer_config->contains(std::string(typ) + "_token") ? &(*tokenizer_config)[std::string(typ) + "_token"]
                                                                                  : nullptr;
      std::string content;
      if (entry && entry->is_string()) content = entry->get<std::string>();
      else if (entry && entry->is_object() && entry->contains("content") && (*entry)["content"].is_string())
        content = (*entry)["content"].get<std::string>();
      else continue;
      for (const json& at : (*tokenizer_json)["added_tokens"]) {
        if (at.is_object() && at.value("content", std::string()) == content) {
          set_id(typ, at.contains("id") ? &at["id"] : nullptr);
          break;
        }
      }
    }
  }
  for (const auto& [typ, _] : kTypes) {
    const std::string key = std::string(typ) + "_token_id";
    set_id(typ, c.raw.contains(key) ? &c.raw[key] : nullptr);
  }
  for (const auto& [typ, id] : ids) {
    for (const auto& [t, key] : kTypes) {
      if (t == typ) w.set_u32("tokenizer.ggml." + std::string(key), id);
    }
  }
  for (const auto& [typ, flag] : add_flags) w.set_bool("tokenizer.ggml.add_" + typ + "_token", flag);

  // Chat template: tokenizer_config.json's chat_template (a string, or a list of named templates),
  // else a chat_template.jinja file.
  if (tokenizer_config && tokenizer_config->contains("chat_template")) {
    const json& ct = (*tokenizer_config)["chat_template"];
    if (ct.is_string()) {
      w.set_string("tokenizer.chat_template", ct.get<std::string>());
    } else if (ct.is_array()) {
      for (const json& t : ct) {
        if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["name"].is_string() ||
            !t["template"].is_string())
          return make_error("convert: tokenizer_config.json: a chat_template entry lacks a string name or template");
        const std::string name = t["name"].get<std::string>();
        w.set_string(name == "default" ? "tokenizer.chat_template" : "tokenizer.chat_template." + name,
                     t["template"].get<std::string>());
      }
    }
  } else {
    std::error_code ec;
    if (fs::is_regular_file(dir / "chat_template.jinja", ec)) {
      KILN_ASSIGN_OR_RETURN(std::string text, read_text_file((dir / "chat_template.jinja").string()));
      w.set_string("tokenizer.chat_template", text);
    }
  }
  return ok_status();
}

Result<std::string> pre_name_of(const json& pre) {
  if (!pre.is_object()) return make_error("convert: tokenizer.json: no pre_tokenizer object");
  const std::string type = pre.value("type", std::string());
  if (type == "ByteLevel") {
    if (pre.value("use_regex", true)) return std::string("gpt-2");
    return make_error("convert: tokenizer.json: a ByteLevel pre_tokenizer without its regex is not a known pre-tokenizer");
  }
  if (type == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    std::string regex;
    int n_split = 0;
    bool byte_level_plain = false;
    for (const json& p : pre["pretokenizers"]) {
      const std::string t = p.value("type", std::string());
      if (t == "Split" && p.contains("pattern") && p["pattern"].is_object() && p["pattern"].contains("Regex") &&
          p["pattern"]["Regex"].is_string()) {
        regex = p["pattern"]["Regex"].get<std::string>();
        ++n_split;
      } else if (t == "ByteLevel" && !p.value("use_regex", true)) {
        byte_level_plain = true;
      } else {
        return make_error("convert: tokenizer.json: pre_tokenizer step '", p.dump(), "' is not recognised");
      }
    }
    if (n_split == 1 && byte_level_plain) {
      if (regex == kLlama3Regex) return std::string("llama-bpe");
      if (regex == kQwen2Regex) return std::string("qwen2");
      if (regex == kGpt2Regex) return std::string("gpt-2");
    }
    return make_error("convert: tokenizer.json: pre-tokenizer regex '", regex,
                      "' is not one kiln recognises (gpt-2, llama3 'llama-bpe', qwen2)");
  }
  return make_error("convert: tokenizer.json: pre_tokenizer type '", type, "' is not recognised");
}

Status write_vocab_files(const std::string& dir_str, const HfModelConfig& c, GgufWriter& w) {
  const fs::path dir(dir_str);
  KILN_ASSIGN_OR_RETURN(auto tokenizer_config, optional_json(dir / "tokenizer_config.json"));
  if (tokenizer_config && !tokenizer_config->is_object()) return make_error("convert: tokenizer_config.json is not an object");
  KILN_ASSIGN_OR_RETURN(auto tokenizer_json, optional_json(dir / "tokenizer.json"));
  if (tokenizer_json && !tokenizer_json->is_object()) return make_error("convert: tokenizer.json is not an object");

  std::error_code ec;
  Vocab v;
  if (fs::is_regular_file(dir / "tokenizer.model", ec)) {
    KILN_ASSIGN_OR_RETURN(v, spm_vocab(dir / "tokenizer.model", dir, c, tokenizer_config));
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string("tokenizer.ggml.pre", "default");
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    w.set_f32_array("tokenizer.ggml.scores", v.scores);
    w.set_i32_array("tokenizer.ggml.token_type", v.types);
  } else if (tokenizer_json) {
    const json& tok = *tokenizer_json;
    if (!tok.contains("model") || !tok["model"].is_object() || tok["model"].value("type", std::string()) != "BPE")
      return make_error("convert: tokenizer.json: model.type is not \"BPE\" (only BPE tokenizer.json files convert)");
    KILN_ASSIGN_OR_RETURN(std::string pre, pre_name_of(tok.value("pre_tokenizer", json())));
    KILN_ASSIGN_OR_RETURN(v, bpe_vocab(tok, c));
    KILN_ASSIGN_OR_RETURN(std::vector<std::string> merges, bpe_merges(tok));
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", pre);
    w.set_string_array("tokenizer.ggml.tokens", v.tokens);
    w.set_i32_array("tokenizer.ggml.token_type", v.types);
    w.set_string_array("tokenizer.ggml.merges", merges);
  } else {
    return make_error("convert: '", dir_str, "' has neither tokenizer.model nor tokenizer.json");
  }
  return write_special(w, c, v.tokens.size(), tokenizer_json, tokenizer_config, dir);
}

}  // namespace

Result<std::string> bpe_pre_name(const json& pre) {
  return json_guard("convert: tokenizer.json pre_tokenizer", [&] { return pre_name_of(pre); });
}

Status write_vocab(const std::string& dir, const HfModelConfig& c, GgufWriter& w) {
  return json_guard("convert: tokenizer files of '" + dir + "'", [&] { return write_vocab_files(dir, c, w); });
}

}  // namespace kiln::convert
