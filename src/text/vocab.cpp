#include "text/vocab.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "text/unicode.h"

namespace kiln::text {

namespace {

const GgufValue* find_array(const GgufFile& file, std::string_view key) {
  const GgufValue* v = file.find(key);
  return v && v->type == GgufType::ARRAY ? v : nullptr;
}

Error wrong_type(std::string_view key, const GgufValue& v, std::string_view want) {
  std::string got(gguf_type_name(v.type));
  if (v.type == GgufType::ARRAY) got += std::string(" of ") + std::string(gguf_type_name(v.elem_type));
  return make_error("vocab: key '", key, "' has type ", got, ", expected ", want);
}

// An optional bool key: leaves `out` alone when absent.
Status read_bool(const GgufFile& file, std::string_view key, bool& out) {
  const GgufValue* v = file.find(key);
  if (!v) return ok_status();
  if (v->type != GgufType::BOOL) return wrong_type(key, *v, "bool");
  out = v->num.u != 0;
  return ok_status();
}

bool is_one_of(std::string_view s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

}  // namespace

std::string_view vocab_type_name(VocabType t) {
  switch (t) {
    case VocabType::kNone:
      return "none";
    case VocabType::kSpm:
      return "SPM";
    case VocabType::kBpe:
      return "BPE";
    case VocabType::kWpm:
      return "WPM";
    case VocabType::kUgm:
      return "UGM";
  }
  return "unknown";
}

int32_t Vocab::find(std::string_view text) const {
  auto it = token_to_id_.find(text);
  return it == token_to_id_.end() ? kTokenNull : it->second;
}

int Vocab::bpe_rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left).push_back('\0');
  key.append(right);
  auto it = bpe_ranks_.find(key);
  return it == bpe_ranks_.end() ? -1 : it->second;
}

int32_t Vocab::byte_to_token(uint8_t byte) const {
  if (type_ == VocabType::kSpm || type_ == VocabType::kUgm) {
    const int32_t id = find(byte_token_text(byte));
    if (id != kTokenNull) return id;
    return find(std::string_view(reinterpret_cast<const char*>(&byte), 1));
  }
  return find(byte_to_utf8(byte));
}

Result<Vocab> Vocab::from_gguf(const GgufFile& file, const VocabOptions& options) {
  Vocab v;
  const GgufValue* model = file.find("tokenizer.ggml.model");
  if (!model) return make_error("vocab: key 'tokenizer.ggml.model' is missing");
  if (model->type != GgufType::STRING) return wrong_type("tokenizer.ggml.model", *model, "string");
  v.model_ = model->str;
  std::string pre_name;
  if (const GgufValue* pre = file.find("tokenizer.ggml.pre")) {
    if (pre->type != GgufType::STRING) return wrong_type("tokenizer.ggml.pre", *pre, "string");
    pre_name = pre->str;
  }
  if (options.pre) pre_name = *options.pre;

  if (v.model_ == "no_vocab" || v.model_ == "none") {
    v.type_ = VocabType::kNone;
    v.pre_.name = "none";
    return v;
  }
  // ref: llama.cpp llama_vocab::impl::load: default special ids and flags per tokenizer model.
  if (v.model_ == "llama") {
    v.type_ = VocabType::kSpm;
    v.bos_ = 1, v.eos_ = 2, v.unk_ = 0;
    v.add_space_prefix_ = true, v.clean_spaces_ = false, v.add_bos_ = true, v.add_eos_ = false;
    v.escape_whitespaces_ = true;
    v.pre_.name = "default";
  } else if (v.model_ == "bert") {
    v.type_ = VocabType::kWpm;
    v.bos_ = 101, v.unk_ = 100, v.sep_ = 102, v.pad_ = 0, v.mask_ = 103;
    v.add_space_prefix_ = false, v.clean_spaces_ = true, v.add_bos_ = true, v.add_eos_ = false,
    v.add_sep_ = true;
    v.pre_.name = "default";
  } else if (v.model_ == "gpt2" || v.model_ == "gemma4") {
    v.type_ = VocabType::kBpe;
    if (v.model_ == "gpt2") {
      v.bos_ = 11, v.eos_ = 11;
    } else {
      pre_name = "gemma4";  // Gemma 4's SentencePiece-style BPE, whatever the file's pre says
    }
    KILN_ASSIGN_OR_RETURN(v.pre_, pre_tokenizer_config(pre_name));
    v.add_space_prefix_ = false, v.clean_spaces_ = v.pre_.clean_spaces, v.add_bos_ = v.pre_.add_bos;
    v.escape_whitespaces_ = v.pre_.escape_whitespaces;
    if (v.pre_.no_bos) v.bos_ = kTokenNull;
    KILN_TRY(v.load_merges(file));
  } else if (v.model_ == "t5") {
    v.type_ = VocabType::kUgm;
    v.eos_ = 1, v.unk_ = 2, v.pad_ = 0;
    v.add_bos_ = false, v.add_eos_ = true, v.escape_whitespaces_ = true;
    v.pre_.name = "default";
    KILN_TRY(v.load_charsmap(file));
  } else {
    return make_error("vocab: unsupported tokenizer model '", v.model_,
                      "' (tokenizer.ggml.model; kiln reads llama, gpt2, gemma4, bert and t5)");
  }
  KILN_TRY(read_bool(file, "tokenizer.ggml.add_space_prefix", v.add_space_prefix_));
  KILN_TRY(read_bool(file, "tokenizer.ggml.remove_extra_whitespaces", v.remove_extra_whitespaces_));
  v.default_pad_ = v.pad_;

  KILN_TRY(v.load_tokens(file));
  KILN_TRY(v.load_special_ids(file));
  v.detect_special_tokens(file);
  if (v.type_ == VocabType::kUgm && v.unk_ == kTokenNull) {
    // the segmentation falls back to the unknown token for text no token covers
    return make_error("vocab: UGM vocabulary without an unknown token (tokenizer.ggml.unknown_token_id)");
  }
  return v;
}

Status Vocab::load_merges(const GgufFile& file) {
  const GgufValue* merges = file.find("tokenizer.ggml.merges");
  if (!merges) return make_error("vocab: BPE vocabulary without 'tokenizer.ggml.merges'");
  if (merges->type != GgufType::ARRAY || merges->elem_type != GgufType::STRING) {
    return wrong_type("tokenizer.ggml.merges", *merges, "array of string");
  }
  bpe_ranks_.reserve(merges->arr.size());
  for (size_t i = 0; i < merges->arr.size(); ++i) {
    const std::string& word = merges->arr[i].str;
    // "left right", split at the first space after the first byte; the first of duplicates wins
    const size_t pos = word.find(' ', 1);
    std::string key;
    if (pos != std::string::npos)
      key = word.substr(0, pos) + '\0' + word.substr(pos + 1);
    else
      key = std::string(1, '\0');
    bpe_ranks_.emplace(std::move(key), static_cast<int32_t>(i));
  }
  return ok_status();
}

Status Vocab::load_charsmap(const GgufFile& file) {
  constexpr std::string_view kKey = "tokenizer.ggml.precompiled_charsmap";
  const GgufValue* map = file.find(kKey);
  if (!map) return ok_status();
  if (map->type != GgufType::ARRAY || (map->elem_type != GgufType::U8 && map->elem_type != GgufType::I8)) {
    return wrong_type(kKey, *map, "array of u8 or i8");
  }
  charsmap_.reserve(map->arr.size());
  const bool is_signed = map->elem_type == GgufType::I8;
  for (const GgufValue& b : map->arr)
    charsmap_.push_back(static_cast<uint8_t>(is_signed ? b.num.i : b.num.u));
  // ref: llama.cpp: a 4-byte size of the XCDA blob, the blob, then the replacement strings
  if (charsmap_.size() < 4) {
    return make_error("vocab: ", kKey, " has ", charsmap_.size(), " bytes, fewer than its 4-byte header");
  }
  uint32_t blob = 0;
  std::memcpy(&blob, charsmap_.data(), 4);
  if (uint64_t(blob) + 4 >= charsmap_.size()) {
    return make_error("vocab: ", kKey, ": its ", blob, "-byte XCDA blob does not fit in its ",
                      charsmap_.size(), " bytes");
  }
  return ok_status();
}

Status Vocab::load_tokens(const GgufFile& file) {
  const GgufValue* list = file.find("tokenizer.ggml.tokens");
  if (!list) return make_error("vocab: key 'tokenizer.ggml.tokens' is missing");
  if (list->type != GgufType::ARRAY || list->elem_type != GgufType::STRING) {
    return wrong_type("tokenizer.ggml.tokens", *list, "array of string");
  }
  const size_t n = list->arr.size();
  if (n >= size_t(INT32_MAX)) return make_error("vocab: ", n, " tokens exceed the int32 id range");

  const GgufValue* scores = find_array(file, "tokenizer.ggml.scores");
  if (file.find("tokenizer.ggml.scores")) {
    if (!scores || (scores->elem_type != GgufType::F32 && scores->elem_type != GgufType::I32)) {
      return wrong_type("tokenizer.ggml.scores", *file.find("tokenizer.ggml.scores"), "array of f32 or i32");
    }
    if (scores->arr.size() < n) {
      return make_error("vocab: tokenizer.ggml.scores has ", scores->arr.size(), " entries for ", n,
                        " tokens");
    }
  }
  const GgufValue* types = find_array(file, "tokenizer.ggml.token_type");
  if (file.find("tokenizer.ggml.token_type")) {
    if (!types || types->elem_type != GgufType::I32) {
      return wrong_type("tokenizer.ggml.token_type", *file.find("tokenizer.ggml.token_type"), "array of i32");
    }
    if (types->arr.size() < n) {
      return make_error("vocab: tokenizer.ggml.token_type has ", types->arr.size(), " entries for ", n,
                        " tokens");
    }
  }

  tokens_.resize(n);
  token_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    TokenData& t = tokens_[i];
    t.text = list->arr[i].str;
    if (t.text.empty()) t.text = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names them
    auto [it, inserted] = token_to_id_.emplace(t.text, static_cast<int32_t>(i));
    if (!inserted) {
      return make_error("vocab: duplicate token '", t.text, "' has ids ", it->second, " and ", i);
    }
    max_token_len_ = std::max(max_token_len_, t.text.size());
    if (scores) {
      const GgufValue& s = scores->arr[i];
      t.score =
          scores->elem_type == GgufType::F32 ? static_cast<float>(s.num.f) : static_cast<float>(s.num.i);
    }
    t.attr = kAttrNormal;
    if (types) {
      // GGUF token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
      switch (types->arr[i].num.i) {
        case 1:
          t.attr = kAttrNormal;
          break;
        case 2:
          t.attr = kAttrUnknown;
          break;
        case 3:
          t.attr = kAttrControl;
          break;
        case 4:
          t.attr = kAttrUserDefined;
          break;
        case 5:
          t.attr = kAttrUnused;
          break;
        case 6:
          t.attr = kAttrByte;
          break;
        default:
          t.attr = kAttrUndefined;
          break;
      }
    }
  }
  return ok_status();
}

Status Vocab::load_special_ids(const GgufFile& file) {
  const std::pair<const char*, int32_t*> keys[] = {
      {"tokenizer.ggml.bos_token_id", &bos_},
      {"tokenizer.ggml.eos_token_id", &eos_},
      {"tokenizer.ggml.eot_token_id", &eot_},
      {"tokenizer.ggml.eom_token_id", &eom_},
      {"tokenizer.ggml.unknown_token_id", &unk_},
      {"tokenizer.ggml.seperator_token_id", &sep_},
      {"tokenizer.ggml.padding_token_id", &pad_},
      {"tokenizer.ggml.mask_token_id", &mask_},
      {"tokenizer.ggml.fim_pre_token_id", &fim_pre_},
      {"tokenizer.ggml.fim_suf_token_id", &fim_suf_},
      {"tokenizer.ggml.fim_mid_token_id", &fim_mid_},
      {"tokenizer.ggml.fim_pad_token_id", &fim_pad_},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep_},
      {"tokenizer.ggml.fim_sep_token_id", &fim_sep_},
      // deprecated spellings
      {"tokenizer.ggml.prefix_token_id", &fim_pre_},
      {"tokenizer.ggml.suffix_token_id", &fim_suf_},
      {"tokenizer.ggml.middle_token_id", &fim_mid_},
  };
  for (const auto& [key, id] : keys) {
    // A default id past the vocabulary is dropped; a file id past it keeps the default (llama.cpp
    // warns and goes on, so kiln accepts such files too).
    if (*id >= n_tokens()) *id = kTokenNull;
    const GgufValue* v = file.find(key);
    if (!v) continue;
    if (!v->is_integer()) return wrong_type(key, *v, "an integer type");
    const bool negative = (v->type == GgufType::I8 || v->type == GgufType::I16 || v->type == GgufType::I32 ||
                           v->type == GgufType::I64) &&
                          v->num.i < 0;
    if (!negative && v->num.u < uint64_t(n_tokens())) *id = static_cast<int32_t>(v->num.u);
  }

  KILN_TRY(read_bool(file, "tokenizer.ggml.add_bos_token", add_bos_));
  KILN_TRY(read_bool(file, "tokenizer.ggml.add_eos_token", add_eos_));
  KILN_TRY(read_bool(file, "tokenizer.ggml.add_sep_token", add_sep_));
  if (pre_.force_bos) add_bos_ = true;  // ref: llama.cpp "workaround for Gemma 4"
  if (add_bos_ && bos_ == kTokenNull)
    return make_error("vocab: add_bos_token is true, but bos_token_id is not set");
  if (add_eos_ && eos_ == kTokenNull)
    return make_error("vocab: add_eos_token is true, but eos_token_id is not set");
  if (add_sep_ && sep_ == kTokenNull) {
    return make_error("vocab: add_sep_token is true, but seperator_token_id is not set");
  }

  KILN_TRY(read_bool(file, "tokenizer.ggml.normalizer.lowercase", lowercase_));
  strip_accents_ = lowercase_;
  KILN_TRY(read_bool(file, "tokenizer.ggml.normalizer.strip_accents", strip_accents_));
  return ok_status();
}

void Vocab::detect_special_tokens(const GgufFile& file) {
  // ref: llama.cpp: special ids not named by the file are found by their text, and such tokens
  // become control tokens. When several texts are present llama.cpp's pick follows its hash map's
  // order; kiln takes the earliest text of the list (so Qwen's EOT is <|im_end|>, as llama.cpp's).
  const auto detect = [&](int32_t& slot, std::initializer_list<std::string_view> texts) {
    if (slot != kTokenNull) return;
    for (std::string_view text : texts) {
      const int32_t id = find(text);
      if (id != kTokenNull) {
        slot = id;
        tokens_[id].attr |= kAttrControl;
        return;
      }
    }
  };
  detect(eot_, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"});
  detect(eom_, {"<|eom_id|>"});
  detect(fim_pre_, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                    "<|code_prefix|>", "<|prefix|>"});
  detect(fim_suf_, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                    "<|code_suffix|>", "<|suffix|>"});
  detect(fim_mid_, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                    "<|code_middle|>", "<|middle|>"});
  detect(fim_pad_, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"});
  detect(fim_rep_, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect(fim_sep_, {"<|file_sep|>"});

  // control tokens whose text says "unused" are unused
  for (TokenData& t : tokens_) {
    if ((t.attr & kAttrControl) && t.text.find("unused") != std::string::npos) t.attr |= kAttrUnused;
  }

  // the end-of-generation set
  for (int32_t id : {fim_pad_, fim_rep_, fim_sep_}) {
    if (id != kTokenNull) eog_.insert(id);
  }
  for (int32_t id = 0; id < n_tokens(); ++id) {
    if (is_one_of(tokens_[id].text, {"<|eot_id|>",
                                     "<|im_end|>",
                                     "<|end|>",
                                     "<|return|>",
                                     "<|call|>",
                                     "<|flush|>",
                                     "<|calls|>",
                                     "<end_of_turn>",
                                     "<|endoftext|>",
                                     "</s>",
                                     "<|eom_id|>",
                                     "<EOT>",
                                     "_<EOT>",
                                     "[EOT]",
                                     "[EOS]",
                                     "<|end_of_text|>",
                                     "<end_of_utterance>",
                                     "<eos>",
                                     "<turn|>",
                                     "<|tool_response>",
                                     "<｜end▁of▁sentence｜>",
                                     "[e~["})) {
      eog_.insert(id);
      tokens_[id].attr |= kAttrControl;
    }
  }
  // gpt-oss: these render always (ref: llama.cpp, "quick hack for gpt-oss")
  for (TokenData& t : tokens_) {
    if (is_one_of(t.text, {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}))
      t.attr = kAttrUserDefined;
  }
  for (int32_t id : {eos_, eot_, eom_}) {
    if (id != kTokenNull) eog_.insert(id);
  }
  // harmony / solar-open: "<|end|>" ends a message, not the generation
  {
    bool has_return = false, has_call = false, has_flush = false;
    int32_t end_id = kTokenNull;
    for (int32_t id : eog_) {
      const std::string& text = tokens_[id].text;
      if (text == "<|return|>")
        has_return = true;
      else if (text == "<|call|>" || text == "<|calls|>")
        has_call = true;
      else if (text == "<|flush|>")
        has_flush = true;
      else if (text == "<|end|>")
        end_id = id;
    }
    if (end_id != kTokenNull && ((has_return && has_call) || (has_call && has_flush))) {
      eog_.erase(end_id);
      tokens_[end_id].attr = kAttrUserDefined;
    }
  }
  // gemma4 / paddleocr: "</s>" is not an end of generation next to "<|tool_response>"
  {
    bool has_tool_response = false;
    int32_t s_id = kTokenNull;
    for (int32_t id : eog_) {
      if (tokens_[id].text == "<|tool_response>")
        has_tool_response = true;
      else if (tokens_[id].text == "</s>")
        s_id = id;
    }
    if (has_tool_response && s_id != kTokenNull) {
      eog_.erase(s_id);
      tokens_[s_id].attr = kAttrNormal;
    }
  }

  for (int32_t id = 0; id < n_tokens(); ++id) {
    if (tokens_[id].attr & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_tokens_.push_back(id);
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[a].text.size() > tokens_[b].text.size(); });

  // Per-model attributes llama.cpp sets by name (ref: llama.cpp "Handle per token attributes").
  std::string name, arch;
  if (const GgufValue* n = file.find("general.name"); n && n->type == GgufType::STRING) name = n->str;
  if (const GgufValue* a = file.find("general.architecture"); a && a->type == GgufType::STRING) arch = a->str;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto contains_any = [](const std::string& s, std::initializer_list<std::string_view> subs) {
    return std::any_of(subs.begin(), subs.end(),
                       [&](std::string_view sub) { return s.find(sub) != std::string::npos; });
  };
  const auto set_attr = [&](std::string_view text, uint32_t attr, bool on) {
    const int32_t id = find(text);
    if (id == kTokenNull) return;
    tokens_[id].attr = on ? (tokens_[id].attr | attr) : (tokens_[id].attr & ~attr);
  };
  if (contains_any(pre_.name, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
    set_attr("<mask>", kAttrLstrip, true);
  } else if (contains_any(name, {"phi-3", "phi3"})) {
    for (int32_t id : special_tokens_) tokens_[id].attr |= kAttrRstrip;
    set_attr("</s>", kAttrRstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set_attr(t, kAttrRstrip, false);
  } else if (contains_any(name, {"modern-bert"})) {
    set_attr("[MASK]", kAttrLstrip, true);
  }
}

}  // namespace kiln::text
