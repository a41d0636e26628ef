// Helpers shared by the GGUF tests: deep comparison of parsed files and rewriting through GgufWriter.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/gguf.h"

namespace kiln::gguf_test {

// Values equal with floats compared bit for bit (NaN payloads included).
inline bool same_value(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case GgufType::STRING:
      return a.str == b.str;
    case GgufType::ARRAY:
      if (a.elem_type != b.elem_type || a.arr.size() != b.arr.size()) return false;
      for (size_t i = 0; i < a.arr.size(); ++i) {
        if (!same_value(a.arr[i], b.arr[i])) return false;
      }
      return true;
    default:
      return std::memcmp(&a.num, &b.num, sizeof a.num) == 0;
  }
}

// Asserts both files hold the same metadata (order, types, values) and the same tensors
// (order, names, types, shapes, bytes).
inline void expect_same_content(const GgufFile& a, const GgufFile& b) {
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (size_t i = 0; i < a.metadata().size(); ++i) {
    EXPECT_EQ(a.metadata()[i].key, b.metadata()[i].key);
    EXPECT_TRUE(same_value(a.metadata()[i].value, b.metadata()[i].value)) << a.metadata()[i].key;
  }
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const GgufTensorInfo& ta = a.tensors()[i];
    const GgufTensorInfo& tb = b.tensors()[i];
    EXPECT_EQ(ta.name, tb.name);
    EXPECT_EQ(ta.type, tb.type) << ta.name;
    EXPECT_EQ(ta.n_dims, tb.n_dims) << ta.name;
    EXPECT_EQ(ta.ne, tb.ne) << ta.name;
    const auto da = a.tensor_data(ta);
    const auto db = b.tensor_data(tb);
    ASSERT_EQ(da.size(), db.size()) << ta.name;
    EXPECT_TRUE(da.empty() || std::memcmp(da.data(), db.data(), da.size()) == 0) << ta.name;
  }
}

// Declares every key and tensor of `src` on `w` (in order), ready for begin().
inline void copy_declarations(const GgufFile& src, GgufWriter& w) {
  w.copy_metadata(src);
  for (const GgufTensorInfo& t : src.tensors()) {
    Status st = w.add_tensor(t.name, t.type, std::span<const int64_t>(t.ne.data(), t.n_dims));
    ASSERT_TRUE(st.ok()) << st.error().message;
  }
}

// Rewrites `src` through GgufWriter into memory.
inline std::vector<uint8_t> rewrite(const GgufFile& src) {
  GgufWriter w;
  copy_declarations(src, w);
  std::vector<uint8_t> out;
  Status st = w.begin(out);
  EXPECT_TRUE(st.ok()) << st.error().message;
  for (const GgufTensorInfo& t : src.tensors()) {
    st = w.write_tensor_data(src.tensor_data(t));
    EXPECT_TRUE(st.ok()) << st.error().message;
  }
  st = w.finish();
  EXPECT_TRUE(st.ok()) << st.error().message;
  return out;
}

}  // namespace kiln::gguf_test
