// Images through an mmproj against llama.cpp's libmtmd (tests/conformance/data/mtmd: outputs of
// tools/fixtures/mtmd_oracle.c for the fixture text model llama-spm-e128-f32): the prompt's chunk
// layout and token ids, the image embeddings (within 1e-3 of the largest value), the last
// position's logits (the conformance tolerances) and 8 greedy tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>

#include "conformance/reference_check.h"
#include "llm/cpu_engine.h"
#include "llm/media_prompt.h"
#include "llm/vision_encoder.h"
#include "test_data.h"

namespace kiln {
namespace {

const std::string kData = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd/";
// The text model the fixture mmprojs project into.
const std::string kTextModel = test_data::path("models/llama-spm-e128-f32.gguf");

struct VisionCase {
  std::string ref;     // NAME of NAME.ref.json / NAME.embd.f32
  std::string mmproj;  // file in kData
  bool flash;          // llama.cpp's defaults (flash attention, F16 KV) instead of the exact path
};

void PrintTo(const VisionCase& c, std::ostream* os) { *os << c.ref; }

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

std::vector<float> read_floats(const std::string& path) {
  const std::vector<uint8_t> b = read_file(path);
  std::vector<float> f(b.size() / 4);
  std::memcpy(f.data(), b.data(), f.size() * 4);
  return f;
}

class VisionConformance : public ::testing::TestWithParam<VisionCase> {};

TEST_P(VisionConformance, MatchesLlamaCpp) {
  const VisionCase& vc = GetParam();
  const auto ref = testing::load_json(kData + vc.ref + ".ref.json");
  auto model = Model::load(kTextModel);
  ASSERT_TRUE(model.ok()) << model.error().message;
  auto vision = VisionModel::load(kData + vc.mmproj, **model);
  ASSERT_TRUE(vision.ok()) << vision.error().message;

  CpuEngine engine(2);
  ComputeArena arena(engine.device, "shared");
  ContextOptions co;
  co.n_ctx = 1024;
  co.type_k = co.type_v = vc.flash ? DType::F16 : DType::F32;
  co.flash_attention = vc.flash ? FlashAttention::On : FlashAttention::Off;
  co.input_embeddings = true;
  co.arena = &arena;
  auto ctx = Context::create(*model, engine.backend, co);
  ASSERT_TRUE(ctx.ok()) << ctx.error().message;
  auto encoder = VisionEncoder::create(*vision, engine.backend,
                                       {.flash_attention = co.flash_attention, .arena = &arena});
  ASSERT_TRUE(encoder.ok()) << encoder.error().message;

  // The prompt's chunks: text token ids and the image's place.
  auto image = (*vision)->prepare_image(read_file(kData + ref["image"].get<std::string>()));
  ASSERT_TRUE(image.ok()) << image.error().message;
  const std::shared_ptr<const PreparedImage> images[] = {*image};
  auto prompt = tokenize_media_prompt((*model)->tokenizer(), vision->get(), ref["prompt"].get<std::string>(), images,
                                      {.add_special = true, .parse_special = true});
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  const auto& chunks = ref["chunks"];
  ASSERT_EQ(prompt->chunks.size(), chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const PromptChunk& c = prompt->chunks[i];
    if (chunks[i]["type"] == "text") {
      EXPECT_EQ(c.tokens, chunks[i]["tokens"].get<std::vector<int32_t>>()) << "chunk " << i;
    } else {
      ASSERT_NE(c.image, nullptr) << "chunk " << i;
      EXPECT_EQ(c.image->n_tokens, chunks[i]["n_tokens"].get<int64_t>());
      EXPECT_EQ((*vision)->markup().non_causal, chunks[i]["non_causal"].get<bool>());
    }
  }
  EXPECT_EQ(prompt->n_positions(), ref["n_past"].get<int64_t>());

  // The image's embeddings.
  auto embd = (*encoder)->encode(**image);
  ASSERT_TRUE(embd.ok()) << embd.error().message;
  const std::vector<float> want = read_floats(kData + vc.ref + ".embd.f32");
  const auto shape = ref["image_embd_shape"].get<std::vector<int64_t>>();
  ASSERT_EQ((*embd)->n_tokens, shape[0]);
  ASSERT_EQ((*embd)->n_embd, shape[1]);
  ASSERT_EQ((*embd)->data.size(), want.size());
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(want[i])));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>((*embd)->data[i]) - want[i]));
  }
  std::printf("[ %s ] image embeddings: max |diff| %.3g, relative to max |ref| %.3g\n", vc.ref.c_str(), max_diff,
              max_diff / max_ref);
  EXPECT_LE(max_diff / max_ref, 1e-3);

  // The last position's logits and the greedy continuation.
  auto last = decode_media_prompt(**ctx, encoder->get(), *prompt, 0);
  ASSERT_TRUE(last.ok()) << last.error().message;
  testing::LogitComparison cmp(vc.flash ? testing::kF16Fa : testing::kF32Tight);
  cmp.set_vocab(static_cast<int>((*ctx)->n_vocab()));
  std::vector<float> logits((*ctx)->logits(*last).begin(), (*ctx)->logits(*last).end());
  cmp.compare_row(ref["logits_top"], logits.data(), "last position");
  std::vector<int32_t> greedy;
  for (int32_t pos = static_cast<int32_t>(prompt->n_positions()); greedy.size() < 8; ++pos) {
    const auto best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    greedy.push_back(best);
    Batch b;
    b.add(best, pos, 0, true);
    const Status st = (*ctx)->decode(b);
    ASSERT_TRUE(st.ok()) << st.error().message;
    logits.assign((*ctx)->logits(0).begin(), (*ctx)->logits(0).end());
  }
  EXPECT_EQ(greedy, ref["greedy_tokens"].get<std::vector<int32_t>>());
  cmp.finish(vc.ref);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VisionConformance,
                         ::testing::Values(VisionCase{"gemma3-test-224", "mmproj-gemma3.gguf", false},
                                           VisionCase{"gemma3-test-224-fa", "mmproj-gemma3.gguf", true},
                                           VisionCase{"mlp-test-224", "mmproj-mlp.gguf", false},
                                           VisionCase{"mlp-test-224-fa", "mmproj-mlp.gguf", true},
                                           // Resize and padding paths, F16 weights, pooling by 2, a
                                           // JPEG, an image first in the prompt (make_refs.sh).
                                           VisionCase{"gemma3-300x200", "mmproj-gemma3.gguf", false},
                                           VisionCase{"mlp-100x150", "mmproj-mlp.gguf", false},
                                           VisionCase{"gemma3-f16-photo", "mmproj-gemma3-f16.gguf", false},
                                           VisionCase{"mlp-f16-300x200-fa", "mmproj-mlp-f16.gguf", true}),
                         [](const auto& info) {
                           std::string n = info.param.ref;
                           for (char& c : n) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return n;
                         });

}  // namespace
}  // namespace kiln
