// Vision beyond conformance (tests/conformance/vision_test.cpp): one compute arena shared by the
// text decoder and the vision encoder (the larger of the two, not their sum, with unchanged
// results), the encoder's weights and inputs as a resident owner of their own, the embedding
// cache, prompts with media markers, and refusals with messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>

#include "image/content_id.h"
#include "llm/cpu_engine.h"
#include "llm/media_prompt.h"
#include "llm/vision_encoder.h"
#include "ops/quant/kernels.h"
#include "runtime/residency.h"
#include "test_data.h"

namespace kiln {
namespace {

const std::string kMtmd = std::string(KILN_SOURCE_DIR) + "/tests/conformance/data/mtmd/";

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  return {std::istreambuf_iterator<char>(in), {}};
}

std::shared_ptr<const Model> text_model(const std::string& stem = "llama-spm-e128-f32") {
  auto m = Model::load(test_data::path("models/" + stem + ".gguf"));
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : nullptr;
}

class VisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = text_model();
    ASSERT_TRUE(model_);
    for (const char* p : {"gemma3", "mlp"}) {
      auto v = VisionModel::load(kMtmd + "mmproj-" + p + ".gguf", *model_);
      ASSERT_TRUE(v.ok()) << v.error().message;
      (std::string(p) == "gemma3" ? gemma3_ : mlp_) = *v;
    }
  }
  std::unique_ptr<Context> context(int64_t n_ctx, int64_t n_ubatch, ComputeArena* arena) {
    ContextOptions co;
    co.n_ctx = n_ctx;
    co.n_ubatch = n_ubatch;
    co.type_k = co.type_v = DType::F32;
    co.input_embeddings = true;
    co.arena = arena;
    auto c = Context::create(model_, engine_.backend, co);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::unique_ptr<VisionEncoder> encoder(const std::shared_ptr<const VisionModel>& v, ComputeArena* arena,
                                         size_t cache_images = 16) {
    auto e = VisionEncoder::create(v, engine_.backend, {.arena = arena, .cache_entries = cache_images});
    EXPECT_TRUE(e.ok()) << e.error().message;
    return e.ok() ? std::move(*e) : nullptr;
  }
  std::shared_ptr<const PreparedImage> image(const VisionModel& v, const char* file) {
    auto p = v.prepare_image(read_file(kMtmd + file));
    EXPECT_TRUE(p.ok()) << p.error().message;
    return p.ok() ? *p : nullptr;
  }
  MediaPrompt prompt(const VisionModel& v, const std::string& text,
                     std::vector<std::shared_ptr<const PreparedImage>> images) {
    auto p = tokenize_media_prompt(model_->tokenizer(), &v, text, images);
    EXPECT_TRUE(p.ok()) << p.error().message;
    return p.ok() ? std::move(*p) : MediaPrompt{};
  }
  // Decodes `p` into a fresh sequence 0 and returns the last position's logits.
  std::vector<float> last_logits(Context& c, VisionEncoder& e, const MediaPrompt& p) {
    c.clear();
    auto last = decode_media_prompt(c, &e, p, 0);
    EXPECT_TRUE(last.ok()) << last.error().message;
    if (!last.ok()) return {};
    return {c.logits(*last).begin(), c.logits(*last).end()};
  }

  CpuEngine engine_{2};
  std::shared_ptr<const Model> model_;
  std::shared_ptr<const VisionModel> gemma3_, mlp_;
};

TEST_F(VisionTest, OneArenaForDecoderAndEncoderIsTheLargerNotTheSum) {
  struct Shape {
    int64_t n_ctx, n_ubatch;
  };
  const MediaPrompt p = prompt(*mlp_, "USER: <__media__>Describe the image.", {image(*mlp_, "test-224.png")});
  // Micro-batches of 2 tokens (the encoder's graph is the larger) and of 512 (the decoder's is).
  for (const Shape s : {Shape{320, 2}, Shape{512, 512}}) {
    size_t alone_decoder = 0, alone_encoder = 0, alone_compute = 0;
    std::vector<float> want;
    {
      const size_t before = engine_.device.allocated_bytes(MemoryKind::Compute);
      auto c = context(s.n_ctx, s.n_ubatch, nullptr);
      auto e = encoder(mlp_, nullptr);
      ASSERT_TRUE(c && e);
      alone_decoder = c->arena().allocated_bytes();
      alone_encoder = e->arena().allocated_bytes();
      alone_compute = engine_.device.allocated_bytes(MemoryKind::Compute) - before;
      EXPECT_EQ(alone_encoder, e->worst_case_arena_bytes());
      want = last_logits(*c, *e, p);
    }
    for (bool encoder_first : {false, true}) {
      const std::string what =
          "n_ubatch " + std::to_string(s.n_ubatch) + (encoder_first ? ", encoder first" : "");
      const size_t compute_before = engine_.device.allocated_bytes(MemoryKind::Compute);
      ComputeArena shared(engine_.device, "shared");
      std::unique_ptr<Context> c;
      std::unique_ptr<VisionEncoder> e;
      if (encoder_first) e = encoder(mlp_, &shared);
      c = context(s.n_ctx, s.n_ubatch, &shared);
      if (!encoder_first) e = encoder(mlp_, &shared);
      ASSERT_TRUE(c && e);
      EXPECT_EQ(&c->arena(), &shared);
      EXPECT_EQ(&e->arena(), &shared);
      EXPECT_EQ(shared.allocated_bytes(), std::max(alone_decoder, alone_encoder)) << what;
      // The device holds one arena (plus the same two input buffers), not two: the smaller arena is
      // what sharing saves.
      const size_t compute = engine_.device.allocated_bytes(MemoryKind::Compute) - compute_before;
      EXPECT_EQ(alone_compute - compute, std::min(alone_decoder, alone_encoder)) << what;
      std::printf("[ %s ] decoder alone %zu, encoder alone %zu, shared %zu bytes\n", what.c_str(),
                  alone_decoder, alone_encoder, shared.allocated_bytes());
      // Taking turns on one arena changes no result.
      if (!encoder_first) {
        EXPECT_EQ(last_logits(*c, *e, p), want) << what;
      }
    }
  }
}

// The encoder's weights (the mmproj's mapped tensors) and input buffer are residents of their own
// owner: counted while resident, evicted alone (the text model's residents stay), and an image
// encoded after a restore gives the same bits.
TEST_F(VisionTest, EncoderWeightsAndInputsAreAResidentOwnerOfTheirOwn) {
  CpuEngine engine(2);
  ResidencyManager manager(engine.device, kNoBudget);  // declared first: outlives every resident
  auto find_owner = [&](OwnerId id) -> std::optional<OwnerMemory> {
    for (const OwnerMemory& o : manager.breakdown().owners)
      if (o.owner == id) return o;
    return std::nullopt;
  };
  auto e = VisionEncoder::create(gemma3_, engine.backend, {.cache_entries = 0});
  ASSERT_TRUE(e.ok()) << e.error().message;
  VisionEncoder& enc = **e;
  ASSERT_NE(enc.owner(), 0u);
  const auto img = image(*gemma3_, "test-224.png");
  ASSERT_TRUE(img);
  auto first = enc.encode(*img);
  ASSERT_TRUE(first.ok()) << first.error().message;

  const auto resident = find_owner(enc.owner());
  ASSERT_TRUE(resident);
  EXPECT_EQ(resident->name, "mmproj " + gemma3_->name());
  EXPECT_EQ(resident->bytes[static_cast<size_t>(MemoryKind::Weights)], gemma3_->weight_bytes());
  EXPECT_GT(resident->bytes[static_cast<size_t>(MemoryKind::Compute)], 0u);  // the input buffer
  EXPECT_EQ(resident->evicted_residents, 0u);

  const size_t before = manager.used();
  ASSERT_TRUE(manager.evict_owner(enc.owner()).ok());
  EXPECT_FALSE(manager.owner_resident(enc.owner()));
  const auto evicted = find_owner(enc.owner());
  ASSERT_TRUE(evicted);
  EXPECT_EQ(evicted->evicted_residents, 2u);
  EXPECT_EQ(manager.used(),
            before - gemma3_->weight_bytes() - resident->bytes[static_cast<size_t>(MemoryKind::Compute)]);

  // The next image restores both (the cache is off: it computes) and gives the same bits.
  auto again = enc.encode(*img);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_TRUE(manager.owner_resident(enc.owner()));
  EXPECT_EQ(manager.used(), before);
  ASSERT_EQ((*again)->data.size(), (*first)->data.size());
  EXPECT_EQ(std::memcmp((*again)->data.data(), (*first)->data.data(), (*first)->data.size() * sizeof(float)),
            0);
}

// The tensors the encoder's graphs read only as mul_mat weights take the kernels' layout (float
// rows split on AVX2 CPUs); the patch kernel (read through a reshape), norms and position
// embeddings stay plain.
// The embeddings are the conformance tests' (tests/conformance/vision_test.cpp), bit for bit the
// plain weights' (tests/ops/gemm_test.cpp, PreparedWeightsGiveThePlainWeightsBits).
TEST_F(VisionTest, MatMulWeightsOfTheMmprojTakeTheKernelsLayout) {
  auto f16 = VisionModel::load(kMtmd + "mmproj-mlp-f16.gguf", *model_);
  ASSERT_TRUE(f16.ok()) << f16.error().message;
  auto e = encoder(*f16, nullptr, 0);
  ASSERT_TRUE(e);
  const TensorLayout split = quant::cpu_has_avx2() ? TensorLayout::Split16 : TensorLayout::Plain;
  for (const char* name :
       {"v.blk.0.attn_q.weight", "v.blk.1.ffn_down.weight", "mm.0.weight", "mm.2.weight"}) {
    const Weight* w = e->weights().tensor(name);
    ASSERT_NE(w, nullptr) << name;
    EXPECT_EQ(w->view.layout, split) << name;
  }
  for (const char* name : {"v.patch_embd.weight", "v.blk.0.ln1.weight", "v.position_embd.weight"}) {
    const Weight* w = e->weights().tensor(name);
    ASSERT_NE(w, nullptr) << name;
    EXPECT_EQ(w->view.layout, TensorLayout::Plain) << name;
  }
  const auto img = image(**f16, "test-224.png");
  ASSERT_TRUE(img);
  EXPECT_TRUE(e->encode(*img).ok());
}

// The encoder's weights are held as VisionEncoderOptions::weights says (the commands pass the
// model's -t, --no-mmap and --mlock): copied on three threads, nothing is read from the mapped file,
// and an image gives the bits of the default placement.
TEST_F(VisionTest, EncoderWeightsTakeTheWeightOptionsGiven) {
  auto f16 = VisionModel::load(kMtmd + "mmproj-mlp-f16.gguf", *model_);
  ASSERT_TRUE(f16.ok()) << f16.error().message;
  VisionEncoderOptions copy_on_three{.cache_entries = 0};
  copy_on_three.weights.copy_all = true;
  copy_on_three.weights.prepare_threads = 3;
  auto mapped = VisionEncoder::create(*f16, engine_.backend, {.cache_entries = 0});
  auto copied = VisionEncoder::create(*f16, engine_.backend, copy_on_three);
  ASSERT_TRUE(mapped.ok() && copied.ok());
  EXPECT_GT((*mapped)->weights().mapped_bytes(), 0u);
  EXPECT_EQ((*copied)->weights().mapped_bytes(), 0u);
  EXPECT_GT((*copied)->weights().buffer_bytes(), (*mapped)->weights().buffer_bytes());
  const auto img = image(**f16, "test-224.png");
  ASSERT_TRUE(img);
  auto a = (*mapped)->encode(*img);
  auto b = (*copied)->encode(*img);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->data.size(), (*b)->data.size());
  EXPECT_EQ(std::memcmp((*a)->data.data(), (*b)->data.data(), (*a)->data.size() * sizeof(float)), 0);
}

TEST_F(VisionTest, EmbeddingsAreCachedByContent) {
  auto e = encoder(gemma3_, nullptr, 2);
  ASSERT_TRUE(e);
  const auto a = image(*gemma3_, "test-224.png"), a_again = image(*gemma3_, "test-224.png");
  const auto b = image(*gemma3_, "test-300x200.png"), c = image(*gemma3_, "photo-160x120.jpg");
  EXPECT_EQ(a->id, content_id(read_file(kMtmd + "test-224.png")));
  EXPECT_EQ(a->id, a_again->id);
  EXPECT_NE(a->id, b->id);
  auto first = e->encode(*a);
  auto second = e->encode(*a_again);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->get(), second->get());  // the same embeddings, not encoded again
  EXPECT_EQ(e->cache_stats().encoded, 1u);
  EXPECT_EQ(e->cache_stats().hits, 1u);
  // Least recently used first out: with room for 2, a b c pushes a out.
  ASSERT_TRUE(e->encode(*b).ok());
  ASSERT_TRUE(e->encode(*c).ok());
  EXPECT_EQ(e->cache_stats().entries, 2u);
  auto third = e->encode(*a);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(e->cache_stats().encoded, 4u);
  EXPECT_EQ((*third)->data, (*first)->data);  // recomputed, bit for bit
}

TEST_F(VisionTest, PromptsPlaceImagesAtTheirMarkers) {
  const auto img = image(*gemma3_, "test-224.png");
  const auto& tok = model_->tokenizer();
  auto text = [&](const std::string& s) { return tok.tokenize(s, false, true); };
  // Two images: the markup around each, text between, BOS first.
  const MediaPrompt p = prompt(*gemma3_, "A<__media__>B<__media__>", {img, img});
  ASSERT_EQ(p.chunks.size(), 5u);
  std::vector<int32_t> first = {tok.bos()};
  for (const char* piece : {"A", "<start_of_image>"}) {
    const auto t = text(piece);
    first.insert(first.end(), t.begin(), t.end());
  }
  EXPECT_EQ(p.chunks[0].tokens, first);
  EXPECT_EQ(p.chunks[1].image, img);
  std::vector<int32_t> middle;
  for (const char* piece : {"<end_of_image>", "B", "<start_of_image>"}) {
    const auto t = text(piece);
    middle.insert(middle.end(), t.begin(), t.end());
  }
  EXPECT_EQ(p.chunks[2].tokens, middle);
  EXPECT_EQ(p.chunks[3].image, img);
  EXPECT_EQ(p.chunks[4].tokens, text("<end_of_image>"));  // the prompt ends with the closing markup
  EXPECT_EQ(p.n_media(), 2u);
  // An audio file counts once, whatever its chunks: a file of two chunks, one of one, an image.
  MediaPrompt mixed;
  for (const char* id : {"a#0", "a#1", "b#0"}) {
    auto audio = std::make_shared<PreparedAudio>();
    audio->id = id;
    PromptChunk chunk;
    chunk.audio = audio;
    mixed.chunks.push_back(chunk);
  }
  PromptChunk image_chunk;
  image_chunk.image = img;
  mixed.chunks.push_back(image_chunk);
  EXPECT_EQ(mixed.n_media(), 3u);
  EXPECT_EQ(p.n_positions(), static_cast<int64_t>(first.size() + middle.size() + p.chunks[4].tokens.size()) +
                                 2 * img->n_tokens);
  // An image first: BOS is a chunk of its own (mlp has no markup).
  const auto mimg = image(*mlp_, "test-224.png");
  const MediaPrompt q = prompt(*mlp_, "<__media__>Hi", {mimg});
  ASSERT_EQ(q.chunks.size(), 3u);
  EXPECT_EQ(q.chunks[0].tokens, std::vector<int32_t>{tok.bos()});
  EXPECT_EQ(q.chunks[1].image, mimg);
  const auto flat = q.flat_tokens();
  EXPECT_EQ(static_cast<int64_t>(flat.size()), q.n_positions());
  EXPECT_EQ(flat[1], kMediaToken);
  EXPECT_EQ(flat[static_cast<size_t>(mimg->n_tokens)], kMediaToken);
  EXPECT_NE(flat[static_cast<size_t>(mimg->n_tokens) + 1], kMediaToken);

  // Markers and images must be as many; images need a vision model.
  const std::shared_ptr<const PreparedImage> one[] = {img};
  auto bad = tokenize_media_prompt(tok, gemma3_.get(), "no marker here", one);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("0 media markers (<__media__>) for 1 images"), std::string::npos)
      << bad.error().message;
  bad = tokenize_media_prompt(tok, nullptr, "<__media__>", one);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("--mmproj"), std::string::npos) << bad.error().message;
}

TEST_F(VisionTest, CommonPrefixNeverEndsInsideAnImage) {
  const auto a = image(*mlp_, "test-224.png"), b = image(*mlp_, "test-300x200.png");
  const MediaPrompt base = prompt(*mlp_, "Hi <__media__> there", {a});
  const int64_t n_text0 = static_cast<int64_t>(base.chunks[0].tokens.size());
  EXPECT_EQ(common_prefix(base, base), base.n_positions());
  EXPECT_EQ(common_prefix(base, prompt(*mlp_, "Hi <__media__> where", {a})), n_text0 + a->n_tokens + 1);
  EXPECT_EQ(common_prefix(base, prompt(*mlp_, "Hi <__media__> there", {b})), n_text0);
  EXPECT_EQ(common_prefix(base, prompt(*mlp_, "Hi", {})), n_text0 - 1);  // "Hi " ends in a space token
  // Decoding the rest after a shared prefix gives the logits of decoding it all.
  auto c = context(512, 64, nullptr);
  auto e = encoder(mlp_, nullptr);
  ASSERT_TRUE(c && e);
  const MediaPrompt next = prompt(*mlp_, "Hi <__media__> where are we?", {a});
  const std::vector<float> full = last_logits(*c, *e, next);
  c->clear();
  ASSERT_TRUE(decode_media_prompt(*c, e.get(), base, 0).ok());
  const int64_t keep = common_prefix(base, next);
  c->seq_rm(0, static_cast<int32_t>(keep), -1);
  auto last = decode_media_prompt(*c, e.get(), next, keep);
  ASSERT_TRUE(last.ok()) << last.error().message;
  const auto part = c->logits(*last);
  ASSERT_EQ(part.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) ASSERT_NEAR(part[i], full[i], 1e-5) << "logit " << i;
}

TEST_F(VisionTest, ContextRefusesBadEmbeddingBatches) {
  ContextOptions co;
  co.n_ctx = 64;
  co.n_ubatch = 8;
  auto plain = Context::create(model_, engine_.backend, co);
  ASSERT_TRUE(plain.ok());
  Batch b;
  const std::vector<float> row(static_cast<size_t>(model_->hparams().n_embd), 0.5f);
  b.add_embedding(row, 0, 0, true);
  Status st = (*plain)->decode(b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("without input_embeddings"), std::string::npos) << st.error().message;

  auto c = context(64, 8, nullptr);
  ASSERT_TRUE(c);
  Batch wide;
  wide.add_embedding(std::vector<float>(row.size() + 1, 0.5f), 0, 0, true);
  st = c->decode(wide);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("embedding values"), std::string::npos) << st.error().message;
  // An image whose tokens see each other both ways must fit one micro-batch.
  Batch big;
  big.causal = false;
  for (int i = 0; i < 9; ++i) big.add_embedding(row, i, 0, i == 8);
  st = c->decode(big);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("must fit one micro-batch (n_ubatch 8"), std::string::npos)
      << st.error().message;
  EXPECT_EQ(c->kv().n_used(), 0);
  big.embd.resize(8 * row.size());
  big.pos.resize(8), big.seq.resize(8), big.output.resize(8);
  EXPECT_TRUE(c->decode(big).ok());
}

// An mmproj rewritten in memory: metadata edits and dropped tensors.
std::vector<uint8_t> rewrite(const std::string& path, const std::function<void(GgufWriter&)>& edit,
                             const std::string& drop_tensor = "") {
  auto src = GgufFile::open(path);
  EXPECT_TRUE(src.ok());
  GgufWriter w;
  w.copy_metadata(**src);
  edit(w);
  for (const auto& t : (*src)->tensors()) {
    if (t.name != drop_tensor) {
      EXPECT_TRUE(w.add_tensor(t.name, t.type, std::span(t.ne.data(), static_cast<size_t>(t.n_dims))).ok());
    }
  }
  std::vector<uint8_t> out;
  EXPECT_TRUE(w.begin(out).ok());
  for (const auto& t : (*src)->tensors()) {
    if (t.name != drop_tensor) {
      EXPECT_TRUE(w.write_tensor_data((*src)->tensor_data(t)).ok());
    }
  }
  EXPECT_TRUE(w.finish().ok());
  return out;
}

TEST_F(VisionTest, LoadRefusesWhatItCannotRunWithAMessage) {
  auto expect = [&](const Result<std::shared_ptr<const VisionModel>>& r, const std::string& needle) {
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  };
  const std::string mlp = kMtmd + "mmproj-mlp.gguf";
  const auto idefics = rewrite(mlp, [](GgufWriter& w) { w.set_string("clip.projector_type", "idefics3"); });
  expect(VisionModel::from_memory(idefics, "idefics", *model_),
         "projector type 'idefics3' is not supported (kiln supports: gemma3, mlp)");
  const auto no_mm0 = rewrite(
      mlp, [](GgufWriter&) {}, "mm.0.weight");
  expect(VisionModel::from_memory(no_mm0, "no-mm0", *model_), "missing tensor 'mm.0.weight'");
  const auto audio = rewrite(mlp, [](GgufWriter& w) { w.set_bool("clip.has_vision_encoder", false); });
  expect(VisionModel::from_memory(audio, "audio", *model_), "no vision encoder");
  const auto tiled = rewrite(mlp, [](GgufWriter& w) {
    w.set_i32_array("clip.vision.image_grid_pinpoints", {336, 672});
  });
  expect(VisionModel::from_memory(tiled, "tiled", *model_), "image tiling");
  auto other = text_model("qwen2-e64-Q8_0");
  ASSERT_TRUE(other);
  expect(VisionModel::load(mlp, *other), "outputs embeddings of width 128 but the text model");
  expect(VisionModel::load(test_data::path("models/llama-spm-e128-f32.gguf"), *model_), "not 'clip'");
  expect(VisionModel::load(kMtmd + "missing.gguf", *model_), "mmproj: ");
  // Bad images are the caller's fault: the message names the problem.
  std::vector<uint8_t> png = read_file(kMtmd + "test-224.png");
  png.resize(png.size() / 2);
  auto img = mlp_->prepare_image(png);
  ASSERT_FALSE(img.ok());
  EXPECT_NE(img.error().message.find("image: truncated PNG"), std::string::npos) << img.error().message;
}

}  // namespace
}  // namespace kiln
