#include "text/pretokenizer.h"

#include <algorithm>
#include <initializer_list>

#include "text/unicode.h"

namespace kiln::text {

namespace {

// ref: llama.cpp src/llama-vocab.cpp (llm_tokenizer_bpe): the patterns exactly as llama.cpp passes
// them to unicode_regex_split, including its adaptations of the tokenizer.json originals.
const char* const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// llama.cpp's own spelling of the Llama-3 pattern, also routed to the custom splitter.
const char* const kLlama3Original =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen35 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kBloom = " ?[^(\\s|.,!?…。，、।۔،)]+";
const char* const kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])"
    "([^a-z]))+(("
    "?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'"
    "[mM]|'[lL]["
    "lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]"
    "|'[vV][eE]"
    "|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kDeepseek3Words =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
const char* const kBailing =
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+";
const char* const kSeedCoder =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| "
    "?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kTinyAyaWords =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|"
    "'[rR][eE]|'["
    "vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{"
    "Lm}\\p{Lo}\\p{"
    "M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]"
    "+|\\s+(?!\\S)|\\s+";
const char* const kExaoneMoe =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: "
    "\\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+";
const char* const kJais2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!"
    "\\S)|\\s{32}(?!"
    "\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}";
const char* const kMinicpm5 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

struct Entry {
  std::initializer_list<const char*> names;
  std::initializer_list<const char*> regexes;
  bool clean_spaces = true;
  bool ignore_merges = false;
  bool add_bos = false;
  bool no_bos = false;
  bool force_bos = false;
  bool escape_whitespaces = false;
  bool byte_encode = true;
  bool whole_newline_runs = false;
};

// ref: llama.cpp llama_vocab::impl::load (tokenizer_pre -> pre_type and flags).
const Entry kEntries[] = {
    {{"default"}, {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
     {kLlama3},
     true,
     true,
     true},
    {{"dbrx", "smaug-bpe"}, {kLlama3}},
    {{"glm4", "chatglm-bpe"}, {kLlama3}, true, false, false, true},
    {{"jais-2"}, {kJais2}},
    {{"deepseek-llm"},
     {"[\r\n]",
      "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-"
      "ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-"
      "ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]"
      "+",
      "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", "[一-龥ࠀ-一가-퟿]+", "\\p{N}+"},
     false},
    {{"deepseek-coder"},
     {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"},
     false},
    {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
     {"\\p{N}{1,3}", "[一-龥぀-ゟ゠-ヿ]+", kDeepseek3Words},
     false},
    {{"falcon"}, {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"}},
    {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"}, {"\\p{N}", kGpt2}},
    {{"command-r", "smollm"}, {"\\p{N}", kGpt2}, false},
    {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
      "modern-bert", "exaone4", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais"},
     {kGpt2}},
    {{"trillion", "granite-docling"}, {kGpt2}, false},
    {{"stablelm2", "megrez"}, {kQwen2}},
    {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2"}, {kQwen2}, false},
    {{"qwen35"}, {kQwen35}, false},
    {{"poro-chat"}, {kBloom}, false},
    {{"bloom", "gpt3-finnish"}, {kBloom}},
    {{"viking"}, {kBloom, "\\p{N}"}, false},
    {{"tekken"}, {kTekken}, false, true, true},
    {{"chameleon"},
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", kGpt2},
     false,
     false,
     true},
    {{"gpt-4o", "llama4", "minimax-m2", "kanana2"}, {kGpt4o}, false},
    {{"tiny_aya", "cohere2moe"}, {"\\d{1,3}(?=(?:\\d{3})*\\b)", kTinyAyaWords}, false},
    {{"superbpe"}, {"\\p{N}+", "(?=(\\d{3})+(?!\\d))"}, false},
    {{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailing}, false},
    {{"seed-coder"}, {kSeedCoder}, false},
    {{"exaone-moe"}, {kExaoneMoe}},
    {{"minicpm5"}, {"\\p{N}{1,3}", kMinicpm5}, true, true},
    // SentencePiece-style BPE over whole lines (tokenizer.ggml.model "gemma4" selects "gemma4")
    {.names = {"gemma4", "granite-embed-multi-311m"},
     .regexes = {"[^\\n]+|[\\n]+"},
     .add_bos = true,
     .force_bos = true,
     .escape_whitespaces = true,
     .byte_encode = false,
     .whole_newline_runs = true},
    {.names = {"sarvam-moe"},
     .regexes = {"[^\\n]+|[\\n]+"},
     .clean_spaces = false,
     .escape_whitespaces = true,
     .byte_encode = false},
};

// ref: llama.cpp unicode_regex_split_custom_gpt2 and _llama3. Both walk one fragment of codepoints
// [ini, end) and append the lengths of the words they cut.
class CustomSplitter {
 public:
  CustomSplitter(const std::vector<uint32_t>& cpts, size_t ini, size_t end, std::vector<size_t>& out)
      : cpts_(cpts), ini_(ini), end_(end), prev_end_(ini), out_(out) {}

  static constexpr uint32_t kOutOfRange = 0xFFFFFFFF;

  uint32_t cpt(size_t pos) const { return pos >= ini_ && pos < end_ ? cpts_[pos] : kOutOfRange; }
  CodepointFlags flags(size_t pos) const {
    return pos >= ini_ && pos < end_ ? codepoint_flags(cpts_[pos]) : CodepointFlags{};
  }
  size_t add(size_t end) {
    const size_t len = end - prev_end_;
    if (len > 0) out_.push_back(len);
    prev_end_ = end;
    return len;
  }

  // 's|'t|'re|'ve|'m|'ll|'d (case-folded when `fold`): the contraction's length, or 0.
  size_t contraction(size_t pos, bool fold) const {
    if (cpt(pos) != '\'' || pos + 1 >= end_) return 0;
    const auto low = [&](uint32_t c) { return fold ? to_lower(c) : c; };
    const uint32_t c1 = low(cpt(pos + 1));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (pos + 2 >= end_) return 0;
    const uint32_t c2 = low(cpt(pos + 2));
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
  }

  static bool is_word_sep(CodepointFlags f) {
    return !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.bits != 0;
  }

  void gpt2() {
    for (size_t pos = ini_; pos < end_;) {
      const uint32_t c = cpt(pos);
      const CodepointFlags f = flags(pos);
      if (size_t n = contraction(pos, false)) {
        pos += add(pos + n);
        continue;
      }
      CodepointFlags f2 = c == ' ' ? flags(pos + 1) : f;
      if (f2.is_letter()) {  // <space>?\p{L}+
        pos += (c == ' ');
        while (f2.is_letter()) f2 = flags(++pos);
        add(pos);
        continue;
      }
      if (f2.is_number()) {  // <space>?\p{N}+
        pos += (c == ' ');
        while (f2.is_number()) f2 = flags(++pos);
        add(pos);
        continue;
      }
      if (is_word_sep(f2)) {  // <space>?[^\s\p{L}\p{N}]+
        pos += (c == ' ');
        while (is_word_sep(f2)) f2 = flags(++pos);
        add(pos);
        continue;
      }
      size_t n_ws = 0;
      while (flags(pos + n_ws).is_whitespace()) ++n_ws;
      if (n_ws > 1 && cpt(pos + n_ws) != kOutOfRange) {  // \s+(?!\S)
        pos += n_ws - 1;
        add(pos);
        continue;
      }
      if (n_ws > 0) {  // \s+
        pos += n_ws;
        add(pos);
        continue;
      }
      add(++pos);  // no match
    }
  }

  void llama3() {
    for (size_t pos = ini_; pos < end_;) {
      const uint32_t c = cpt(pos);
      const CodepointFlags f = flags(pos);
      if (size_t n = contraction(pos, true)) {
        pos += add(pos + n);
        continue;
      }
      // [^\r\n\p{L}\p{N}]?\p{L}+
      if (!(c == '\r' || c == '\n' || f.is_number())) {
        if (f.is_letter() || flags(pos + 1).is_letter()) {
          ++pos;
          while (flags(pos).is_letter()) ++pos;
          add(pos);
          continue;
        }
      }
      if (f.is_number()) {  // \p{N}{1,3}
        size_t ini = pos;
        while (flags(pos).is_number()) {
          if (++pos - ini >= 3) {
            add(pos);
            ini = pos;
          }
        }
        add(pos);
        continue;
      }
      // <space>?[^\s\p{L}\p{N}]+[\r\n]*  (llama.cpp tests the first codepoint's flags for != 0)
      CodepointFlags f2 = c == ' ' ? flags(pos + 1) : f;
      if (!(f2.is_whitespace() || f2.is_letter() || f2.is_number()) && f.bits != 0) {
        pos += (c == ' ');
        while (is_word_sep(f2)) f2 = flags(++pos);
        uint32_t c2 = cpt(pos);
        while (c2 == '\r' || c2 == '\n') c2 = cpt(++pos);
        add(pos);
        continue;
      }
      size_t n_ws = 0;
      size_t last_end_r_or_n = 0;
      while (flags(pos + n_ws).is_whitespace()) {
        const uint32_t c2 = cpt(pos + n_ws);
        if (c2 == '\r' || c2 == '\n') last_end_r_or_n = pos + n_ws + 1;
        ++n_ws;
      }
      if (last_end_r_or_n > 0) {  // \s*[\r\n]+
        pos = last_end_r_or_n;
        add(pos);
        continue;
      }
      if (n_ws > 1 && cpt(pos + n_ws) != kOutOfRange) {  // \s+(?!\S)
        pos += n_ws - 1;
        add(pos);
        continue;
      }
      if (n_ws > 0) {  // \s+
        pos += n_ws;
        add(pos);
        continue;
      }
      add(++pos);  // no match
    }
  }

 private:
  const std::vector<uint32_t>& cpts_;
  size_t ini_, end_, prev_end_;
  std::vector<size_t>& out_;
};

// The symbol stream llama.cpp matches a pattern against: for \p{..} patterns the "collapsed"
// text (non-ASCII codepoints replaced by one symbol per category), otherwise the codepoints with
// non-ASCII whitespace replaced by \v (ref: llama.cpp unicode_regex_split).
std::vector<uint32_t> regex_symbols(const std::vector<uint32_t>& cpts, bool collapsed) {
  std::vector<uint32_t> out(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i) {
    const uint32_t c = cpts[i];
    if (c < 128) {
      out[i] = c;
      continue;
    }
    const CodepointFlags f = codepoint_flags(c);
    if (f.is_whitespace()) {
      out[i] = kCollapsedWhitespace;
    } else if (!collapsed) {
      out[i] = c;
    } else {
      switch (f.category()) {
        case CodepointFlags::kNumber:
          out[i] = kCollapsedNumber;
          break;
        case CodepointFlags::kLetter:
          out[i] = kCollapsedLetter;
          break;
        case CodepointFlags::kPunctuation:
          out[i] = kCollapsedPunctuation;
          break;
        case CodepointFlags::kAccentMark:
          out[i] = kCollapsedAccentMark;
          break;
        case CodepointFlags::kSymbol:
          out[i] = kCollapsedSymbol;
          break;
        default:
          out[i] = kCollapsedOther;
          break;
      }
    }
  }
  return out;
}

// Splits each fragment like std::regex_iterator: matches become words, and so do the gaps between.
void regex_split(const Regex& re, const std::vector<uint32_t>& symbols, const std::vector<size_t>& offsets,
                 std::vector<size_t>& out) {
  size_t start = 0;
  for (size_t len : offsets) {
    std::span<const uint32_t> frag(symbols.data() + start, len);
    size_t prev = 0;
    size_t from = 0;
    bool after_empty = false;
    while (from <= len) {
      auto m = re.search(frag, from, after_empty);
      if (!m) break;
      if (m->begin > prev) out.push_back(m->begin - prev);
      if (m->end > m->begin) out.push_back(m->end - m->begin);
      prev = m->end;
      after_empty = m->end == m->begin;
      from = m->end;
      if (after_empty && from == len) break;
    }
    if (prev < len) out.push_back(len - prev);
    start += len;
  }
}

}  // namespace

Result<PreTokenizerConfig> pre_tokenizer_config(std::string_view pre) {
  const std::string_view name = pre.empty() ? std::string_view("default") : pre;
  for (const Entry& e : kEntries) {
    if (std::find(e.names.begin(), e.names.end(), name) == e.names.end()) continue;
    PreTokenizerConfig c;
    c.name = std::string(name);
    c.regexes.assign(e.regexes.begin(), e.regexes.end());
    c.clean_spaces = e.clean_spaces;
    c.ignore_merges = e.ignore_merges;
    c.add_bos = e.add_bos;
    c.force_bos = e.force_bos;
    c.no_bos = e.no_bos;
    c.escape_whitespaces = e.escape_whitespaces;
    c.byte_encode = e.byte_encode;
    c.whole_newline_runs = e.whole_newline_runs;
    return c;
  }
  return make_error("vocab: unknown pre-tokenizer type '", name, "' (tokenizer.ggml.pre)");
}

Result<PreTokenizer> PreTokenizer::create(const std::vector<std::string>& regexes) {
  PreTokenizer p;
  for (const std::string& expr : regexes) {
    Step step;
    if (expr == kGpt2) {
      step.kind = Kind::kGpt2;
    } else if (expr == kLlama3 || expr == kLlama3Original) {
      step.kind = Kind::kLlama3;
    } else {
      KILN_ASSIGN_OR_RETURN(step.regex, Regex::compile(expr));
    }
    p.steps_.push_back(std::move(step));
  }
  return p;
}

std::vector<size_t> PreTokenizer::split_lengths(const std::vector<uint32_t>& cpts) const {
  std::vector<size_t> offsets{cpts.size()};
  std::vector<uint32_t> collapsed, plain;  // built on first use
  for (const Step& step : steps_) {
    std::vector<size_t> next;
    next.reserve(offsets.size());
    if (step.kind == Kind::kRegex) {
      const bool use_collapsed = step.regex.uses_categories();
      std::vector<uint32_t>& symbols = use_collapsed ? collapsed : plain;
      if (symbols.size() != cpts.size()) symbols = regex_symbols(cpts, use_collapsed);
      regex_split(step.regex, symbols, offsets, next);
    } else {
      size_t start = 0;
      for (size_t len : offsets) {
        CustomSplitter s(cpts, start, start + len, next);
        if (step.kind == Kind::kGpt2) {
          s.gpt2();
        } else {
          s.llama3();
        }
        start += len;
      }
    }
    offsets = std::move(next);
  }
  return offsets;
}

std::vector<std::string> PreTokenizer::split(std::string_view text, bool byte_encode) const {
  const std::vector<uint32_t> cpts = decode_utf8(text);
  const std::vector<size_t> lengths = split_lengths(cpts);
  std::vector<std::string> words;
  words.reserve(lengths.size());
  size_t start = 0;
  std::string utf8;
  for (size_t len : lengths) {
    utf8.clear();
    for (size_t i = start; i < start + len; ++i) append_utf8(cpts[i], utf8);
    start += len;
    if (!byte_encode) {
      words.push_back(utf8);
      continue;
    }
    std::string encoded;
    encoded.reserve(utf8.size() * 2);
    for (char ch : utf8) encoded += byte_to_utf8(static_cast<uint8_t>(ch));
    words.push_back(std::move(encoded));
  }
  return words;
}

}  // namespace kiln::text
