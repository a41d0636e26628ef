// Context behaviour beyond conformance: bad input, a full context, sequence edits, context shift
// and state save/load, on a small fixture model.
#include "llm/context.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cmath>
#include <fstream>

#include "llm/cpu_engine.h"
#include "test_data.h"

namespace kiln {
namespace {

std::shared_ptr<const Model> fixture(const std::string& stem) {
  auto m = Model::load(test_data::path("models/" + stem + ".gguf"));
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : nullptr;
}

class ContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = fixture("llama-spm-e128-f32");
    ASSERT_TRUE(model_);
  }
  std::unique_ptr<Context> make(int64_t n_ctx, DType kv = DType::F32, int64_t n_ubatch = 16) {
    ContextOptions opt;
    opt.n_ctx = n_ctx;
    opt.n_ubatch = n_ubatch;
    opt.type_k = opt.type_v = kv;
    auto c = Context::create(model_, engine_.backend, opt);
    EXPECT_TRUE(c.ok()) << c.error().message;
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::vector<float> decode_seq(Context& c, const std::vector<int32_t>& toks, int32_t pos0, int32_t seq) {
    Batch b;
    for (size_t i = 0; i < toks.size(); ++i) b.add(toks[i], pos0 + static_cast<int32_t>(i), seq, i + 1 == toks.size());
    const Status st = c.decode(b);
    EXPECT_TRUE(st.ok()) << st.error().message;
    const auto l = c.logits(toks.size() - 1);
    return {l.begin(), l.end()};
  }
  std::vector<int32_t> prompt() const { return model_->tokenizer().tokenize("In the beginning was the word", true, false); }

  CpuEngine engine_{2};
  std::shared_ptr<const Model> model_;
};

TEST_F(ContextTest, RejectsBadBatchesWithoutChangingTheCache) {
  auto c = make(64);
  ASSERT_TRUE(c);
  Batch b;
  b.add(1, 0, 0, true);
  b.add(static_cast<int32_t>(c->n_vocab()), 1, 0, true);
  Status st = c->decode(b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("outside the vocabulary"), std::string::npos) << st.error().message;
  EXPECT_EQ(c->kv().n_used(), 0);
  Batch neg;
  neg.add(1, -1, 0, true);
  EXPECT_FALSE(c->decode(neg).ok());
  Batch bad_seq;
  bad_seq.add(1, 0, kMaxSequences, true);
  EXPECT_FALSE(c->decode(bad_seq).ok());
  EXPECT_FALSE(c->decode(Batch{}).ok());
  EXPECT_EQ(c->kv().n_used(), 0);
}

TEST_F(ContextTest, FullContextIsAClearError) {
  auto c = make(8);  // its cache: a whole KV block, 64 cells
  ASSERT_TRUE(c);
  EXPECT_EQ(c->n_ctx(), 8);
  ASSERT_EQ(c->kv().size(), KvCache::kBlockCells);
  constexpr int kCells = static_cast<int>(KvCache::kBlockCells);
  Batch b;
  for (int i = 0; i <= kCells; ++i) b.add(1, i, 0, false);
  const Status st = c->decode(b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("the context is full"), std::string::npos) << st.error().message;
  Batch fits;
  for (int i = 0; i < kCells; ++i) fits.add(1, i, 0, i == kCells - 1);
  EXPECT_TRUE(c->decode(fits).ok());
  Batch more;
  more.add(1, kCells, 0, true);
  EXPECT_FALSE(c->decode(more).ok());
}

TEST_F(ContextTest, RemovingASequenceTailRecomputesTheSameLogits) {
  auto c = make(64);
  ASSERT_TRUE(c);
  const auto toks = prompt();
  const int32_t last = static_cast<int32_t>(toks.size()) - 1;
  // The last token alone, as it is decoded again below (F32 weights take tinyBLAS's order in a
  // batch of two rows or more, as in llama.cpp, and the one-token order alone).
  decode_seq(*c, std::vector<int32_t>(toks.begin(), toks.end() - 1), 0, 0);
  const auto first = decode_seq(*c, {toks.back()}, last, 0);
  // Drop the last token and decode it again: identical logits.
  c->seq_rm(0, last, -1);
  EXPECT_EQ(c->seq_pos_max(0), last - 1);
  const auto again = decode_seq(*c, {toks.back()}, last, 0);
  EXPECT_EQ(first, again);
}

// Releasing the host output buffers drops the last outputs and nothing else: the cache stays, and
// the next decode gives the logits it would have given.
TEST_F(ContextTest, ReleasedHostBuffersComeBackWithTheNextDecode) {
  auto c = make(64), fresh = make(64);
  ASSERT_TRUE(c && fresh);
  const auto toks = prompt();
  const int32_t last = static_cast<int32_t>(toks.size()) - 1;
  decode_seq(*c, std::vector<int32_t>(toks.begin(), toks.end() - 1), 0, 0);
  ASSERT_FALSE(c->logits(static_cast<size_t>(last) - 1).empty());
  c->release_host_buffers();
  EXPECT_TRUE(c->logits(static_cast<size_t>(last) - 1).empty());
  EXPECT_EQ(c->seq_pos_max(0), last - 1);
  decode_seq(*fresh, std::vector<int32_t>(toks.begin(), toks.end() - 1), 0, 0);
  EXPECT_EQ(decode_seq(*c, {toks.back()}, last, 0), decode_seq(*fresh, {toks.back()}, last, 0));
}

TEST_F(ContextTest, CopiedSequencesShareTheirPrefix) {
  auto c = make(64);
  ASSERT_TRUE(c);
  auto toks = prompt();
  const int32_t tail = toks.back();
  toks.pop_back();
  decode_seq(*c, toks, 0, 0);
  c->seq_cp(0, 1, -1, -1);
  const auto a = decode_seq(*c, {tail}, static_cast<int32_t>(toks.size()), 0);
  const auto b = decode_seq(*c, {tail}, static_cast<int32_t>(toks.size()), 1);
  EXPECT_EQ(a, b);
  c->seq_keep(1);
  EXPECT_EQ(c->seq_pos_max(0), -1);
  EXPECT_EQ(c->seq_pos_max(1), static_cast<int32_t>(toks.size()));
}

// A sequence's cells stay in position order whatever else the cache holds, and packing the cache
// when its end is reached keeps that order: flash attention (which sums keys in cell order) then
// gives the same bits as in a cache of its own. Here another sequence leaves a hole in front of
// the prompt, and the generated tokens run past the end of a small cache.
TEST_F(ContextTest, HolesAndCompactionDoNotChangeASequencesLogits) {
  for (DType kv : {DType::F32, DType::F16}) {
    constexpr int64_t kCells = 24;
    auto alone = make(kCells, kv);
    auto shared = make(kCells, kv);
    ASSERT_TRUE(alone && shared);
    ASSERT_EQ(alone->attention_path(), AttentionPath::Flash);
    const auto toks = prompt();
    decode_seq(*shared, std::vector<int32_t>(8, toks.front()), 0, 3);  // cells 0..7
    auto expect = decode_seq(*alone, toks, 0, 0);
    auto got = decode_seq(*shared, toks, 0, 0);  // after the other sequence's cells
    shared->seq_rm(3, -1, -1);                   // a hole in front of the prompt
    int32_t pos = static_cast<int32_t>(toks.size());
    for (; pos < kCells; ++pos) {
      ASSERT_EQ(got, expect) << "kv " << dtype_name(kv) << ", position " << pos;
      const int32_t next = toks[static_cast<size_t>(pos) % toks.size()];
      expect = decode_seq(*alone, {next}, pos, 0);
      got = decode_seq(*shared, {next}, pos, 0);  // fills the cache's end, then compacts
    }
    EXPECT_EQ(got, expect) << "kv " << dtype_name(kv);
    EXPECT_EQ(shared->seq_pos_max(0), kCells - 1);
  }
}

// A sequence's K and V sit at the offsets of their positions in blocks of its own, so a prompt
// chunk of 64 tokens or more (the tiled attention, whose tiles of 64 keys start at cell 0) and
// every token after it give the same bits wherever its blocks lie: after another sequence's cells,
// interleaved with another sequence's blocks, and after the blocks are packed to the front.
TEST_F(ContextTest, ASequencesBitsDoNotDependOnWhereItsBlocksLie) {
  for (DType kv : {DType::F32, DType::F16}) {
    auto alone = make(256, kv, 512), shared = make(256, kv, 512);
    ASSERT_TRUE(alone && shared);
    std::vector<int32_t> toks;
    for (int i = 0; i < 100; ++i) toks.push_back(10 + (i * 37) % 200);
    const std::vector<int32_t> first(toks.begin(), toks.begin() + 64), rest(toks.begin() + 64, toks.end());
    const auto expect_first = decode_seq(*alone, first, 0, 0);
    const auto expect_rest = decode_seq(*alone, rest, 64, 0);
    decode_seq(*shared, std::vector<int32_t>(37, 9), 0, 1);  // sequence 1: block 0
    EXPECT_EQ(decode_seq(*shared, first, 0, 0), expect_first) << "kv " << dtype_name(kv);  // block 1
    decode_seq(*shared, std::vector<int32_t>(64, 9), 37, 1);  // the rest of block 0, then block 2
    EXPECT_EQ(decode_seq(*shared, rest, 64, 0), expect_rest) << "kv " << dtype_name(kv);  // block 3
    shared->seq_rm(1, -1, -1);
    // Position 128 takes a block after block 3: there is none, so blocks 1 and 3 move to 0 and 1.
    for (int32_t pos = 100; pos < 140; ++pos) {
      const int32_t next = toks[static_cast<size_t>(pos) % toks.size()];
      ASSERT_EQ(decode_seq(*shared, {next}, pos, 0), decode_seq(*alone, {next}, pos, 0))
          << "kv " << dtype_name(kv) << ", position " << pos;
    }
  }
}

// Room is counted in blocks: a sequence's next tokens take none while they fit its last block,
// and a block shared after seq_cp goes on for a sequence that sees all of its tokens.
TEST_F(ContextTest, RoomIsCountedInBlocks) {
  auto c = make(256);
  ASSERT_TRUE(c);
  const KvCache& kv = c->kv();
  EXPECT_EQ(kv.free_cells(), 256);
  decode_seq(*c, std::vector<int32_t>(10, 9), 0, 0);  // block 0
  EXPECT_EQ(kv.free_cells(), 192);
  EXPECT_EQ(kv.cells_to_grow(0, 10, 54), 0);
  EXPECT_EQ(kv.cells_to_grow(0, 10, 55), 64);
  EXPECT_EQ(kv.cells_to_grow(0, 10, 200), 192);
  EXPECT_EQ(kv.cells_to_grow(1, 0, 1), 64);
  EXPECT_EQ(kv.tokens_within(0, 10, 63), 54);
  EXPECT_EQ(kv.tokens_within(0, 10, 130), 54 + 128);
  EXPECT_EQ(kv.tokens_within(1, 0, 64), 64);
  const std::vector<int32_t> positions = {0, 5, 63, 64, 200};
  EXPECT_EQ(KvCache::cells_for_positions(positions), 3 * 64);
  decode_seq(*c, {9, 9, 9}, 0, 1);  // block 1
  EXPECT_EQ(kv.free_cells(), 128);
  EXPECT_EQ(kv.cells_held_only_by(uint64_t{1} << 1), 64);
  EXPECT_EQ(kv.cells_held_only_by(0b11), 128);
  c->seq_cp(0, 2, -1, -1);
  EXPECT_EQ(kv.cells_held_only_by(0b01), 0);
  EXPECT_EQ(kv.cells_held_only_by(0b101), 64);
  EXPECT_EQ(kv.cells_to_grow(2, 10, 1), 0);
  decode_seq(*c, {9}, 10, 2);  // sequence 2 goes on in block 0; sequence 0 then needs a block
  EXPECT_EQ(kv.cells_to_grow(0, 10, 1), 64);
}

TEST_F(ContextTest, ShiftedKeysMatchAFreshDecodeAtTheNewPositions) {
  auto c = make(64);
  ASSERT_TRUE(c);
  const auto toks = prompt();
  const int32_t n = static_cast<int32_t>(toks.size());
  // Decode at positions 10.., then shift back by 10: the cache should equal one decoded at 0..
  Batch b;
  for (int32_t i = 0; i < n; ++i) b.add(toks[static_cast<size_t>(i)], 10 + i, 0, false);
  ASSERT_TRUE(c->decode(b).ok());
  ASSERT_TRUE(c->seq_add(0, 0, -1, -10).ok());
  const auto shifted = decode_seq(*c, {toks.front()}, n, 0);
  auto fresh_ctx = make(64);
  decode_seq(*fresh_ctx, toks, 0, 0);
  const auto fresh = decode_seq(*fresh_ctx, {toks.front()}, n, 0);
  ASSERT_EQ(shifted.size(), fresh.size());
  double worst = 0;
  for (size_t i = 0; i < fresh.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(shifted[i] - fresh[i])));
  EXPECT_LT(worst, 1e-3);
}

TEST_F(ContextTest, SavedSequenceRestoresBitExact) {
  for (DType kv : {DType::F32, DType::F16}) {
    auto c = make(64, kv);
    ASSERT_TRUE(c);
    auto toks = prompt();
    const int32_t tail = toks.back();
    toks.pop_back();
    decode_seq(*c, toks, 0, 0);
    const std::string path = std::string(KILN_BINARY_DIR) + "/context_test_state.bin";
    ASSERT_TRUE(c->save_sequence(0, toks, path).ok());
    const auto expect = decode_seq(*c, {tail}, static_cast<int32_t>(toks.size()), 0);

    auto other = make(64, kv);
    decode_seq(*other, {1, 2, 3}, 0, 5);  // unrelated content, so the restore lands elsewhere
    auto restored = other->load_sequence(2, path);
    ASSERT_TRUE(restored.ok()) << restored.error().message;
    EXPECT_EQ(*restored, toks);
    const auto got = decode_seq(*other, {tail}, static_cast<int32_t>(toks.size()), 2);
    EXPECT_EQ(expect, got);

    // A truncated file is refused and the context keeps serving.
    {
      std::ifstream in(path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
    }
    auto bad = other->load_sequence(3, path);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("truncated"), std::string::npos) << bad.error().message;
    std::remove(path.c_str());
  }
}

// A sequence parked in host memory (the server's full KV pool) and put back into cells elsewhere,
// around another sequence's, continues with the logits it would have had; a cache without room
// for it says so and keeps serving.
TEST_F(ContextTest, SequenceCellsCopiedOutAndBackAreBitExact) {
  for (DType kv : {DType::F32, DType::F16}) {
    constexpr int32_t kCells = 64;
    auto c = make(kCells, kv);
    ASSERT_TRUE(c);
    auto toks = prompt();
    const int32_t tail = toks.back();
    toks.pop_back();
    const auto n = static_cast<int32_t>(toks.size());
    decode_seq(*c, toks, 0, 1);
    auto cells = c->copy_sequence_cells(1);
    ASSERT_TRUE(cells.ok()) << cells.error().message;
    ASSERT_EQ(cells->size(), n);
    const auto expect = decode_seq(*c, {tail}, n, 1);
    c->seq_rm(1, -1, -1);

    decode_seq(*c, {5, 6, 7}, 0, 4);  // another sequence takes the front cells
    ASSERT_TRUE(c->put_sequence_cells(1, *cells).ok());
    EXPECT_EQ(c->seq_pos_max(1), n - 1);
    EXPECT_EQ(decode_seq(*c, {tail}, n, 1), expect) << "kv " << dtype_name(kv);

    // No room: an error that says so; the other sequence is untouched.
    decode_seq(*c, std::vector<int32_t>(static_cast<size_t>(kCells - 3 - n - 1), 9), 3, 4);
    const Status full = c->put_sequence_cells(2, *cells);
    ASSERT_FALSE(full.ok());
    EXPECT_NE(full.error().message.find("full"), std::string::npos) << full.error().message;
    EXPECT_EQ(c->seq_pos_max(4), kCells - n - 2);
  }
}

// A stream decoding token after token builds one graph per KvCache::kPadCells cells and reuses
// its plan in between; every step's logits are those of a context that builds every step.
TEST_F(ContextTest, StepsOfOneShapeReuseOnePlanWithTheSameLogits) {
  std::unique_ptr<Context> ctx[2];
  for (int reuse = 0; reuse < 2; ++reuse) {
    ContextOptions opt;
    opt.n_ctx = 640;
    opt.n_ubatch = 16;
    opt.reuse_plans = reuse == 1;
    auto c = Context::create(model_, engine_.backend, opt);
    ASSERT_TRUE(c.ok()) << c.error().message;
    ctx[reuse] = std::move(*c);
  }
  const auto toks = prompt();
  const auto n_prompt = static_cast<int32_t>(toks.size());
  ASSERT_EQ(decode_seq(*ctx[0], toks, 0, 0), decode_seq(*ctx[1], toks, 0, 0));
  const int kSteps = 300;  // past cell 256: a second padded width
  int differing = 0;
  for (int i = 0; i < kSteps; ++i) {
    const int32_t tok = static_cast<int32_t>((7 * i + 3) % ctx[0]->n_vocab());
    differing += decode_seq(*ctx[0], {tok}, n_prompt + i, 0) != decode_seq(*ctx[1], {tok}, n_prompt + i, 0);
  }
  EXPECT_EQ(differing, 0) << "steps whose logits differ between reused and fresh plans";
  ASSERT_GT(ctx[1]->kv().n_kv(), KvCache::kPadCells);
  EXPECT_EQ(ctx[1]->kv().n_kv_padded(), 2 * KvCache::kPadCells);
  EXPECT_EQ(ctx[0]->graphs_built(), 1u + kSteps);
  EXPECT_EQ(ctx[1]->graphs_built(), 3u);  // the prompt, then one token at 256 and at 512 cells

  // Weights that move (released and rebuilt, as an eviction does) are not read at their old
  // address: the next step builds again and gives the logits of weights that stayed.
  auto weights = DeviceWeights::create(model_, engine_.device);
  ASSERT_TRUE(weights.ok()) << weights.error().message;
  ASSERT_GT((*weights)->buffer_bytes(), 0u);
  ContextOptions opt;
  opt.n_ctx = 64;
  opt.n_ubatch = 16;
  auto moved = Context::create(*weights, engine_.backend, opt);
  auto stayed = Context::create(model_, engine_.backend, opt);
  ASSERT_TRUE(moved.ok() && stayed.ok());
  decode_seq(**moved, toks, 0, 0);
  decode_seq(**stayed, toks, 0, 0);
  EXPECT_EQ(decode_seq(**moved, {5}, n_prompt, 0), decode_seq(**stayed, {5}, n_prompt, 0));
  const uint64_t built = (*moved)->graphs_built();
  const uint64_t generation = (*weights)->generation();
  (*weights)->release();
  ASSERT_TRUE((*weights)->rebuild().ok());
  EXPECT_GT((*weights)->generation(), generation);
  EXPECT_EQ(decode_seq(**moved, {6}, n_prompt + 1, 0), decode_seq(**stayed, {6}, n_prompt + 1, 0));
  EXPECT_EQ((*moved)->graphs_built(), built + 1);
}

// -c 0 in llama.cpp's sense (the whole training context) against the default (at most 4096).
TEST(ContextSize, ResolvesTheModelsTrainingContext) {
  HParams hp;
  hp.n_ctx_train = 8192;
  ContextOptions o;
  EXPECT_EQ(context_size(o, hp), 4096);
  o.n_ctx = ContextOptions::kTrainingContext;
  EXPECT_EQ(context_size(o, hp), 8192);
  o.n_ctx = 100;
  EXPECT_EQ(context_size(o, hp), 100);
  hp.n_ctx_train = 128;
  o.n_ctx = 0;
  EXPECT_EQ(context_size(o, hp), 128);
}

TEST(Model, LoadErrorsNameTheProblem) {
  auto missing = Model::load("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/model.gguf"), std::string::npos) << missing.error().message;
  auto vocab_only = Model::load(test_data::path("vocab/ggml-vocab-llama-spm.gguf"));
  ASSERT_FALSE(vocab_only.ok());
  EXPECT_NE(vocab_only.error().message.find("model:"), std::string::npos) << vocab_only.error().message;
}

}  // namespace
}  // namespace kiln
