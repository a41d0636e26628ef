// `kiln convert` on the project's trained checkpoint (models/kjv-llama, written by
// tools/train/train.py): metadata and tensor names/shapes as llama.cpp's converter writes them,
// the Q/K row permutation checked against the safetensors data, every output type, the committed
// Q8_0 default model reproduced byte for byte, and llama.cpp's own run of the converted file
// (tests/convert/data/kjv_llama_f32.oracle.json, from make_oracle_ref.sh) against the PyTorch
// model's tokens and logits (tests/convert/data/kjv_llama_ref.json).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/converter.h"
#include "core/json_file.h"
#include "core/safetensors.h"
#include "core/gguf.h"
#include "core/half.h"
#include "ops/quant/quant.h"

namespace kiln::convert {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kModelDir = fs::path(KILN_SOURCE_DIR) / "models" / "kjv-llama";
const fs::path kDataDir = fs::path(KILN_SOURCE_DIR) / "tests" / "convert" / "data";

json load_json(const fs::path& p) {
  auto r = read_json_file(p.string());
  KILN_ASSERT(r.ok(), "test: cannot read a JSON fixture");
  return *r;
}

class KjvConvert : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // One folder per process: ctest runs the tests of this suite as parallel processes, and one
    // must not rewrite a file another has mapped.
    out_dir_ = fs::path(KILN_BINARY_DIR) / ("convert_test_out." + std::to_string(getpid()));
    fs::create_directories(out_dir_);
    for (const char* t : {"f32", "f16", "bf16", "q8_0"}) {
      ConvertOptions o;
      o.hf_dir = kModelDir.string();
      o.out_path = (out_dir_ / (std::string("kjv-") + t + ".gguf")).string();
      o.out_type = *parse_out_type(t);
      auto r = convert_hf_checkpoint(o);
      ASSERT_TRUE(r.ok()) << r.error().message;
      auto f = GgufFile::open(o.out_path);
      ASSERT_TRUE(f.ok()) << f.error().message;
      files_[t] = std::shared_ptr<GgufFile>(std::move(*f));
    }
    auto ck = SafetensorsCheckpoint::open(kModelDir.string());
    ASSERT_TRUE(ck.ok()) << ck.error().message;
    checkpoint_ = std::make_unique<SafetensorsCheckpoint>(std::move(*ck));
    config_ = load_json(kModelDir / "config.json");
  }
  static void TearDownTestSuite() {
    files_.clear();
    checkpoint_.reset();
    std::error_code ec;
    fs::remove_all(out_dir_, ec);
  }
  static const GgufFile& gguf(const std::string& t) { return *files_.at(t); }
  static std::vector<float> st_f32(const std::string& name) {
    const SafetensorsTensor* t = checkpoint_->find(name);
    KILN_ASSERT(t != nullptr, "test: tensor missing from the checkpoint");
    return *tensor_to_f32(*t);
  }
  static std::vector<float> gguf_f32(const GgufFile& f, const std::string& name) {
    const GgufTensorInfo* t = f.find_tensor(name);
    KILN_ASSERT(t != nullptr && t->type == DType::F32, "test: expected an F32 tensor");
    std::vector<float> out(static_cast<size_t>(t->nelements()));
    std::memcpy(out.data(), f.tensor_data(*t).data(), out.size() * 4);
    return out;
  }

  static inline fs::path out_dir_;
  static inline std::map<std::string, std::shared_ptr<GgufFile>> files_;
  static inline std::unique_ptr<SafetensorsCheckpoint> checkpoint_;
  static inline json config_;
};

TEST_F(KjvConvert, HyperparametersAsLlamaCppWritesThem) {
  const GgufFile& f = gguf("f32");
  EXPECT_EQ(*f.get_string("general.architecture"), "llama");
  EXPECT_EQ(*f.get_u32("general.file_type"), 0u);
  EXPECT_EQ(*f.get_u32("llama.block_count"), config_["num_hidden_layers"].get<uint32_t>());
  EXPECT_EQ(*f.get_u32("llama.context_length"), config_["max_position_embeddings"].get<uint32_t>());
  EXPECT_EQ(*f.get_u32("llama.embedding_length"), config_["hidden_size"].get<uint32_t>());
  EXPECT_EQ(*f.get_u32("llama.feed_forward_length"), config_["intermediate_size"].get<uint32_t>());
  EXPECT_EQ(*f.get_u32("llama.attention.head_count"), config_["num_attention_heads"].get<uint32_t>());
  EXPECT_EQ(*f.get_u32("llama.attention.head_count_kv"), config_["num_key_value_heads"].get<uint32_t>());
  EXPECT_EQ(*f.get_u32("llama.attention.key_length"), config_["head_dim"].get<uint32_t>());
  EXPECT_EQ(*f.get_u32("llama.attention.value_length"), config_["head_dim"].get<uint32_t>());
  EXPECT_EQ(*f.get_u32("llama.rope.dimension_count"), config_["head_dim"].get<uint32_t>());
  EXPECT_EQ(*f.get_u32("llama.vocab_size"), config_["vocab_size"].get<uint32_t>());
  EXPECT_EQ(*f.get_f32("llama.rope.freq_base"), config_["rope_theta"].get<float>());
  EXPECT_EQ(*f.get_f32("llama.attention.layer_norm_rms_epsilon"), config_["rms_norm_eps"].get<float>());
  EXPECT_EQ(*f.get_u32("general.quantization_version"), 2u);
  EXPECT_EQ(*gguf("f16").get_u32("general.file_type"), 1u);
  EXPECT_EQ(*gguf("q8_0").get_u32("general.file_type"), 7u);
  EXPECT_EQ(*gguf("bf16").get_u32("general.file_type"), 32u);
}

TEST_F(KjvConvert, SentencePieceVocabulary) {
  const GgufFile& f = gguf("f32");
  const json tc = load_json(kModelDir / "tokenizer_config.json");
  EXPECT_EQ(*f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*f.get_string("tokenizer.ggml.pre"), "default");
  auto tokens = *f.get_string_array("tokenizer.ggml.tokens");
  auto scores = *f.get_f32_array("tokenizer.ggml.scores");
  auto types = *f.get_i64_array("tokenizer.ggml.token_type");
  const size_t n_vocab = config_["vocab_size"].get<size_t>();
  ASSERT_EQ(tokens.size(), n_vocab);
  ASSERT_EQ(scores.size(), n_vocab);
  ASSERT_EQ(types.size(), n_vocab);
  // The special pieces are listed in added_tokens_decoder with special=true: CONTROL, score -1000.
  EXPECT_EQ(tokens[0], "<unk>");
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(tokens[2], "</s>");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(types[i], 3) << i;
    EXPECT_EQ(scores[i], -1000.0f) << i;
  }
  // byte_fallback: <0x00>..<0xFF> right after them, type BYTE.
  for (int b = 0; b < 256; ++b) {
    char want[8];
    std::snprintf(want, sizeof want, "<0x%02X>", b);
    EXPECT_EQ(tokens[3 + b], want);
    EXPECT_EQ(types[3 + b], 6);
  }
  // BPE pieces: NORMAL, scores = -(merge rank), non-increasing.
  for (size_t i = 259; i < n_vocab; ++i) {
    EXPECT_EQ(types[i], 1) << i;
    if (i > 259) {
      EXPECT_LE(scores[i], scores[i - 1]) << i;
    }
  }
  EXPECT_EQ(*f.get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*f.get_u32("tokenizer.ggml.eos_token_id"), 2u);
  EXPECT_EQ(f.find("tokenizer.ggml.unknown_token_id"), nullptr);  // config.json has no unk_token_id
  EXPECT_TRUE(*f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_FALSE(*f.get_bool("tokenizer.ggml.add_eos_token"));
  EXPECT_EQ(*f.get_string("tokenizer.chat_template"), tc["chat_template"].get<std::string>());
}

TEST_F(KjvConvert, TensorNamesShapesAndTypes) {
  const int64_t n_layer = config_["num_hidden_layers"], n_embd = config_["hidden_size"], n_ff = config_["intermediate_size"];
  const int64_t n_vocab = config_["vocab_size"], hd = config_["head_dim"], n_head = config_["num_attention_heads"],
                n_kv = config_["num_key_value_heads"];
  std::map<std::string, std::array<int64_t, 2>> want = {
      {"token_embd.weight", {n_embd, n_vocab}}, {"output_norm.weight", {n_embd, 1}}, {"output.weight", {n_embd, n_vocab}}};
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    want[b + "attn_norm.weight"] = {n_embd, 1};
    want[b + "attn_q.weight"] = {n_embd, n_head * hd};
    want[b + "attn_k.weight"] = {n_embd, n_kv * hd};
    want[b + "attn_v.weight"] = {n_embd, n_kv * hd};
    want[b + "attn_output.weight"] = {n_head * hd, n_embd};
    want[b + "ffn_norm.weight"] = {n_embd, 1};
    want[b + "ffn_gate.weight"] = {n_embd, n_ff};
    want[b + "ffn_up.weight"] = {n_embd, n_ff};
    want[b + "ffn_down.weight"] = {n_ff, n_embd};
  }
  for (const char* t : {"f32", "f16", "bf16", "q8_0"}) {
    const GgufFile& f = gguf(t);
    ASSERT_EQ(f.tensors().size(), want.size()) << t;
    const DType two_d = std::string(t) == "f32" ? DType::F32 : std::string(t) == "f16" ? DType::F16
                        : std::string(t) == "bf16" ? DType::BF16 : DType::Q8_0;
    for (const auto& [name, ne] : want) {
      const GgufTensorInfo* ti = f.find_tensor(name);
      ASSERT_NE(ti, nullptr) << t << " " << name;
      EXPECT_EQ(ti->ne[0], ne[0]) << name;
      EXPECT_EQ(ti->ne[1], ne[1]) << name;
      EXPECT_EQ(ti->n_dims, ne[1] == 1 ? 1 : 2) << name;
      EXPECT_EQ(ti->type, ne[1] == 1 ? DType::F32 : two_d) << t << " " << name;  // 1-D and norms stay F32
    }
  }
}

// ref: convert_hf_to_gguf.py LlamaModel.permute. GGUF row h*hd + 2i + j holds HF row h*hd + j*hd/2 + i.
TEST_F(KjvConvert, QueryKeyRowsArePermutedPerHead) {
  const GgufFile& f = gguf("f32");
  const int64_t n_embd = config_["hidden_size"], hd = config_["head_dim"];
  for (int64_t layer = 0; layer < config_["num_hidden_layers"].get<int64_t>(); ++layer) {
    for (const auto& [proj, heads_key] : {std::pair{"q", "num_attention_heads"}, std::pair{"k", "num_key_value_heads"}}) {
      const int64_t n_heads = config_[heads_key];
      const auto src = st_f32("model.layers." + std::to_string(layer) + ".self_attn." + proj + "_proj.weight");
      const auto dst = gguf_f32(f, "blk." + std::to_string(layer) + ".attn_" + proj + ".weight");
      ASSERT_EQ(src.size(), dst.size());
      int64_t mismatches = 0;
      for (int64_t h = 0; h < n_heads; ++h)
        for (int64_t i = 0; i < hd / 2; ++i)
          for (int64_t j = 0; j < 2; ++j)
            for (int64_t c = 0; c < n_embd; ++c)
              mismatches += dst[(h * hd + 2 * i + j) * n_embd + c] != src[(h * hd + j * hd / 2 + i) * n_embd + c];
      EXPECT_EQ(mismatches, 0) << "layer " << layer << " " << proj;
      EXPECT_NE(src, dst) << "the permutation must move rows";
    }
    // Everything else is copied unchanged.
    for (const auto& [hf, gg] : {std::pair{"self_attn.v_proj.weight", "attn_v.weight"}, std::pair{"mlp.down_proj.weight", "ffn_down.weight"},
                                 std::pair{"input_layernorm.weight", "attn_norm.weight"}}) {
      EXPECT_EQ(st_f32("model.layers." + std::to_string(layer) + "." + hf), gguf_f32(f, "blk." + std::to_string(layer) + "." + gg));
    }
  }
  EXPECT_EQ(st_f32("model.embed_tokens.weight"), gguf_f32(f, "token_embd.weight"));
  EXPECT_EQ(st_f32("lm_head.weight"), gguf_f32(f, "output.weight"));
}

// F16/BF16/Q8_0 hold exactly the F32 file's values converted as ggml converts them.
TEST_F(KjvConvert, OutputTypesRoundAsGgml) {
  const GgufFile& f32 = gguf("f32");
  for (const GgufTensorInfo& t : f32.tensors()) {
    if (t.n_dims == 1) continue;
    const auto ref = gguf_f32(f32, t.name);
    const int64_t ne0 = t.ne[0], nrows = t.nelements() / ne0;
    std::vector<uint16_t> h(ref.size()), b(ref.size());
    f32_to_f16_row(ref.data(), h.data(), static_cast<int64_t>(ref.size()));
    f32_to_bf16_row(ref.data(), b.data(), static_cast<int64_t>(ref.size()));
    const auto fh = gguf("f16").tensor_data(*gguf("f16").find_tensor(t.name));
    const auto fb = gguf("bf16").tensor_data(*gguf("bf16").find_tensor(t.name));
    ASSERT_EQ(fh.size(), h.size() * 2);
    EXPECT_EQ(std::memcmp(fh.data(), h.data(), fh.size()), 0) << t.name;
    EXPECT_EQ(std::memcmp(fb.data(), b.data(), fb.size()), 0) << t.name;
    std::vector<uint8_t> q(row_size(DType::Q8_0, ne0) * static_cast<size_t>(nrows));
    quantize_chunk(DType::Q8_0, ref.data(), q.data(), nrows, ne0, nullptr);
    const auto fq = gguf("q8_0").tensor_data(*gguf("q8_0").find_tensor(t.name));
    ASSERT_EQ(fq.size(), q.size());
    EXPECT_EQ(std::memcmp(fq.data(), q.data(), q.size()), 0) << t.name;
    // And Q8_0 stays close to the weights: half a step d = amax/127, plus 127 times the F16
    // rounding of d (2^-11 relative): |error| <= d * (0.5 + 127/2048).
    std::vector<float> deq(ref.size());
    quant_traits(DType::Q8_0)->to_float(fq.data(), deq.data(), static_cast<int64_t>(deq.size()));
    for (size_t blk = 0; blk < ref.size(); blk += 32) {
      float amax = 0;
      for (size_t i = blk; i < blk + 32; ++i) amax = std::max(amax, std::fabs(ref[i]));
      for (size_t i = blk; i < blk + 32; ++i) ASSERT_LE(std::fabs(deq[i] - ref[i]), amax / 127.0f * 0.563f + 1e-12f) << t.name;
    }
  }
}

// The committed default model is exactly what `kiln convert --outtype q8_0` makes today.
TEST_F(KjvConvert, CommittedQ8ModelIsReproduced) {
  const fs::path committed = fs::path(KILN_SOURCE_DIR) / "models" / "kjv-llama-q8_0.gguf";
  auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  };
  const auto want = read(committed);
  ASSERT_FALSE(want.empty()) << committed;
  EXPECT_TRUE(want == read(out_dir_ / "kjv-q8_0.gguf"));
}

// llama.cpp loaded the converted F32 file: its tokens equal SentencePiece's, its logits the
// PyTorch model's (float64 reference; llama.cpp computes in F32).
TEST(KjvOracle, LlamaCppMatchesPyTorch) {
  const json ref = load_json(kDataDir / "kjv_llama_ref.json");
  const json oracle = load_json(kDataDir / "kjv_llama_f32.oracle.json");
  ASSERT_EQ(ref["prompts"].size(), oracle["cases"].size());
  ASSERT_GE(ref["prompts"].size(), 3u);
  for (size_t k = 0; k < ref["prompts"].size(); ++k) {
    const json& p = ref["prompts"][k];
    const json& c = oracle["cases"][k];
    ASSERT_EQ(p["text"], c["text"]);
    std::vector<int> want = {ref["bos"].get<int>()};
    for (int id : p["sp_ids"]) want.push_back(id);
    EXPECT_EQ(c["tokens"].get<std::vector<int>>(), want) << p["text"];
    EXPECT_EQ(p["tokens"].get<std::vector<int>>(), want);
    const json& last = c["logits"].back();
    ASSERT_EQ(last["pos"].get<size_t>(), want.size() - 1);
    ASSERT_EQ(last["top"].size(), 20u);
    for (const json& e : last["top"]) {
      const int tok = e[0];
      EXPECT_NEAR(e[1].get<double>(), p["last_logits"][tok].get<double>(), 1e-3) << p["text"] << " token " << tok;
    }
    // Greedy continuations agree while llama.cpp's top-1/top-2 gap is clear.
    for (size_t g = 0; g < c["greedy"].size() && g < p["greedy"].size(); ++g) {
      const json& top = c["greedy_logits"][g];
      if (top[0][1].get<double>() - top[1][1].get<double>() < 1e-2) break;
      EXPECT_EQ(c["greedy"][g], p["greedy"][g]) << p["text"] << " step " << g;
    }
  }
}

}  // namespace
}  // namespace kiln::convert
