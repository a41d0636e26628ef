// Vision encoders on vulkan0: the image embeddings of every fixture projector (gemma3 and mlp, F32
// and F16 weights) and image agree with the CPU's by normalized error (< 1e-6), with flash
// attention on and off.
#include <gtest/gtest.h>

#include "llm/vision_test_util.h"
#include "vulkan_test_util.h"

namespace kiln::test {
namespace {

TEST(VulkanVision, EmbeddingsAgreeWithTheCpus) {
  auto text = load(model_path("llama-spm-e128-f32.gguf"));
  ASSERT_TRUE(text);
  auto devices = make_devices(size_t{64} << 20, {}, {}, true);
  ASSERT_TRUE(devices);
  for (const char* file : {"mmproj-gemma3.gguf", "mmproj-mlp.gguf", "mmproj-gemma3-f16.gguf", "mmproj-mlp-f16.gguf"}) {
    auto v = mmproj(file, *text);
    ASSERT_TRUE(v);
    for (const FlashAttention fa : {FlashAttention::On, FlashAttention::Off}) {
      const std::string what = std::string(file) + (fa == FlashAttention::On ? ", flash" : "");
      auto cpu = encoder(*devices, "cpu", v, {.flash_attention = fa, .cache_entries = 0});
      auto gpu = encoder(*devices, "vulkan0", v, {.flash_attention = fa, .cache_entries = 0});
      ASSERT_TRUE(cpu && gpu) << what;
      for (const char* name : kImages) {
        const auto img = image(*v, name);
        ASSERT_TRUE(img);
        auto want = cpu->encode(*img);
        auto got = gpu->encode(*img);
        ASSERT_TRUE(want.ok()) << want.error().message;
        ASSERT_TRUE(got.ok()) << got.error().message;
        EXPECT_EQ((*got)->n_tokens, (*want)->n_tokens);
        EXPECT_LT(nmse((*want)->data, (*got)->data), 1e-6) << what << ", " << name;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::test
