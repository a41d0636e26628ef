// Conversion of small synthetic Hugging Face folders written by the test itself: Qwen2 (attention
// biases, no Q/K permutation, a BPE tokenizer.json with the qwen2 pre-tokenizer), Qwen3 (q/k
// norms), tied embeddings, and the errors for unsupported inputs. Also the SentencePiece parser
// on every truncation of the real tokenizer.model.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/converter.h"
#include "convert/hf_vocab.h"
#include "convert/sentencepiece_model.h"
#include "core/gguf.h"
#include "core/mapped_file.h"

namespace kiln::convert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

// Writes F32 tensors as a .safetensors file (header in name order, data packed).
void write_safetensors(const fs::path& p, const std::map<std::string, Tensor>& tensors) {
  json header = json::object();
  uint64_t off = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {off, off + 4 * t.values.size()}}};
    off += 4 * t.values.size();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  std::ofstream out(p, std::ios::binary);
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << h;
  for (const auto& [name, t] : tensors) out.write(reinterpret_cast<const char*>(t.values.data()), 4 * t.values.size());
}

const char* kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

class SyntheticFolder : public ::testing::Test {
 protected:
  static constexpr int64_t kEmbd = 64, kHead = 2, kHeadKv = 1, kHd = 32, kFf = 96, kVocab = 8;

  void SetUp() override {
    dir_ = fs::path(KILN_BINARY_DIR) / "convert_synthetic" / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  Tensor random(std::vector<int64_t> shape) {
    Tensor t{shape, {}};
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::normal_distribution<float> dist(0.0f, 0.02f);
    for (int64_t i = 0; i < n; ++i) t.values.push_back(dist(rng_));
    return t;
  }
  // A one-layer qwen-style checkpoint; `arch` picks Qwen2 (biases) or Qwen3 (q/k norms).
  std::map<std::string, Tensor> write_qwen(const std::string& arch, bool tied) {
    json cfg = {{"architectures", {arch}}, {"hidden_size", kEmbd}, {"num_hidden_layers", 1},
                {"num_attention_heads", kHead}, {"num_key_value_heads", kHeadKv}, {"intermediate_size", kFf},
                {"max_position_embeddings", 128}, {"vocab_size", kVocab}, {"rms_norm_eps", 1e-6},
                {"rope_theta", 1000000.0}, {"tie_word_embeddings", tied}, {"eos_token_id", 7}};
    if (arch == "Qwen3ForCausalLM") cfg["head_dim"] = kHd;
    write_text(dir_ / "config.json", cfg.dump());
    std::map<std::string, Tensor> t;
    t["model.embed_tokens.weight"] = random({kVocab, kEmbd});
    t["model.norm.weight"] = random({kEmbd});
    if (!tied) t["lm_head.weight"] = random({kVocab, kEmbd});
    const std::string p = "model.layers.0.";
    t[p + "input_layernorm.weight"] = random({kEmbd});
    t[p + "post_attention_layernorm.weight"] = random({kEmbd});
    t[p + "self_attn.q_proj.weight"] = random({kHead * kHd, kEmbd});
    t[p + "self_attn.k_proj.weight"] = random({kHeadKv * kHd, kEmbd});
    t[p + "self_attn.v_proj.weight"] = random({kHeadKv * kHd, kEmbd});
    t[p + "self_attn.o_proj.weight"] = random({kEmbd, kHead * kHd});
    if (arch == "Qwen2ForCausalLM") {
      t[p + "self_attn.q_proj.bias"] = random({kHead * kHd});
      t[p + "self_attn.k_proj.bias"] = random({kHeadKv * kHd});
      t[p + "self_attn.v_proj.bias"] = random({kHeadKv * kHd});
    } else {
      t[p + "self_attn.q_norm.weight"] = random({kHd});
      t[p + "self_attn.k_norm.weight"] = random({kHd});
    }
    t[p + "mlp.gate_proj.weight"] = random({kFf, kEmbd});
    t[p + "mlp.up_proj.weight"] = random({kFf, kEmbd});
    t[p + "mlp.down_proj.weight"] = random({kEmbd, kFf});
    t[p + "self_attn.rotary_emb.inv_freq"] = random({kHd / 2});  // dropped, as llama.cpp does
    write_safetensors(dir_ / "model.safetensors", t);
    // Byte-level BPE: 6 tokens (one unused id left as padding) and one special added token.
    json tok = {
        {"model", {{"type", "BPE"},
                   {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}, {"\xc4\xa0", 3}, {"\xc4\xa0" "ab", 4}, {"c", 5}}},
                   {"merges", json::array({"a b", json::array({"\xc4\xa0", "ab"})})}}},
        {"added_tokens", {{{"id", 7}, {"content", "<|endoftext|>"}, {"special", true}}}},
        {"pre_tokenizer", {{"type", "Sequence"},
                           {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", kQwen2Regex}}}, {"behavior", "Isolated"}},
                                              {{"type", "ByteLevel"}, {"use_regex", false}}}}}}};
    write_text(dir_ / "tokenizer.json", tok.dump());
    json tc = {{"eos_token", "<|endoftext|>"}, {"pad_token", "<|endoftext|>"}, {"bos_token", nullptr}, {"add_bos_token", false},
               {"chat_template", {{{"name", "default"}, {"template", "{{ messages }}"}}, {{"name", "tool_use"}, {"template", "T"}}}}};
    write_text(dir_ / "tokenizer_config.json", tc.dump());
    return t;
  }
  Result<std::unique_ptr<GgufFile>> convert(OutType type = OutType::F32) {
    ConvertOptions o{dir_.string(), (dir_ / "out.gguf").string(), type, false};
    auto r = convert_hf_checkpoint(o);
    if (!r.ok()) return r.error();
    return GgufFile::open(o.out_path);
  }
  std::vector<float> data(const GgufFile& f, const std::string& name) {
    const GgufTensorInfo* t = f.find_tensor(name);
    KILN_ASSERT(t && t->type == DType::F32, "test: expected an F32 tensor");
    std::vector<float> v(static_cast<size_t>(t->nelements()));
    std::memcpy(v.data(), f.tensor_data(*t).data(), 4 * v.size());
    return v;
  }

  fs::path dir_;
  std::mt19937 rng_{42};
};

TEST_F(SyntheticFolder, Qwen2WithBiasesAndBpeVocabulary) {
  auto src = write_qwen("Qwen2ForCausalLM", false);
  auto f = convert();
  ASSERT_TRUE(f.ok()) << f.error().message;
  const GgufFile& g = **f;
  EXPECT_EQ(*g.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(*g.get_u32("qwen2.attention.head_count_kv"), 1u);
  EXPECT_EQ(*g.get_f32("qwen2.rope.freq_base"), 1000000.0f);
  EXPECT_EQ(g.find("qwen2.attention.key_length"), nullptr);  // no head_dim in config.json
  EXPECT_EQ(g.find("qwen2.vocab_size"), nullptr);            // only LlamaModel writes it
  EXPECT_EQ(g.tensors().size(), 15u);                        // inv_freq dropped
  // No permutation for qwen: q/k copied as they are; biases kept as 1-D F32.
  EXPECT_EQ(data(g, "blk.0.attn_q.weight"), src["model.layers.0.self_attn.q_proj.weight"].values);
  EXPECT_EQ(data(g, "blk.0.attn_k.bias"), src["model.layers.0.self_attn.k_proj.bias"].values);
  EXPECT_EQ(g.find_tensor("blk.0.attn_q.bias")->n_dims, 1);
  // Vocabulary: gpt2 model, qwen2 pre-tokenizer, padding for the unused id 6, CONTROL for the added token.
  EXPECT_EQ(*g.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*g.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(*g.get_string_array("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"a", "b", "ab", "\xc4\xa0", "\xc4\xa0" "ab", "c", "[PAD6]", "<|endoftext|>"}));
  EXPECT_EQ(*g.get_i64_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 1, 1, 1, 1, 1, 5, 3}));
  EXPECT_EQ(*g.get_string_array("tokenizer.ggml.merges"), (std::vector<std::string>{"a b", "\xc4\xa0 ab"}));
  EXPECT_EQ(g.find("tokenizer.ggml.scores"), nullptr);
  EXPECT_EQ(*g.get_u32("tokenizer.ggml.eos_token_id"), 7u);
  EXPECT_EQ(*g.get_u32("tokenizer.ggml.padding_token_id"), 7u);
  EXPECT_EQ(g.find("tokenizer.ggml.bos_token_id"), nullptr);
  EXPECT_FALSE(*g.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(*g.get_string("tokenizer.chat_template"), "{{ messages }}");
  EXPECT_EQ(*g.get_string("tokenizer.chat_template.tool_use"), "T");
}

TEST_F(SyntheticFolder, Qwen3NormsAndTiedEmbeddings) {
  auto src = write_qwen("Qwen3ForCausalLM", true);
  auto f = convert(OutType::Q8_0);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const GgufFile& g = **f;
  EXPECT_EQ(*g.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(*g.get_u32("qwen3.attention.key_length"), 32u);
  EXPECT_EQ(g.find_tensor("output.weight"), nullptr);  // tied: llama.cpp reuses token_embd
  EXPECT_EQ(data(g, "blk.0.attn_q_norm.weight"), src["model.layers.0.self_attn.q_norm.weight"].values);
  EXPECT_EQ(g.find_tensor("blk.0.attn_k_norm.weight")->type, DType::F32);
  EXPECT_EQ(g.find_tensor("blk.0.ffn_down.weight")->type, DType::Q8_0);
}

TEST_F(SyntheticFolder, RefusesWhatItCannotConvert) {
  write_qwen("Qwen2ForCausalLM", false);
  json cfg = json::parse(std::ifstream(dir_ / "config.json"));
  cfg["architectures"] = {"GPTNeoXForCausalLM"};
  write_text(dir_ / "config.json", cfg.dump());
  auto f = convert();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("architecture 'GPTNeoXForCausalLM' is not supported"), std::string::npos);

  write_qwen("Qwen2ForCausalLM", false);
  cfg = json::parse(std::ifstream(dir_ / "config.json"));
  cfg["num_hidden_layers"] = 0;
  write_text(dir_ / "config.json", cfg.dump());
  f = convert();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("'num_hidden_layers' = 0 is not a positive integer"), std::string::npos) << f.error().message;

  // A field of the wrong JSON type is an Error, not an exception.
  write_qwen("Qwen2ForCausalLM", false);
  cfg = json::parse(std::ifstream(dir_ / "config.json"));
  cfg["tie_word_embeddings"] = "yes";
  write_text(dir_ / "config.json", cfg.dump());
  f = convert();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("unexpected JSON value"), std::string::npos) << f.error().message;
  write_qwen("Qwen2ForCausalLM", false);
  write_text(dir_ / "tokenizer_config.json", R"({"add_bos_token": false, "eos_token": 5})");
  write_text(dir_ / "tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "added_tokens": [{"id": 1, "content": "x", "special": "yes"}],
                                         "pre_tokenizer": {"type": "ByteLevel"}})");
  f = convert();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("unexpected JSON value"), std::string::npos) << f.error().message;

  // A checkpoint tensor with no GGUF name is named in the error.
  write_qwen("Qwen2ForCausalLM", false);
  write_safetensors(dir_ / "model.safetensors", {{"model.embed_tokens.weight", random({kVocab, kEmbd})},
                                                 {"model.layers.0.mystery.weight", random({4})}});
  f = convert();
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error().message.find("tensor 'model.layers.0.mystery.weight' has no GGUF name"), std::string::npos)
      << f.error().message;
}

TEST(BpePreTokenizer, KnowsGpt2Llama3AndQwen2) {
  EXPECT_EQ(*bpe_pre_name(json{{"type", "ByteLevel"}, {"add_prefix_space", false}}), "gpt-2");
  auto seq = [](const std::string& regex) {
    return json{{"type", "Sequence"},
                {"pretokenizers", {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}}, {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  };
  EXPECT_EQ(*bpe_pre_name(seq(kQwen2Regex)), "qwen2");
  EXPECT_EQ(*bpe_pre_name(seq(
                R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re")),
            "llama-bpe");
  auto bad = bpe_pre_name(seq(R"re(\p{L}+|\s+)re"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("is not one kiln recognises"), std::string::npos);
  EXPECT_FALSE(bpe_pre_name(json{{"type", "Metaspace"}}).ok());
}

// Every prefix of the real tokenizer.model parses or fails cleanly (under ASan: no overread);
// the whole file yields the pieces SentencePiece wrote.
TEST(SentencePieceModel, ParsesTheTrainedModelAndSurvivesTruncation) {
  auto mapped = MappedFile::open(std::string(KILN_SOURCE_DIR) + "/models/kjv-llama/tokenizer.model");
  ASSERT_TRUE(mapped.ok()) << mapped.error().message;
  const auto bytes = (*mapped)->bytes();
  auto m = parse_spm_model(bytes, "tokenizer.model");
  ASSERT_TRUE(m.ok()) << m.error().message;
  const json cfg = json::parse(std::ifstream(std::string(KILN_SOURCE_DIR) + "/models/kjv-llama/config.json"));
  EXPECT_EQ(m->pieces.size(), cfg["vocab_size"].get<size_t>());
  EXPECT_EQ(m->model_type, 2);  // BPE
  EXPECT_TRUE(m->byte_fallback);
  EXPECT_EQ(m->normalizer_name, "identity");
  EXPECT_TRUE(m->add_dummy_prefix);
  EXPECT_FALSE(m->remove_extra_whitespaces);
  EXPECT_EQ(m->pieces[0].type, SpmPieceType::Unknown);
  EXPECT_EQ(m->pieces[1].type, SpmPieceType::Control);
  EXPECT_EQ(m->pieces[3].piece, "<0x00>");
  EXPECT_EQ(m->pieces[3].type, SpmPieceType::Byte);
  size_t failures = 0;
  const size_t step = bytes.size() / 257 + 1;  // every byte of the header region, then ~257 cuts
  for (size_t n = 0; n < bytes.size(); n += (n < 512 ? 1 : step)) failures += !parse_spm_model(bytes.subspan(0, n), "prefix").ok();
  EXPECT_GT(failures, 0u);
}

}  // namespace
}  // namespace kiln::convert
