// Model files that cannot run get an Error that names the problem: unknown architectures,
// mixture-of-experts files, missing or misshaped tensors, bad hyperparameters.
#include <gtest/gtest.h>

#include <vector>

#include "core/gguf.h"
#include "models/hparams.h"
#include "models/modules.h"

namespace kiln {
namespace {

struct Spec {
  std::string arch = "llama";
  int64_t n_embd = 8, n_layer = 1, n_head = 2, n_head_kv = 1, n_ff = 16, n_vocab = 4;
  bool experts = false;
  std::string skip_tensor;                 // leave this tensor out
  std::string misshape_tensor;             // give this tensor one column too many
};

// A tiny F32 model in memory; the bytes must outlive the parsed file.
std::vector<uint8_t> write_model(const Spec& s) {
  GgufWriter w;
  w.set_string("general.architecture", s.arch);
  const std::string p = s.arch + ".";
  w.set_u32(p + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(p + "block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(p + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(p + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_u32(p + "context_length", 64);
  if (s.experts) w.set_u32(p + "expert_count", 8);
  std::vector<std::string> tokens;
  // append, not "t" + std::to_string(i): GCC 12's false -Wrestrict (GCC bug 105329).
  for (int64_t i = 0; i < s.n_vocab; ++i) tokens.push_back(std::string("t").append(std::to_string(i)));
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  const int64_t hd = s.n_embd / s.n_head;
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors = {
      {"token_embd.weight", {s.n_embd, s.n_vocab}}, {"output_norm.weight", {s.n_embd}},
      {"blk.0.attn_norm.weight", {s.n_embd}},       {"blk.0.attn_q.weight", {s.n_embd, s.n_embd}},
      {"blk.0.attn_k.weight", {s.n_embd, hd * s.n_head_kv}}, {"blk.0.attn_v.weight", {s.n_embd, hd * s.n_head_kv}},
      {"blk.0.attn_output.weight", {s.n_embd, s.n_embd}},    {"blk.0.ffn_norm.weight", {s.n_embd}},
      {"blk.0.ffn_gate.weight", {s.n_embd, s.n_ff}},         {"blk.0.ffn_up.weight", {s.n_embd, s.n_ff}},
      {"blk.0.ffn_down.weight", {s.n_ff, s.n_embd}}};
  std::vector<std::vector<int64_t>> shapes;
  for (auto& [name, ne] : tensors) {
    if (name == s.skip_tensor) continue;
    if (name == s.misshape_tensor) ne[0] += 1;
    EXPECT_TRUE(w.add_tensor(name, DType::F32, ne).ok());
    shapes.push_back(ne);
  }
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(w.begin(bytes).ok());
  for (const auto& ne : shapes) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    const std::vector<uint8_t> zeros(static_cast<size_t>(n) * 4, 0);
    EXPECT_TRUE(w.write_tensor_data(zeros).ok());
  }
  EXPECT_TRUE(w.finish().ok());
  return bytes;
}

std::string load_error(const Spec& s) {
  const auto bytes = write_model(s);
  auto f = GgufFile::parse(bytes);
  EXPECT_TRUE(f.ok()) << f.error().message;
  if (!f.ok()) return "";
  auto hp = read_hparams(**f);
  if (!hp.ok()) return hp.error().message;
  auto w = bind_decoder_weights(**f, *hp);
  return w.ok() ? "" : w.error().message;
}

TEST(ModelLoad, AWellFormedFileBinds) { EXPECT_EQ(load_error(Spec{}), ""); }

TEST(ModelLoad, UnknownArchitectureIsNamed) {
  Spec s;
  s.arch = "gptneox";
  EXPECT_EQ(load_error(s), "model: architecture 'gptneox' is not supported (supported: llama, qwen2, qwen3)");
}

TEST(ModelLoad, MixtureOfExpertsIsRefusedAsSuch) {
  Spec s;
  s.experts = true;
  EXPECT_NE(load_error(s).find("mixture-of-experts is not supported yet"), std::string::npos);
}

TEST(ModelLoad, MissingTensorIsNamed) {
  Spec s;
  s.skip_tensor = "blk.0.ffn_up.weight";
  EXPECT_EQ(load_error(s), "model: missing tensor 'blk.0.ffn_up.weight'");
}

TEST(ModelLoad, MisshapedTensorIsNamedWithBothShapes) {
  Spec s;
  s.misshape_tensor = "blk.0.attn_k.weight";
  EXPECT_EQ(load_error(s), "model: tensor 'blk.0.attn_k.weight' has shape [9, 4], expected [8, 4]");
}

TEST(ModelLoad, BadHeadCountsAreRefused) {
  Spec s;
  s.n_head = 2;
  s.n_head_kv = 3;
  EXPECT_NE(load_error(s).find("head_count 2 is not a multiple of head_count_kv 3"), std::string::npos);
}

}  // namespace
}  // namespace kiln
