// Loading vocabularies from hand-made GGUF files: validation errors that name the key and the
// numbers, llama.cpp's defaults when keys are absent, and the no_vocab case.
#include <gtest/gtest.h>

#include <functional>

#include "test_util.h"

namespace kiln::text {
namespace {

// Writes a GGUF with only the metadata `fill` sets and opens it.
std::unique_ptr<GgufFile> make_gguf(const std::string& name, const std::function<void(GgufWriter&)>& fill) {
  const std::string path = std::string(KILN_BINARY_DIR) + "/text_vocab_" + name + ".gguf";
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  fill(w);
  auto st = w.begin(path);
  KILN_ASSERT(st.ok(), st.ok() ? "" : st.error().message);
  auto fin = w.finish();
  KILN_ASSERT(fin.ok(), fin.ok() ? "" : fin.error().message);
  auto file = GgufFile::open(path);
  KILN_ASSERT(file.ok(), file.ok() ? "" : file.error().message);
  return std::move(file).value();
}

// A tiny SPM vocabulary: control tokens, byte tokens for 'a'..'c' and a few pieces.
void spm_vocab(GgufWriter& w) {
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_string_array("tokenizer.ggml.tokens",
                     {"<unk>", "<s>", "</s>", "<0x61>", "<0x62>", "<0x63>", "\xE2\x96\x81",
                      "\xE2\x96\x81"
                      "a",
                      "ab", "b",
                      "\xE2\x96\x81"
                      "ab"});
  w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, 0, 0, 0, -1, -2, -3, -4, -1});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1});
}

std::string load_error(const std::string& name, const std::function<void(GgufWriter&)>& fill) {
  auto file = make_gguf(name, fill);
  auto tok = Tokenizer::from_gguf(*file);
  return tok.ok() ? std::string("(loaded)") : tok.error().message;
}

TEST(VocabLoad, TinySpmVocabulary) {
  auto file = make_gguf("spm", spm_vocab);
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->vocab().type(), VocabType::kSpm);
  EXPECT_TRUE(tok->add_bos());  // SPM default when the key is absent
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_EQ(tok->unk(), 0);
  // "▁ab" wins by score; "c" has no piece and falls back to its byte token
  EXPECT_EQ(tok->tokenize("ab", true, false), (std::vector<int32_t>{1, 10}));
  EXPECT_EQ(tok->tokenize("abc", false, false), (std::vector<int32_t>{10, 5}));
  // "d" has neither a piece nor a byte token: UNK
  EXPECT_EQ(tok->tokenize("d", false, false), (std::vector<int32_t>{6, 0}));
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{10, 5}, false, false), "abc");
  // llama.cpp keeps the leading space when it removes a BOS
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{1, 10, 5}, true, false), " abc");
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{1, 10, 5}, false, true), "<s> abc");
  EXPECT_EQ(*tok->token_to_piece(1, false), "");
  EXPECT_EQ(*tok->token_to_piece(1, true), "<s>");
  EXPECT_EQ(*tok->token_to_piece(4, false), "b");  // byte token
  // parse_special decides whether "<s>" in text is BOS
  EXPECT_EQ(tok->tokenize("<s>", false, true), (std::vector<int32_t>{1}));
  EXPECT_NE(tok->tokenize("<s>", false, false), (std::vector<int32_t>{1}));
}

TEST(VocabLoad, BadIdsAreErrors) {
  auto file = make_gguf("spm_ids", spm_vocab);
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  auto piece = tok->token_to_piece(11, true);
  ASSERT_FALSE(piece.ok());
  EXPECT_EQ(piece.error().message, "tokenizer: token id 11 out of range [0, 11)");
  auto text = tok->detokenize(std::vector<int32_t>{1, -3}, false, false);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().message, "tokenizer: token id -3 at position 1 out of range [0, 11)");
}

TEST(VocabLoad, ValidationErrorsNameTheProblem) {
  EXPECT_EQ(load_error("no_model", [](GgufWriter&) {}), "vocab: key 'tokenizer.ggml.model' is missing");
  EXPECT_EQ(
      load_error("rwkv", [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "rwkv"); }),
      "vocab: unsupported tokenizer model 'rwkv' (tokenizer.ggml.model; kiln reads llama, gpt2, gemma4, "
      "bert and t5)");
  EXPECT_EQ(load_error("no_tokens", [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "llama"); }),
            "vocab: key 'tokenizer.ggml.tokens' is missing");
  EXPECT_EQ(load_error("short_scores",
                       [](GgufWriter& w) {
                         spm_vocab(w);
                         w.set_f32_array("tokenizer.ggml.scores", {0, 0});
                       }),
            "vocab: tokenizer.ggml.scores has 2 entries for 11 tokens");
  EXPECT_EQ(load_error("types_f32",
                       [](GgufWriter& w) {
                         spm_vocab(w);
                         w.set_f32_array("tokenizer.ggml.token_type", std::vector<float>(11, 1.0f));
                       }),
            "vocab: key 'tokenizer.ggml.token_type' has type array of f32, expected array of i32");
  EXPECT_EQ(load_error("duplicate",
                       [](GgufWriter& w) {
                         w.set_string("tokenizer.ggml.model", "llama");
                         w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "x", "x"});
                       }),
            "vocab: duplicate token 'x' has ids 2 and 3");
  EXPECT_EQ(load_error("no_merges",
                       [](GgufWriter& w) {
                         w.set_string("tokenizer.ggml.model", "gpt2");
                         w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
                       }),
            "vocab: BPE vocabulary without 'tokenizer.ggml.merges'");
  // SPM adds BOS by default; a vocabulary too small for the default id 1 cannot
  EXPECT_EQ(load_error("no_bos",
                       [](GgufWriter& w) {
                         w.set_string("tokenizer.ggml.model", "llama");
                         w.set_string_array("tokenizer.ggml.tokens", {"<unk>"});
                       }),
            "vocab: add_bos_token is true, but bos_token_id is not set");
  EXPECT_EQ(load_error("bad_pre",
                       [](GgufWriter& w) {
                         w.set_string("tokenizer.ggml.model", "gpt2");
                         w.set_string("tokenizer.ggml.pre", "mystery");
                         w.set_string_array("tokenizer.ggml.tokens", {"a", "b"});
                         w.set_string_array("tokenizer.ggml.merges", {"a b"});
                       }),
            "vocab: unknown pre-tokenizer type 'mystery' (tokenizer.ggml.pre)");
  EXPECT_EQ(load_error("add_bos_type",
                       [](GgufWriter& w) {
                         spm_vocab(w);
                         w.set_u32("tokenizer.ggml.add_bos_token", 1);
                       }),
            "vocab: key 'tokenizer.ggml.add_bos_token' has type u32, expected bool");
}

TEST(VocabLoad, BpeDefaultsAndFileOverrides) {
  const auto bpe = [](GgufWriter& w) {
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "<|endoftext|>", "<|im_end|>", "Ċ"});
    w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 3, 3, 1});
    w.set_string_array("tokenizer.ggml.merges", {"a b"});
  };
  auto file = make_gguf("bpe", bpe);
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_FALSE(tok->add_bos());       // BPE "default" pre-tokenizer: no BOS
  EXPECT_EQ(tok->bos(), kTokenNull);  // llama.cpp's default id 11 is past this vocabulary
  EXPECT_EQ(tok->eot(), 4);           // found by its text, earliest text of llama.cpp's list first
  EXPECT_TRUE(tok->is_eog(3));
  EXPECT_TRUE(tok->is_eog(4));
  EXPECT_EQ(tok->nl(), 5);
  EXPECT_EQ(tok->tokenize("ab\n", true, false), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(tok->tokenize("ab<|im_end|>", false, true), (std::vector<int32_t>{2, 4}));

  auto llama3 = Tokenizer::from_gguf(*file, {.pre = "llama-bpe"});
  EXPECT_FALSE(llama3.ok());  // llama3 adds BOS by default, and this vocabulary has none
  auto file2 = make_gguf("bpe_bos", [&](GgufWriter& w) {
    bpe(w);
    w.set_string("tokenizer.ggml.pre", "llama-bpe");
    w.set_u32("tokenizer.ggml.bos_token_id", 3);
    w.set_u32("tokenizer.ggml.eos_token_id", 99);  // out of range: llama.cpp keeps the default
  });
  auto tok2 = Tokenizer::from_gguf(*file2);
  ASSERT_TRUE(tok2.ok()) << tok2.error().message;
  EXPECT_TRUE(tok2->add_bos());
  EXPECT_EQ(tok2->bos(), 3);
  EXPECT_EQ(tok2->eos(), kTokenNull);
  EXPECT_EQ(tok2->tokenize("ab", true, false), (std::vector<int32_t>{3, 2}));
}

// A tiny UGM vocabulary: ids 0 <pad>, 1 </s>, 2 <unk>, 3 "▁", 4 "▁a", 5 "▁ab", 6 "b", 7 "c",
// 8 user-defined "<x>".
void ugm_vocab(GgufWriter& w) {
  w.set_string("tokenizer.ggml.model", "t5");
  w.set_string_array("tokenizer.ggml.tokens", {"<pad>", "</s>", "<unk>", "\xE2\x96\x81",
                                               "\xE2\x96\x81"
                                               "a",
                                               "\xE2\x96\x81"
                                               "ab",
                                               "b", "c", "<x>"});
  w.set_f32_array("tokenizer.ggml.scores", {0, 0, 0, -2, -1, -5, -1, -3, 0});
  w.set_i32_array("tokenizer.ggml.token_type", {3, 3, 2, 1, 1, 1, 1, 1, 4});
  w.set_bool("tokenizer.ggml.add_space_prefix", true);
  w.set_bool("tokenizer.ggml.remove_extra_whitespaces", true);
}

GgufValue u8_array(const std::vector<uint8_t>& bytes) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = GgufType::U8;
  for (uint8_t b : bytes) {
    GgufValue e;
    e.type = GgufType::U8;
    e.num.u = b;
    v.arr.push_back(e);
  }
  return v;
}

TEST(VocabLoad, TinyUgmVocabulary) {
  auto file = make_gguf("ugm", ugm_vocab);
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->vocab().type(), VocabType::kUgm);
  EXPECT_FALSE(tok->add_bos());  // T5 defaults: no BOS, EOS 1 appended, unknown 2, padding 0
  EXPECT_TRUE(tok->add_eos());
  EXPECT_EQ(tok->bos(), kTokenNull);
  EXPECT_EQ(tok->eos(), 1);
  EXPECT_EQ(tok->unk(), 2);
  EXPECT_EQ(tok->pad(), 0);
  // the best sum of scores: "▁a" + "b" (-2) beats "▁ab" (-5)
  EXPECT_EQ(tok->tokenize("ab", true, false), (std::vector<int32_t>{4, 6, 1}));
  // runs of spaces merge into the one before each word, leading and trailing ones go
  EXPECT_EQ(tok->tokenize("  a   b  ", false, false), (std::vector<int32_t>{4, 3, 6}));
  // codepoints no token covers are the unknown token, a run of them one unknown token
  EXPECT_EQ(tok->tokenize("dd c", false, false), (std::vector<int32_t>{3, 2, 3, 7}));
  // user-defined tokens are cut out first; each text fragment gets its own space prefix
  EXPECT_EQ(tok->tokenize("a<x>b", false, false), (std::vector<int32_t>{4, 8, 3, 6}));
  // the space prefix is dropped again; "▁" is a space
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{4, 3, 6}, false, false), "a b");
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{4, 6, 1}, true, false), "ab");
  // "\n" is no space without a charsmap that says so: "▁" then the unknown newline
  EXPECT_EQ(tok->nl(), 3);
}

TEST(VocabLoad, UgmErrorsNameTheProblem) {
  EXPECT_EQ(load_error("ugm_small_map",
                       [](GgufWriter& w) {
                         ugm_vocab(w);
                         w.set("tokenizer.ggml.precompiled_charsmap", u8_array({1, 0}));
                       }),
            "vocab: tokenizer.ggml.precompiled_charsmap has 2 bytes, fewer than its 4-byte header");
  EXPECT_EQ(load_error("ugm_big_blob",
                       [](GgufWriter& w) {
                         ugm_vocab(w);
                         w.set("tokenizer.ggml.precompiled_charsmap", u8_array({8, 0, 0, 0, 1, 2, 3, 4}));
                       }),
            "vocab: tokenizer.ggml.precompiled_charsmap: its 8-byte XCDA blob does not fit in its 8 bytes");
  EXPECT_EQ(
      load_error("ugm_map_type",
                 [](GgufWriter& w) {
                   ugm_vocab(w);
                   w.set_i32_array("tokenizer.ggml.precompiled_charsmap", {1, 2, 3, 4, 5});
                 }),
      "vocab: key 'tokenizer.ggml.precompiled_charsmap' has type array of i32, expected array of u8 or i8");
  EXPECT_EQ(load_error("ugm_no_unk",
                       [](GgufWriter& w) {
                         w.set_string("tokenizer.ggml.model", "t5");
                         w.set_string_array("tokenizer.ggml.tokens", {"<pad>", "</s>"});
                       }),
            "vocab: UGM vocabulary without an unknown token (tokenizer.ggml.unknown_token_id)");
}

// Gemma 4's tokenizer model: BPE on raw UTF-8 with spaces as "▁", <0xXX> byte fallback, whole
// newline runs, and BOS always added.
TEST(VocabLoad, Gemma4StyleBpe) {
  auto file = make_gguf("gemma4", [](GgufWriter& w) {
    w.set_string("tokenizer.ggml.model", "gemma4");
    w.set_string("tokenizer.ggml.pre", "default");  // ignored: the model selects "gemma4"
    w.set_string_array("tokenizer.ggml.tokens",
                       {"<pad>", "<eos>", "<bos>", "<0x0A>", "<0x7A>", "a", "b", "\xE2\x96\x81",
                        "\xE2\x96\x81"
                        "b",
                        "ab", "\n\n", "\n"});
    w.set_i32_array("tokenizer.ggml.token_type", {3, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1});
    w.set_string_array("tokenizer.ggml.merges", {"a b", "\xE2\x96\x81 b"});
    w.set_u32("tokenizer.ggml.bos_token_id", 2);
    w.set_u32("tokenizer.ggml.eos_token_id", 1);
    w.set_bool("tokenizer.ggml.add_bos_token", false);  // overridden, as llama.cpp does
  });
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->vocab().type(), VocabType::kBpe);
  EXPECT_EQ(tok->vocab().pre().name, "gemma4");
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->tokenize("ab b", true, false), (std::vector<int32_t>{2, 9, 8}));
  // "z" has no token but a byte token; "\n\n" is a token, "\n\n\n" is not and merges no further
  EXPECT_EQ(tok->tokenize("az", false, false), (std::vector<int32_t>{5, 4}));
  EXPECT_EQ(tok->tokenize("\n\n", false, false), (std::vector<int32_t>{10}));
  EXPECT_EQ(tok->tokenize("\n\n\n", false, false), (std::vector<int32_t>{11, 11, 11}));
  EXPECT_EQ(*tok->detokenize(std::vector<int32_t>{2, 9, 8, 4}, true, false), "ab bz");
  EXPECT_EQ(tok->nl(), 11);
}

TEST(VocabLoad, NoVocab) {
  auto file = make_gguf("none", [](GgufWriter& w) { w.set_string("tokenizer.ggml.model", "no_vocab"); });
  auto tok = Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->vocab().type(), VocabType::kNone);
  EXPECT_EQ(tok->n_tokens(), 0);
  EXPECT_TRUE(tok->tokenize("hello", true, true).empty());
  EXPECT_EQ(*tok->detokenize({}, false, false), "");
}

}  // namespace
}  // namespace kiln::text
