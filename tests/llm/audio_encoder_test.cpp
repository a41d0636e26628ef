// The audio encoder as the vision encoder runs (llm/media_encoder.h): its weights and inputs are a
// resident owner of their own that comes back bit for bit after eviction (on the CPU and on the
// sim device, whose copies really leave), a repeated chunk is served from the embedding cache, and
// one compute arena serves the text decoder, the vision encoder and the audio encoder, sized for the
// largest of the three, not their sum.
#include "llm/audio_encoder.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "llm/model_test_util.h"
#include "llm/vision_encoder.h"
#include "llm/vision_test_util.h"

namespace kiln {
namespace {

using namespace kiln::test;

constexpr size_t kMiB = size_t{1} << 20;
const std::string kAudio = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd-audio/";
const std::string kWav = std::string(KILN_SOURCE_DIR) + "/tests/data/audio/voiced-16k.wav";

std::shared_ptr<const AudioModel> audio_mmproj(const std::string& projector, const Model& text) {
  auto a = AudioModel::load(kAudio + "mmproj-" + projector + ".gguf", text);
  EXPECT_TRUE(a.ok()) << a.error().message;
  return a.ok() ? *a : nullptr;
}

// The fixture WAV's one chunk.
std::shared_ptr<const PreparedAudio> voiced_chunk(const AudioModel& a) {
  auto chunks = a.prepare_audio(read_file(kWav));
  EXPECT_TRUE(chunks.ok()) << chunks.error().message;
  if (!chunks.ok() || chunks->size() != 1) return nullptr;
  return chunks->front();
}

std::unique_ptr<AudioEncoder> audio_encoder(DeviceRegistry& devices, const std::string& device,
                                            const std::shared_ptr<const AudioModel>& a,
                                            const AudioEncoderOptions& opt) {
  Device& dev = **devices.find(device);
  auto e = AudioEncoder::create(a, devices.backend(dev), opt);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(*e) : nullptr;
}

TEST(AudioEncoderMemory, EvictedAndRestoredGivesIdenticalEmbeddings) {
  auto text = load(model_path("llama-spm-e128-f32.gguf"));
  ASSERT_TRUE(text);
  auto devices = make_devices(64 * kMiB);
  ASSERT_TRUE(devices);
  std::vector<float> cpu_embeddings;
  for (const char* device : {"cpu", "sim0"}) {
    for (const char* projector : {"ultravox", "qwen2a", "voxtral", "glma", "musicflamingo"}) {
      const std::string what = std::string(device) + ", " + projector;
      auto a = audio_mmproj(projector, *text);
      ASSERT_TRUE(a) << what;
      const auto chunk = voiced_chunk(*a);
      ASSERT_TRUE(chunk) << what;
      auto e = audio_encoder(*devices, device, a, {.cache_entries = 0});
      ASSERT_TRUE(e) << what;
      ResidencyManager& manager = devices->residency(**devices->find(device));
      ASSERT_NE(e->owner(), 0u) << what;
      auto want = e->encode(*chunk);
      ASSERT_TRUE(want.ok()) << want.error().message;
      EXPECT_EQ((*want)->n_tokens, chunk->n_tokens) << what;

      const size_t used = manager.used();
      ASSERT_TRUE(manager.evict_owner(e->owner()).ok()) << what;
      EXPECT_FALSE(manager.owner_resident(e->owner())) << what;
      EXPECT_LT(manager.used(), used) << what << ": eviction freed the encoder's memory";
      if (e->weights().buffer_bytes() > 0) {
        EXPECT_FALSE(e->weights().resident()) << what;  // the copies freed
      }

      auto got = e->encode(*chunk);  // restores what was evicted first
      ASSERT_TRUE(got.ok()) << got.error().message;
      EXPECT_TRUE(manager.owner_resident(e->owner())) << what;
      EXPECT_NE(got->get(), want->get()) << what << ": computed again, not cached";
      EXPECT_TRUE(same_bits((*got)->data, (*want)->data)) << what;
      EXPECT_EQ(e->cache_stats().encoded, 2u) << what;
      // The sim device runs the host kernels: the same bits as the CPU.
      if (std::string(projector) == "ultravox") {
        if (cpu_embeddings.empty())
          cpu_embeddings = (*want)->data;
        else
          EXPECT_TRUE(same_bits((*want)->data, cpu_embeddings)) << what;
      }
    }
  }
}

TEST(AudioEncoderMemory, OnTheSimDeviceTheWeightsAreCopiedAsAnOwnerOfTheirOwn) {
  auto text = load(model_path("llama-spm-e128-f32.gguf"));
  ASSERT_TRUE(text);
  auto a = audio_mmproj("ultravox", *text);
  ASSERT_TRUE(a);
  auto devices = make_devices(64 * kMiB);
  SimDevice& sim = sim_of(*devices);
  const size_t before = sim.allocated_bytes(MemoryKind::Weights);
  auto e = audio_encoder(*devices, "sim0", a, {});
  ASSERT_TRUE(e);
  size_t file_bytes = 0;
  for (const GgufTensorInfo& t : a->file().tensors()) file_bytes += t.size;
  EXPECT_GE(sim.allocated_bytes(MemoryKind::Weights) - before, file_bytes);
  EXPECT_EQ(e->weights().name(), "mmproj " + a->name() + " (audio)");
  ASSERT_TRUE(devices->residency(sim).evict_owner(e->owner()).ok());
  EXPECT_EQ(sim.allocated_bytes(MemoryKind::Weights), before);
}

TEST(AudioEncoderMemory, ARepeatedChunkIsServedFromTheCache) {
  auto text = load(model_path("llama-spm-e128-f32.gguf"));
  ASSERT_TRUE(text);
  auto a = audio_mmproj("qwen2a", *text);
  ASSERT_TRUE(a);
  auto devices = make_devices(64 * kMiB);
  auto e = audio_encoder(*devices, "cpu", a, {.cache_entries = 4});
  ASSERT_TRUE(e);
  const auto chunk = voiced_chunk(*a);
  ASSERT_TRUE(chunk);
  auto first = e->encode(*chunk);
  auto again = e->encode(*voiced_chunk(*a));  // the same bytes prepared again: the same id
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->get(), again->get());
  const MediaEncoder::CacheStats s = e->cache_stats();
  EXPECT_EQ(s.encoded, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.entries, 1u);
}

TEST(AudioEncoderMemory, OneArenaForTextVisionAndAudioIsTheLargestNotTheSum) {
  auto text = load(model_path("llama-spm-e128-f32.gguf"));
  ASSERT_TRUE(text);
  auto v = mmproj("mmproj-mlp.gguf", *text);
  auto a = audio_mmproj("qwen2a", *text);
  ASSERT_TRUE(v && a);
  // Micro-batches of 2 tokens (an encoder's graph is the largest) and of 2048 (the decoder's is).
  for (const int64_t n_ubatch : {int64_t{2}, int64_t{2048}}) {
    ContextOptions opt{.n_ctx = 2048, .n_batch = n_ubatch, .n_ubatch = n_ubatch, .input_embeddings = true};
    size_t decoder = 0, vision = 0, audio = 0;
    {
      auto devices = make_devices(64 * kMiB);
      OnDevice alone = place(*devices, "cpu", text, opt);  // in arenas of their own
      auto ve = encoder(*devices, "cpu", v, {});
      auto ae = audio_encoder(*devices, "cpu", a, {});
      ASSERT_TRUE(alone.ctx && ve && ae);
      decoder = alone.ctx->arena().allocated_bytes();
      vision = ve->worst_case_arena_bytes();
      audio = ae->worst_case_arena_bytes();
      EXPECT_EQ(ae->arena().allocated_bytes(), audio);
    }
    const std::string what = "n_ubatch " + std::to_string(n_ubatch) + ": decoder " + std::to_string(decoder) +
                             ", vision " + std::to_string(vision) + ", audio " + std::to_string(audio);
    EXPECT_NE(decoder > std::max(vision, audio), n_ubatch == 2) << what;  // each case has another largest
    auto devices = make_devices(64 * kMiB);
    Device& cpu = devices->cpu();
    ComputeArena& arena = devices->arena(cpu);
    opt.arena = &arena;
    OnDevice t = place(*devices, "cpu", text, opt);
    auto ve = encoder(*devices, "cpu", v, {.arena = &arena});
    auto ae = audio_encoder(*devices, "cpu", a, {.arena = &arena});
    ASSERT_TRUE(t.ctx && ve && ae) << what;
    EXPECT_EQ(&t.ctx->arena(), &arena);
    EXPECT_EQ(&ve->arena(), &arena);
    EXPECT_EQ(&ae->arena(), &arena);
    EXPECT_EQ(arena.allocated_bytes(), std::max({decoder, vision, audio})) << what;
    // Taking turns on the shared arena changes no embedding.
    auto own = audio_encoder(*devices, "cpu", a, {.cache_entries = 0});
    ASSERT_TRUE(own);
    const auto chunk = voiced_chunk(*a);
    ASSERT_TRUE(chunk);
    auto shared_out = ae->encode(*chunk);
    auto own_out = own->encode(*chunk);
    ASSERT_TRUE(shared_out.ok() && own_out.ok());
    EXPECT_TRUE(same_bits((*shared_out)->data, (*own_out)->data)) << what;
  }
}

}  // namespace
}  // namespace kiln
