// bind_clip_text names the tensor that is missing or misshaped, in either spelling, and the width
// picks the encoder; clip_text_layers maps clip_skip to the layers that run as stable-diffusion.cpp
// does. (The encoder's numbers are checked against
// stable-diffusion.cpp in tests/diffusion/clip_text_encoder_test.cpp.)
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "core/gguf_format.h"
#include "models/sd/clip_text.h"

namespace kiln::sd {
namespace {

// A GGUF holding one F32 tensor `name` of sizes `ne`; the bytes must outlive the parsed file.
std::vector<uint8_t> one_tensor_file(const std::string& name, const std::vector<int64_t>& ne) {
  GgufWriter w;
  w.set_max_tensor_name(gguf_format::kSdMaxTensorNameLength);
  EXPECT_TRUE(w.add_tensor(name, DType::F32, ne).ok());
  std::vector<uint8_t> out;
  EXPECT_TRUE(w.begin(out).ok());
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  EXPECT_TRUE(w.write_tensor_data(std::vector<uint8_t>(static_cast<size_t>(n) * 4, 0)).ok());
  EXPECT_TRUE(w.finish().ok());
  return out;
}

std::string bind_error(const std::vector<uint8_t>& bytes) {
  auto file = GgufFile::parse(bytes);
  EXPECT_TRUE(file.ok());
  if (!file.ok()) return "";
  auto w = bind_clip_text(**file, kSd1TextPrefix);
  return w.ok() ? std::string("(bound)") : w.error().message;
}

TEST(SdClipText, MisshapedAndMissingTensorsAreNamed) {
  const std::string token = std::string(kSd1TextPrefix) + ".embeddings.token_embedding.weight";
  const std::string e = bind_error(one_tensor_file(token, {768, 10}));
  EXPECT_NE(e.find("tensor '" + token + "' has shape [768, 10], expected [768, 49408]"), std::string::npos) << e;
  const std::string missing = bind_error(one_tensor_file("other.weight", {4}));
  EXPECT_NE(missing.find("missing tensor '" + token + "'"), std::string::npos) << missing;
}

TEST(SdClipText, TheWidthSaysWhichEncoder) {
  const std::optional<ClipTextHParams> l = clip_text_hparams(768), h = clip_text_hparams(1024),
                                       g = clip_text_hparams(1280);
  ASSERT_TRUE(l && h && g);
  EXPECT_EQ(l->n_layer, 12);
  EXPECT_EQ(l->act, ClipFfnAct::GeluQuick);
  EXPECT_EQ(h->n_layer, 24);
  EXPECT_EQ(h->n_layer_run, 23);  // stable-diffusion.cpp never loads OpenCLIP-H's last layer
  EXPECT_EQ(*clip_text_layers(*h, 1), 23);
  EXPECT_EQ(*clip_text_layers(*h, 2), 23);
  EXPECT_EQ(*clip_text_layers(*h, 24), 1);
  EXPECT_EQ(h->n_head, 16);
  EXPECT_EQ(h->n_ff, 4096);
  EXPECT_EQ(h->act, ClipFfnAct::Gelu);
  EXPECT_EQ(g->n_layer, 32);
  EXPECT_EQ(g->n_head, 20);
  EXPECT_FALSE(clip_text_hparams(1000).has_value());
}

TEST(SdClipText, OpenClipNamesAreBoundAndChecked) {
  // SD 2.x checkpoints spell OpenCLIP-H's tensors as OpenCLIP does; the token embedding's width picks
  // the encoder, and a width of no CLIP text encoder is named.
  const std::string token = std::string(kOpenClipTextPrefix) + ".token_embedding.weight";
  auto bind_open_clip = [](const std::vector<uint8_t>& bytes) {
    auto file = GgufFile::parse(bytes);
    EXPECT_TRUE(file.ok());
    if (!file.ok()) return std::string();
    auto w = bind_clip_text(**file, kOpenClipTextPrefix);
    return w.ok() ? std::string("(bound)") : w.error().message;
  };
  const std::string shape = bind_open_clip(one_tensor_file(token, {1024, 10}));
  EXPECT_NE(shape.find("tensor '" + token + "' has shape [1024, 10], expected [1024, 49408]"),
            std::string::npos)
      << shape;
  const std::string width = bind_open_clip(one_tensor_file(token, {1000, 10}));
  EXPECT_NE(width.find("1000 wide, which is no CLIP text encoder's"), std::string::npos) << width;
}

TEST(SdClipText, ClipSkipSelectsTheLayers) {
  const ClipTextHParams hp;
  EXPECT_EQ(*clip_text_layers(hp, -1), 12);  // default: all
  EXPECT_EQ(*clip_text_layers(hp, 0), 12);
  EXPECT_EQ(*clip_text_layers(hp, 1), 12);
  EXPECT_EQ(*clip_text_layers(hp, 2), 11);
  EXPECT_EQ(*clip_text_layers(hp, 12), 1);
  EXPECT_FALSE(clip_text_layers(hp, 13).ok());
}

}  // namespace
}  // namespace kiln::sd
