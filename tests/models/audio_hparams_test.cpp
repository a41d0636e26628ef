// read_audio_hparams: llama.cpp's clip.audio.* keys, refusals that name the key or the projector
// type, and the embeddings a 3000-frame chunk becomes, equal to what llama.cpp made of the same
// projector shapes (tests/data/audio/mtmd-audio-tokens.json).
#include "models/clip/audio_hparams.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/clip/clip_hparams.h"
#include "test_data.h"

namespace kiln {
namespace {

struct AudioKeys {
  std::string projector = "ultravox";
  uint32_t n_mel = 80;
  uint32_t stack = 8;  // 0: no key
  bool has_audio = true;
};

std::vector<uint8_t> audio_mmproj(const AudioKeys& k) {
  GgufWriter w;
  w.set_string("general.architecture", "clip");
  w.set_string("clip.projector_type", k.projector);
  w.set_bool("clip.has_vision_encoder", false);
  w.set_bool("clip.has_audio_encoder", k.has_audio);
  w.set_u32("clip.audio.num_mel_bins", k.n_mel);
  w.set_u32("clip.audio.embedding_length", 64);
  w.set_u32("clip.audio.feed_forward_length", 128);
  w.set_u32("clip.audio.block_count", 2);
  w.set_u32("clip.audio.attention.head_count", 4);
  w.set_f32("clip.audio.attention.layer_norm_epsilon", 1e-5f);
  if (k.stack) w.set_u32("clip.audio.projector.stack_factor", k.stack);
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(w.begin(bytes).ok());
  EXPECT_TRUE(w.finish().ok());
  return bytes;
}

Result<AudioHParams> read(const AudioKeys& k, std::vector<uint8_t>& storage) {
  storage = audio_mmproj(k);
  auto file = GgufFile::parse(storage);
  if (!file.ok()) return file.error();
  return read_audio_hparams(**file);
}

TEST(AudioHParams, TokensPerChunkAsLlamaCpp) {
  std::ifstream f(test_data::path("audio/mtmd-audio-tokens.json"));
  const nlohmann::json ref = nlohmann::json::parse(f);
  ASSERT_EQ(ref["cases"].size(), 5u);
  for (const auto& c : ref["cases"]) {
    std::vector<uint8_t> bytes;
    auto hp =
        read({.projector = c["projector"], .n_mel = c["num_mel_bins"], .stack = c["stack_factor"]}, bytes);
    ASSERT_TRUE(hp.ok()) << hp.error().message;
    EXPECT_EQ(hp->n_mel, c["num_mel_bins"].get<int64_t>());
    EXPECT_EQ(hp->n_output_tokens(3000), c["n_tokens"].get<int64_t>()) << c["projector"];
  }
  // The count for real Ultravox files (stack 8): the partial last stack dropped.
  std::vector<uint8_t> bytes;
  auto ultravox = read({}, bytes);
  ASSERT_TRUE(ultravox.ok());
  EXPECT_EQ(ultravox->n_output_tokens(3000), 187);
  EXPECT_EQ(ultravox->eps, 1e-5f);
  // glma: the stem's positions divided by the stack (rounded down), plus its begin and end rows;
  // musicflamingo pools and never stacks, whatever stack factor the file gives.
  auto glma = read({.projector = "glma", .n_mel = 128, .stack = 5}, bytes);
  ASSERT_TRUE(glma.ok()) << glma.error().message;
  EXPECT_EQ(glma->n_output_tokens(3000), 1500 / 5 + 2);
  EXPECT_EQ(glma->n_output_tokens(2998), 1499 / 5 + 2);
  auto flamingo = read({.projector = "musicflamingo", .n_mel = 128, .stack = 4}, bytes);
  ASSERT_TRUE(flamingo.ok()) << flamingo.error().message;
  EXPECT_EQ(flamingo->n_output_tokens(3000), 750);
  EXPECT_FALSE(flamingo->stacks_frames());
  EXPECT_TRUE(flamingo->pools_pairs());
}

TEST(AudioHParams, RefusesWithTheKeyOrType) {
  auto expect = [](const AudioKeys& k, const std::string& needle) {
    std::vector<uint8_t> bytes;
    auto hp = read(k, bytes);
    ASSERT_FALSE(hp.ok()) << needle;
    EXPECT_NE(hp.error().message.find(needle), std::string::npos) << hp.error().message;
  };
  for (const char* type : {"lfm2a", "gemma4a", "granite_speech", "parakeet", "qwen3a", "meralion"}) {
    expect({.projector = type}, std::string("audio projector type '") + type +
                                    "' is not supported (kiln reads ultravox, qwen2a, voxtral, glma, musicflamingo)");
  }
  expect({.stack = 0}, "clip.audio.projector.stack_factor");
  expect({.projector = "glma", .stack = 0}, "clip.audio.projector.stack_factor");
  expect({.n_mel = 0}, "clip.audio.num_mel_bins = 0 is outside [1, 256]");
  expect({.has_audio = false}, "no audio encoder");
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(read({.projector = "qwen2a", .n_mel = 128, .stack = 0}, bytes).ok());
  EXPECT_TRUE(read({.projector = "musicflamingo", .n_mel = 128, .stack = 0}, bytes).ok());
}

// The vision loader's refusal of an audio-only file says what it holds.
TEST(AudioHParams, VisionLoaderNamesTheAudioEncoder) {
  const std::vector<uint8_t> bytes = audio_mmproj({.projector = "qwen2a", .n_mel = 128});
  auto file = GgufFile::parse(bytes);
  ASSERT_TRUE(file.ok());
  auto hp = read_clip_hparams(**file);
  ASSERT_FALSE(hp.ok());
  EXPECT_NE(
      hp.error().message.find("no vision encoder; its audio encoder (projector 'qwen2a', 128 mel bins) takes "
                              "audio (--audio), not images"),
      std::string::npos)
      << hp.error().message;
}

}  // namespace
}  // namespace kiln
