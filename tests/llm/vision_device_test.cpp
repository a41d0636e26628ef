// Vision encoders on a device that is not the host (the sim device): image embeddings equal the
// CPU's bit for bit for both fixture projectors, the mmproj's weights are copied onto the device as
// an owner of their own, a text model and an mmproj on a sim0 budget that holds one of them take
// turns (every answer equal to the unconstrained one, the mmproj evicted and restored), the
// device's one compute arena is the larger of the encoder's and the decoder's worst cases, and an
// mmproj larger than the budget is refused with the numbers.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <optional>

#include "llm/media_prompt.h"
#include "llm/model_test_util.h"
#include "llm/vision_test_util.h"
#include "llm/vision_encoder.h"
#include "runtime/memory_breakdown.h"

namespace kiln {
namespace {

using namespace kiln::test;

constexpr size_t kMiB = size_t{1} << 20;
std::optional<OwnerMemory> owner_memory(const ResidencyManager& m, OwnerId id) {
  for (const OwnerMemory& o : m.breakdown().owners)
    if (o.owner == id) return o;
  return std::nullopt;
}

size_t weight_bytes(const OwnerMemory& o) { return o.bytes[static_cast<size_t>(MemoryKind::Weights)]; }


TEST(VisionOnSim, EmbeddingsEqualTheCpusBitForBit) {
  auto text = load(model_path("llama-spm-e128-f32.gguf"));
  ASSERT_TRUE(text);
  auto devices = make_devices(64 * kMiB);
  ASSERT_TRUE(devices);
  SimDevice& sim = sim_of(*devices);
  for (const char* file : {"mmproj-gemma3.gguf", "mmproj-mlp.gguf", "mmproj-gemma3-f16.gguf", "mmproj-mlp-f16.gguf"}) {
    auto v = mmproj(file, *text);
    ASSERT_TRUE(v);
    for (const FlashAttention fa : {FlashAttention::On, FlashAttention::Off}) {
      const std::string what = std::string(file) + (fa == FlashAttention::On ? ", flash" : "");
      const size_t sim_weights_before = sim.allocated_bytes(MemoryKind::Weights);
      auto cpu = encoder(*devices, "cpu", v, {.flash_attention = fa, .cache_entries = 0});
      auto on_sim = encoder(*devices, "sim0", v, {.flash_attention = fa, .cache_entries = 0});
      ASSERT_TRUE(cpu && on_sim) << what;
      // On the sim device every tensor is copied (the CPU reads them in place from the mapping).
      EXPECT_GE(sim.allocated_bytes(MemoryKind::Weights) - sim_weights_before, v->weight_bytes()) << what;
      for (const char* name : kImages) {
        const auto img = image(*v, name);
        ASSERT_TRUE(img);
        auto want = cpu->encode(*img);
        auto got = on_sim->encode(*img);
        ASSERT_TRUE(want.ok()) << want.error().message;
        ASSERT_TRUE(got.ok()) << got.error().message;
        EXPECT_EQ((*got)->n_tokens, (*want)->n_tokens);
        EXPECT_TRUE(same_bits((*got)->data, (*want)->data)) << what << ", " << name;
      }
    }
  }
}

// A text model with a context for prompts with images, and the mmproj's encoder, on `device` of
// `devices`, both in the device's one compute arena.
struct VisionOnDevice {
  OnDevice text;
  std::unique_ptr<VisionEncoder> encoder;
};

const ContextOptions kOpt{.n_ctx = 512, .n_batch = 256, .n_ubatch = 256, .input_embeddings = true};

VisionOnDevice place_vision(DeviceRegistry& devices, const std::string& device,
                            const std::shared_ptr<const Model>& model, const std::shared_ptr<const VisionModel>& v,
                            ContextOptions opt = kOpt) {
  VisionOnDevice o;
  Device& dev = **devices.find(device);
  opt.arena = &devices.arena(dev);
  o.text = place(devices, device, model, opt);
  o.encoder = encoder(devices, device, v, {.arena = opt.arena, .cache_entries = 0});
  return o;
}

// One request: the cache cleared, `prompt` decoded, 3 greedy steps; the logits of the last
// position and of each step.
std::vector<float> request(Context& c, VisionEncoder& e, const MediaPrompt& prompt) {
  c.clear();
  auto last = decode_media_prompt(c, &e, prompt, 0);
  EXPECT_TRUE(last.ok()) << last.error().message;
  if (!last.ok()) return {};
  std::vector<float> out(c.logits(*last).begin(), c.logits(*last).end());
  int32_t pos = static_cast<int32_t>(prompt.n_positions());
  for (int step = 0; step < 3; ++step)
    decode(c, {argmax({out.end() - c.n_vocab(), out.end()})}, pos++, 0, false, out);
  return out;
}

TEST(VisionOnSim, ModelAndMmprojTakeTurnsOnABudgetThatHoldsOne) {
  auto text = load(model_path("llama-spm-e128-f32.gguf"));
  ASSERT_TRUE(text);
  auto v = mmproj("mmproj-gemma3.gguf", *text);
  ASSERT_TRUE(v);
  // Image and text requests, alternately (each image request encodes: no cache).
  std::vector<MediaPrompt> prompts;
  for (int i = 0; i < 3; ++i) {
    const std::vector<std::shared_ptr<const PreparedImage>> one = {image(*v, kImages[i])};
    auto with_image = tokenize_media_prompt(text->tokenizer(), v.get(), "Look: <__media__> What is it?", one);
    auto plain = tokenize_media_prompt(text->tokenizer(), v.get(), "Tell me story number " + std::to_string(i), {});
    ASSERT_TRUE(with_image.ok() && plain.ok());
    prompts.push_back(std::move(*with_image));
    prompts.push_back(std::move(*plain));
  }
  // References, with room for both; what the manager counts with both resident, and the mmproj's
  // part of it (weights and input buffer).
  std::vector<std::vector<float>> want;
  size_t both = 0, mmproj_bytes = 0;
  {
    auto devices = make_devices(256 * kMiB);
    VisionOnDevice o = place_vision(*devices, "sim0", text, v);
    ASSERT_TRUE(o.text.ctx && o.encoder);
    for (const MediaPrompt& p : prompts) want.push_back(request(*o.text.ctx, *o.encoder, p));
    const ResidencyManager& manager = devices->residency(sim_of(*devices));
    both = manager.used();
    const auto vm = owner_memory(manager, o.encoder->owner());
    ASSERT_TRUE(vm);
    for (size_t b : vm->bytes) mmproj_bytes += b;
  }
  // A budget that holds the text model (with the arena) or the mmproj, not both: the text model
  // decodes only with every resident of the mmproj gone.
  const size_t budget = both - mmproj_bytes + 1024;
  ASSERT_GT(mmproj_bytes, 2048u);
  const double gib = static_cast<double>(budget) / static_cast<double>(size_t{1} << 30);
  auto devices = make_devices(256 * kMiB, {{.device = "sim0", .gib = gib}});
  SimDevice& sim = sim_of(*devices);
  ResidencyManager& manager = devices->residency(sim);
  sim.reset_peak_used();
  VisionOnDevice o = place_vision(*devices, "sim0", text, v);
  ASSERT_TRUE(o.text.ctx && o.encoder);
  const OwnerId text_owner = o.text.weights->owner(), vision_owner = o.encoder->owner();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const bool has_image = prompts[i].n_media() > 0;
    EXPECT_TRUE(same_bits(request(*o.text.ctx, *o.encoder, prompts[i]), want[i]))
        << "request " << i << (has_image ? " (image)" : " (text)");
    // The text model decodes last in every request: the mmproj left to make room for it.
    EXPECT_TRUE(manager.owner_resident(text_owner)) << "request " << i;
    EXPECT_FALSE(manager.owner_resident(vision_owner)) << "request " << i;
    const auto vm = owner_memory(manager, vision_owner);
    ASSERT_TRUE(vm);
    EXPECT_EQ(vm->name, "mmproj " + v->name());
    EXPECT_EQ(vm->evicted_residents, 2u) << "its weights and input buffer";
    EXPECT_EQ(weight_bytes(*vm), 0u);
  }
  EXPECT_LE(sim.peak_used(), manager.budget());
  EXPECT_LE(manager.used(), manager.budget());
  // An encode restores the mmproj (and evicts the text model to make room for it).
  ASSERT_TRUE(o.encoder->encode(*image(*v, "test-224.png")).ok());
  EXPECT_TRUE(manager.owner_resident(vision_owner));
  EXPECT_FALSE(manager.owner_resident(text_owner));
  const auto vm = owner_memory(manager, vision_owner);
  ASSERT_TRUE(vm);
  EXPECT_GE(weight_bytes(*vm), v->weight_bytes());
}

TEST(VisionOnSim, TheDevicesArenaIsTheLargerOfEncoderAndDecoderNotTheSum) {
  auto text = load(model_path("llama-spm-e128-f32.gguf"));
  ASSERT_TRUE(text);
  auto v = mmproj("mmproj-mlp.gguf", *text);
  ASSERT_TRUE(v);
  // Micro-batches of 2 tokens (the encoder's graph is the larger) and of 512 (the decoder's is).
  for (const int64_t n_ubatch : {int64_t{2}, int64_t{512}}) {
    ContextOptions opt = kOpt;
    opt.n_ctx = 640, opt.n_batch = opt.n_ubatch = n_ubatch;
    size_t decoder = 0;
    {
      auto devices = make_devices(256 * kMiB);
      OnDevice alone = place(*devices, "sim0", text, opt);  // in an arena of its own
      ASSERT_TRUE(alone.ctx);
      decoder = alone.ctx->arena().allocated_bytes();
    }
    auto devices = make_devices(256 * kMiB);
    VisionOnDevice o = place_vision(*devices, "sim0", text, v, opt);
    ASSERT_TRUE(o.text.ctx && o.encoder);
    const size_t encoder_bytes = o.encoder->worst_case_arena_bytes();
    const std::string what = "n_ubatch " + std::to_string(n_ubatch) + ": decoder " + std::to_string(decoder) +
                             ", encoder " + std::to_string(encoder_bytes);
    EXPECT_NE(decoder > encoder_bytes, n_ubatch == 2) << what;  // each case has a different larger one
    const ComputeArena& arena = devices->arena(sim_of(*devices));
    EXPECT_EQ(&o.encoder->arena(), &arena);
    EXPECT_EQ(arena.allocated_bytes(), std::max(decoder, encoder_bytes)) << what;
    // The memory breakdown shows one arena of that size under its own owner.
    const auto am = owner_memory(devices->residency(sim_of(*devices)), arena.resident_owner());
    ASSERT_TRUE(am) << what;
    const size_t counted = am->bytes[static_cast<size_t>(MemoryKind::Compute)];
    EXPECT_GE(counted, std::max(decoder, encoder_bytes)) << what;
    EXPECT_LT(counted, decoder + encoder_bytes) << what;
  }
}

TEST(VisionOnSim, AnMmprojAboveTheBudgetIsRefusedWithTheNumbers) {
  auto text = load(model_path("llama-spm-e128-f32.gguf"));
  ASSERT_TRUE(text);
  auto v = mmproj("mmproj-gemma3.gguf", *text);
  ASSERT_TRUE(v);
  auto devices = make_devices(64 * kMiB, {{.device = "sim0", .gib = 0.0005}});  // 512 KiB < 740 KiB
  SimDevice& sim = sim_of(*devices);
  auto e = VisionEncoder::create(v, devices->backend(sim), {});
  ASSERT_FALSE(e.ok());
  const std::string& msg = e.error().message;
  EXPECT_NE(msg.find("the weights of 'mmproj " + v->name() + "' do not fit"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sim0: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("more than the budget of " + format_memory_size(devices->residency(sim).budget())),
            std::string::npos)
      << msg;
  EXPECT_EQ(sim.memory_info().free, sim.memory_info().total) << "nothing left allocated";
  EXPECT_EQ(devices->residency(sim).used(), 0u);
}

}  // namespace
}  // namespace kiln
