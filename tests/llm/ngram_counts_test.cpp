// Lookup caches of ngram-cache drafting: llama.cpp's file format read and written (hand-made bytes,
// round trips, hostile files refused with the reason), and drafting from the dynamic and static
// caches beside the context's counts (their thresholds and the static cache's weights).
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "llm/speculative/ngram_cache.h"
#include "llm/speculative/ngram_counts.h"
#include "temp_dir.h"

namespace kiln {
namespace {

using Tokens = std::vector<int32_t>;
constexpr int32_t kVocab = 100;

void write_ints(const std::string& path, const std::vector<int32_t>& v) {
  std::ofstream out(path, std::ios::binary);
  for (int32_t x : v) {
    const auto u = static_cast<uint32_t>(x);
    const char b[4] = {static_cast<char>(u), static_cast<char>(u >> 8), static_cast<char>(u >> 16),
                       static_cast<char>(u >> 24)};
    out.write(b, 4);
  }
}

NgramCounts::Ngram ngram(const Tokens& t) {
  NgramCounts::Ngram g;
  g.tokens.fill(NgramCounts::kNoToken);
  for (size_t i = 0; i < t.size(); ++i) g.tokens[i] = t[i];
  return g;
}

TEST(NgramCounts, ReadsLlamaCppsFileFormat) {
  test::TempDir dir("kiln-ngram-");
  const std::string path = dir.path() + "/cache.bin";
  // Two records: [5, 6] followed by 7 (3 times) and 8 (once); [9] followed by 5 (twice).
  write_ints(path, {5, 6, -1, -1, 2, 7, 3, 8, 1, 9, -1, -1, -1, 1, 5, 2});
  auto c = NgramCounts::load(path, kVocab);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->size(), 2u);
  const NgramCounts::Following* f = c->find(ngram({5, 6}));
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f, (NgramCounts::Following{{7, 3}, {8, 1}}));
  ASSERT_NE(c->find(ngram({9})), nullptr);
  EXPECT_EQ(c->find(ngram({9}))->at(5), 2);
  EXPECT_EQ(c->find(ngram({6})), nullptr);
}

TEST(NgramCounts, SavedCountsReadBackEqualAndMergeAdds) {
  test::TempDir dir("kiln-ngram-");
  const std::string path = dir.path() + "/cache.bin";
  NgramCounts a;
  a.add(Tokens{1, 2, 3, 1, 2, 3, 1, 2, 4}, 1, 4, 9);
  ASSERT_TRUE(a.save(path).ok());
  EXPECT_EQ(std::filesystem::file_size(path) % 4, 0u);
  auto back = NgramCounts::load(path, kVocab);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->size(), a.size());
  EXPECT_EQ(*back->find(ngram({1, 2})), (NgramCounts::Following{{3, 2}, {4, 1}}));
  EXPECT_EQ(*back->find(ngram({2, 3, 1, 2})), (NgramCounts::Following{{3, 1}, {4, 1}}));
  back->merge(a);
  EXPECT_EQ(*back->find(ngram({1, 2})), (NgramCounts::Following{{3, 4}, {4, 2}}));
  EXPECT_EQ(back->size(), a.size());
  // Only whole files replace the old one: no temporary file stays beside it.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(NgramCounts, HostileFilesAreRefusedWithTheReason) {
  test::TempDir dir("kiln-ngram-");
  const std::string path = dir.path() + "/cache.bin";
  const struct {
    std::vector<int32_t> ints;
    const char* reason;
  } cases[] = {
      {{5, 6, -1, -1, 2, 7, 3}, "truncated record"},
      {{5, 6, -1}, "truncated record"},
      {{5, 6, -1, -1, 0}, "a record of no tokens"},
      {{5, 6, -1, -1, -3}, "a record of no tokens"},
      {{5, 6, -1, -1, 1, 7, 0}, "a count that is not positive"},
      {{5, 6, -1, -1, 1, kVocab, 1}, "a token outside the model's vocabulary"},
      {{5, kVocab + 7, -1, -1, 1, 7, 1}, "a token outside the model's vocabulary"},
      {{-1, -1, -1, -1, 1, 7, 1}, "an empty n-gram"},
      {{5, -1, 6, -1, 1, 7, 1}, "a malformed n-gram"},
      {{5, 6, -1, -1, 2000000000, 7, 1}, "truncated record"},  // a huge count of tokens is only read
  };
  for (const auto& c : cases) {
    write_ints(path, c.ints);
    auto r = NgramCounts::load(path, kVocab);
    ASSERT_FALSE(r.ok()) << c.reason;
    EXPECT_NE(r.error().message.find(c.reason), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
  }
  {
    std::ofstream odd(path, std::ios::binary);
    odd.write("\x05\x00\x00", 3);  // not a whole field
  }
  EXPECT_NE(NgramCounts::load(path, kVocab).error().message.find("truncated record"), std::string::npos);
  EXPECT_NE(NgramCounts::load(dir.path() + "/missing.bin", kVocab).error().message.find("No such file"),
            std::string::npos);
  write_ints(path, {});
  auto empty = NgramCounts::load(path, kVocab);
  ASSERT_TRUE(empty.ok()) << "an empty file is an empty cache";
  EXPECT_EQ(empty->size(), 0u);
}

// The dynamic cache drafts where the context has no counts yet, with the strict thresholds: a
// 3-gram needs 2 samples and 66% of them.
TEST(NgramCacheLookup, TheDynamicCacheDraftsWithStrictThresholds) {
  NgramCounts once, twice;
  once.add(Tokens{1, 2, 3, 4, 5}, 1, 4, 5);
  twice.add(Tokens{1, 2, 3, 4, 5}, 1, 4, 5);
  twice.merge(once);
  const Tokens history = {9, 1, 2};
  EXPECT_TRUE(NgramCacheDrafter().draft(history, 3).empty()) << "the context alone has seen nothing";
  EXPECT_TRUE(NgramCacheDrafter(&once).draft(history, 3).empty()) << "one sample is below every strict threshold";
  EXPECT_EQ(NgramCacheDrafter(&twice).draft(history, 3), (Tokens{4, 5}));
}

// The static cache's 2-gram counts weigh the context's candidates (100 x their count; 1 when
// absent), and alone they draft with the lax 2-gram thresholds.
TEST(NgramCacheLookup, TheStaticCacheWeighsCandidatesAndDraftsAlone) {
  // The context after [7]: 8 once, 9 once: 50%, below the 66% a 1-gram needs.
  const Tokens history = {7, 8, 0, 7, 9, 0, 5};
  EXPECT_TRUE(NgramCacheDrafter().draft(history, 7).empty());
  // Static counts after [5, 7] favour 9: the context's weighed best is 9, still 1 of 2 samples, so
  // the static cache drafts alone: [5, 7] -> 9 (3 of 4 samples, above the 2-gram's 50%).
  NgramCounts fixed;
  fixed.add(Tokens{5, 7, 9, 5, 7, 9, 5, 7, 9, 5, 7, 8}, 2, 2, 12);
  const Tokens d = NgramCacheDrafter(nullptr, &fixed).draft(history, 7);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d[0], 9);
  // The static counts decide a tie in the context: after [2, 3] the context has seen 4 once and 6
  // once (50%, enough for a 2-gram); the static cache's count of [2, 3] -> X makes X the draft.
  const Tokens tie = {2, 3, 4, 2, 3, 6, 2};
  for (int32_t preferred : {4, 6}) {
    NgramCounts prefer;
    prefer.add(Tokens{2, 3, preferred}, 2, 2, 3);
    const Tokens weighed = NgramCacheDrafter(nullptr, &prefer).draft(tie, 3);
    ASSERT_FALSE(weighed.empty()) << preferred;
    EXPECT_EQ(weighed[0], preferred);
  }
}

// Counting token by token (n_new = 1 after each token) gives the counts of the whole text at once,
// as llama-lookup's context cache.
TEST(NgramCounts, CountingTokenByTokenEqualsCountingTheWholeText) {
  const Tokens text = {1, 2, 3, 1, 2, 4, 1, 2, 3, 5};
  NgramCounts whole, stepwise;
  whole.add(text, 1, 4, text.size());
  stepwise.add(std::span(text).first(3), 1, 4, 3);
  for (size_t i = 3; i < text.size(); ++i) stepwise.add(std::span(text).first(i + 1), 1, 4, 1);
  EXPECT_EQ(stepwise.size(), whole.size());
  for (const Tokens& g : {Tokens{1, 2}, Tokens{2}, Tokens{1, 2, 3}, Tokens{3, 1, 2, 4}})
    EXPECT_EQ(*stepwise.find(ngram(g)), *whole.find(ngram(g)));
  EXPECT_EQ(whole.find(ngram({1, 2}))->at(3), 2);
}

}  // namespace
}  // namespace kiln
