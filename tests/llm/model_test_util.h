// Helpers of the tests that run fixture models on devices: loading, decoding a run of tokens,
// greedy choice, bitwise comparison of logits.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "llm/context.h"

namespace kiln::test {

inline const std::string kModels = std::string(KILN_SHARED_DIR) + "/fixtures/models/";

inline std::shared_ptr<const Model> load(const std::string& path) {
  auto m = Model::load(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? *m : nullptr;
}

// Decodes `toks` of sequence `seq` from position pos0 and appends the logits of the marked tokens
// (every token, or the last) to `out`.
inline void decode(Context& c, const std::vector<int32_t>& toks, int32_t pos0, int32_t seq, bool all,
                   std::vector<float>& out) {
  Batch b;
  for (size_t i = 0; i < toks.size(); ++i)
    b.add(toks[i], pos0 + static_cast<int32_t>(i), seq, all || i + 1 == toks.size());
  const Status st = c.decode(b);
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (size_t i = 0; i < toks.size(); ++i) {
    const auto l = c.logits(i);
    out.insert(out.end(), l.begin(), l.end());
  }
}

inline int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// `n` token ids spread over the vocabulary (the same for any tokenizer).
inline std::vector<int32_t> spread_tokens(const Context& c, size_t n) {
  std::vector<int32_t> t;
  for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7919 + 11) % static_cast<size_t>(c.n_vocab())));
  return t;
}

}  // namespace kiln::test
