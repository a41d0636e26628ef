// bind_clip_text names the tensor that is missing or misshaped; clip_text_layers maps clip_skip to
// the layers that run as stable-diffusion.cpp does. (The encoder's numbers are checked against
// stable-diffusion.cpp in tests/diffusion/clip_text_encoder_test.cpp.)
#include <gtest/gtest.h>

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
