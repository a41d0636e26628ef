#include "malformed_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/gguf.h"

namespace kiln::gguf_test {
namespace {

GgufValue unsigned_value(GgufType t, uint64_t u) {
  GgufValue v;
  v.type = t;
  v.num.u = u;
  return v;
}

GgufValue signed_value(GgufType t, int64_t i) {
  GgufValue v;
  v.type = t;
  v.num.i = i;
  return v;
}

GgufValue float_value(GgufType t, double f) {
  GgufValue v;
  v.type = t;
  v.num.f = f;
  return v;
}

// Little-endian bytes written field by field, for files the writer refuses to make.
struct RawBytes {
  std::vector<uint8_t> b;
  template <class T>
  RawBytes& put(T v) {
    return append(&v, sizeof(T));
  }
  RawBytes& str(std::string_view s) {
    put<uint64_t>(s.size());
    return append(s.data(), s.size());
  }
  RawBytes& append(const void* p, size_t n) {
    const size_t at = b.size();
    b.resize(at + n);
    if (n > 0) std::memcpy(b.data() + at, p, n);
    return *this;
  }
  RawBytes& header(uint64_t n_tensors, uint64_t n_kv) {
    return put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
};

constexpr uint32_t kArrayType = static_cast<uint32_t>(GgufType::ARRAY);

template <class T>
std::vector<uint8_t> poked(std::vector<uint8_t> bytes, size_t at, T v) {
  KILN_ASSERT(at + sizeof(T) <= bytes.size(), "poke past the end of a test file");
  std::memcpy(bytes.data() + at, &v, sizeof(T));
  return bytes;
}

std::vector<uint8_t> replaced(std::vector<uint8_t> bytes, std::string_view from, std::string_view to) {
  KILN_ASSERT(from.size() == to.size(), "replacement must keep the length");
  const size_t at = offset_after(bytes, from) - from.size();
  std::memcpy(bytes.data() + at, to.data(), to.size());
  return bytes;
}

std::vector<uint8_t> truncated(std::vector<uint8_t> bytes, size_t n) {
  bytes.resize(std::min(n, bytes.size()));
  return bytes;
}

// Offsets inside sample_file(): a kv's type field follows its key; a tensor info's n_dims
// follows its name, then ne[n_dims], type, offset.
size_t kv_type_at(const std::vector<uint8_t>& f, std::string_view key) { return offset_after(f, key); }
size_t kv_value_at(const std::vector<uint8_t>& f, std::string_view key) { return offset_after(f, key) + 4; }
size_t ndims_at(const std::vector<uint8_t>& f, std::string_view name) { return offset_after(f, name); }
size_t ne_at(const std::vector<uint8_t>& f, std::string_view name, int d) {
  return offset_after(f, name) + 4 + 8 * d;
}
size_t ttype_at(const std::vector<uint8_t>& f, std::string_view name, int n_dims) {
  return offset_after(f, name) + 4 + 8 * n_dims;
}
size_t toffset_at(const std::vector<uint8_t>& f, std::string_view name, int n_dims) {
  return ttype_at(f, name, n_dims) + 4;
}

uint64_t read_u64(const std::vector<uint8_t>& f, size_t at) {
  uint64_t v;
  std::memcpy(&v, f.data() + at, 8);
  return v;
}

}  // namespace

size_t offset_after(const std::vector<uint8_t>& bytes, std::string_view s) {
  auto it = std::search(bytes.begin(), bytes.end(), s.begin(), s.end());
  KILN_ASSERT(it != bytes.end(), "pattern not found in test file");
  return static_cast<size_t>(it - bytes.begin()) + s.size();
}

std::vector<uint8_t> sample_file() {
  GgufWriter w;
  w.set_string("general.architecture", "sample");
  w.set_u32("general.alignment", 32);
  w.set("k.u8", unsigned_value(GgufType::U8, 200));
  w.set("k.i8", signed_value(GgufType::I8, -5));
  w.set("k.u16", unsigned_value(GgufType::U16, 60000));
  w.set("k.i16", signed_value(GgufType::I16, -30000));
  w.set_u32("k.u32", 4000000000u);
  w.set_i32("k.i32", -2000000000);
  w.set_f32("k.f32", 0.25f);
  w.set_bool("k.bool", true);
  w.set_u64("k.u64", uint64_t{1} << 40);
  w.set("k.i64", signed_value(GgufType::I64, -(int64_t{1} << 40)));
  w.set("k.f64", float_value(GgufType::F64, 3.5));
  w.set_string_array("k.strings", {"alpha", "beta", ""});
  w.set_f32_array("k.floats", {1.5f, -2.0f});
  w.set_i32_array("k.ints", {1, -1, 7});
  w.set_u32("dup.key.aaaa", 1);
  w.set_u32("dup.key.bbbb", 2);
  const int64_t ne_a[] = {8, 2}, ne_e[] = {0, 3}, ne_b[] = {64, 2}, ne_c[] = {4};
  KILN_ASSERT(w.add_tensor("tensor_a", DType::F32, ne_a).ok(), "sample tensor_a");
  KILN_ASSERT(w.add_tensor("tensor_e", DType::F32, ne_e).ok(), "sample tensor_e");
  KILN_ASSERT(w.add_tensor("tensor_b", DType::Q4_0, ne_b).ok(), "sample tensor_b");
  KILN_ASSERT(w.add_tensor("tensor_c", DType::F16, ne_c).ok(), "sample tensor_c");
  std::vector<uint8_t> out;
  KILN_ASSERT(w.begin(out).ok(), "sample begin");
  for (size_t n : {64, 0, 72, 8}) {
    std::vector<uint8_t> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 7 + n);
    KILN_ASSERT(w.write_tensor_data(data).ok(), "sample data");
  }
  KILN_ASSERT(w.finish().ok(), "sample finish");
  return out;
}

size_t sample_data_end() {
  const std::vector<uint8_t> f = sample_file();
  auto g = GgufFile::parse(f);
  KILN_ASSERT(g.ok(), "sample parses");
  const GgufTensorInfo& c = (*g)->tensors().back();
  return static_cast<size_t>((*g)->data_offset() + c.offset + c.size);
}

std::vector<uint8_t> nested_array_file(int depth) {
  RawBytes r;
  r.header(0, 1).str("nested").put<uint32_t>(kArrayType);
  for (int level = 1; level < depth; ++level) r.put<uint32_t>(kArrayType).put<uint64_t>(1);
  r.put<uint32_t>(static_cast<uint32_t>(GgufType::I32)).put<uint64_t>(2).put<int32_t>(5).put<int32_t>(-6);
  return r.b;
}

std::vector<MalformedCase> malformed_cases() {
  const std::vector<uint8_t> f = sample_file();
  const uint64_t u64_max = std::numeric_limits<uint64_t>::max();
  std::vector<MalformedCase> c;
  auto add = [&](std::string name, std::vector<uint8_t> bytes, std::vector<std::string> expect) {
    c.push_back(MalformedCase{std::move(name), std::move(bytes), std::move(expect)});
  };

  // Header.
  add("empty", {}, {"file too small (0 bytes)"});
  add("short-magic", {'G', 'G', 'U'}, {"file too small (3 bytes)"});
  add("bad-magic", poked<uint8_t>(f, 0, 'X'), {"bad magic 'XGUF'"});
  add("bad-magic-zero", poked<uint32_t>(f, 0, 0), {"bad magic '?\?\?\?' (0x00000000)"});
  add("version-1", poked<uint32_t>(f, 4, 1), {"version 1 is not supported"});
  add("version-4", poked<uint32_t>(f, 4, 4), {"unsupported version 4"});
  add("version-big-endian", poked<uint32_t>(f, 4, 0x03000000u), {"big-endian"});
  add("header-truncated", truncated(f, 20),
      {"truncated: the file has 20 bytes and ends inside its header", "metadata kv count", "offset 16"});
  add("n-kv-giant", poked<uint64_t>(f, 16, u64_max),
      {"metadata kv count 18446744073709551615", "cannot fit"});
  add("n-tensors-giant", poked<uint64_t>(f, 8, uint64_t{1} << 62),
      {"tensor count 4611686018427387904", "cannot fit"});
  add("n-kv-plus-one", poked<uint64_t>(f, 16, read_u64(f, 16) + 1), {"gguf: "});
  add("n-tensors-plus-one", poked<uint64_t>(f, 8, 5), {"tensor #4 has an empty name"});

  // Metadata.
  add("key-length-giant", poked<uint64_t>(f, 24, uint64_t{1} << 60),
      {"kv #0", "key length 1152921504606846976"});
  add("key-empty", poked<uint64_t>(f, 24, 0), {"kv #0 has an empty key"});
  add("string-length-giant", poked<uint64_t>(f, kv_value_at(f, "general.architecture"), uint64_t{1} << 40),
      {"key 'general.architecture'", "string length 1099511627776", "exceeds"});
  add("value-truncated", RawBytes().header(0, 1).str("k").put<uint32_t>(10).put<uint32_t>(7).b,
      {"truncated: the file has 41 bytes and ends inside its metadata (an incomplete download?); key 'k'",
       "u64 value needs 8 bytes at offset 37, only 4 left (file size 41)"});
  add("value-type-bad", poked<uint32_t>(f, kv_type_at(f, "k.u8"), 13),
      {"key 'k.u8'", "unknown value type id 13"});
  add("array-elem-type-bad", poked<uint32_t>(f, kv_value_at(f, "k.ints"), 99),
      {"key 'k.ints'", "unknown array element type id 99"});
  add("array-count-giant", poked<uint64_t>(f, kv_value_at(f, "k.strings") + 4, u64_max / 2),
      {"key 'k.strings'", "array of 9223372036854775807 string elements", "cannot fit"});
  add("array-count-past-end", poked<uint64_t>(f, kv_value_at(f, "k.floats") + 4, 100000),
      {"key 'k.floats'", "array of 100000 f32 elements", "cannot fit"});
  add("array-string-element-giant", poked<uint64_t>(f, kv_value_at(f, "k.strings") + 12, u64_max),
      {"key 'k.strings'", "element 0", "string length 18446744073709551615"});
  add("duplicate-key", replaced(f, "dup.key.bbbb", "dup.key.aaaa"), {"duplicate key 'dup.key.aaaa'"});
  add("alignment-zero", poked<uint32_t>(f, kv_value_at(f, "general.alignment"), 0),
      {"key 'general.alignment' = 0", "power of two"});
  add("alignment-three", poked<uint32_t>(f, kv_value_at(f, "general.alignment"), 3),
      {"key 'general.alignment' = 3", "power of two"});
  add("alignment-2-31", poked<uint32_t>(f, kv_value_at(f, "general.alignment"), 1u << 31),
      {"tensor 'tensor_a' data [2147483648", "past end of file"});
  add("alignment-type-string", RawBytes().header(0, 1).str("general.alignment").put<uint32_t>(8).str("32").b,
      {"key 'general.alignment' has type string"});
  add("alignment-negative",
      RawBytes().header(0, 1).str("general.alignment").put<uint32_t>(5).put<int32_t>(-32).b,
      {"key 'general.alignment' = -32", "power of two"});
  add("alignment-u64-huge",
      RawBytes().header(0, 1).str("general.alignment").put<uint32_t>(10).put<uint64_t>(uint64_t{1} << 40).b,
      {"key 'general.alignment' = 1099511627776", "power of two in [1, 2147483648]"});
  add("nested-too-deep", nested_array_file(9), {"key 'nested'", "nested deeper than 8"});
  add("nested-type-bad",
      RawBytes()
          .header(0, 1)
          .str("nested")
          .put<uint32_t>(kArrayType)
          .put<uint32_t>(kArrayType)
          .put<uint64_t>(1)
          .put<uint32_t>(77)
          .put<uint64_t>(0)
          .b,
      {"key 'nested'", "element 0", "unknown array element type id 77"});

  // Tensor infos.
  add("tensor-name-length-giant", poked<uint64_t>(f, offset_after(f, "tensor_a") - 8 - 8, u64_max),
      {"tensor #0", "tensor name length 18446744073709551615"});
  add("duplicate-tensor", replaced(f, "tensor_b", "tensor_a"), {"duplicate tensor 'tensor_a' (tensor #2)"});
  add("ndims-5", poked<uint32_t>(f, ndims_at(f, "tensor_a"), 5),
      {"tensor 'tensor_a'", "n_dims 5 outside 1..4"});
  add("ndims-0", poked<uint32_t>(f, ndims_at(f, "tensor_c"), 0),
      {"tensor 'tensor_c'", "n_dims 0 outside 1..4"});
  add("dim-negative", poked<int64_t>(f, ne_at(f, "tensor_a", 1), -2),
      {"tensor 'tensor_a'", "ne[1] = -2 is negative"});
  add("dims-overflow",
      poked<int64_t>(poked<int64_t>(f, ne_at(f, "tensor_a", 0), int64_t{1} << 40), ne_at(f, "tensor_a", 1),
                     int64_t{1} << 40),
      {"tensor 'tensor_a'", "element count overflows"});
  add("row-bytes-overflow",
      poked<int64_t>(poked<int64_t>(f, ne_at(f, "tensor_a", 0), int64_t{1} << 62), ne_at(f, "tensor_a", 1),
                     1),
      {"tensor 'tensor_a'", "row size overflows"});
  add("bytes-overflow",
      poked<int64_t>(poked<int64_t>(f, ne_at(f, "tensor_a", 0), int64_t{1} << 40), ne_at(f, "tensor_a", 1),
                     int64_t{1} << 22),
      {"tensor 'tensor_a'", "byte size overflows"});
  add("block-multiple", poked<int64_t>(f, ne_at(f, "tensor_b", 0), 48),
      {"tensor 'tensor_b'", "ne[0] = 48 is not a multiple of the block size 32 of q4_0"});
  add("tensor-type-retired", poked<uint32_t>(f, ttype_at(f, "tensor_a", 2), 4),
      {"tensor 'tensor_a'", "unknown tensor type id 4"});
  add("tensor-type-huge", poked<uint32_t>(f, ttype_at(f, "tensor_c", 1), 0xffffffffu),
      {"tensor 'tensor_c'", "unknown tensor type id 4294967295"});
  add("tensor-info-truncated", truncated(f, ndims_at(f, "tensor_c") + 2),
      {"ends inside its tensor infos (an incomplete download?); tensor 'tensor_c'", "n_dims"});

  // Tensor data.
  const size_t off_b = toffset_at(f, "tensor_b", 2);
  const size_t off_c = toffset_at(f, "tensor_c", 1);
  add("offset-misaligned", poked<uint64_t>(f, off_b, read_u64(f, off_b) + 4),
      {"tensor 'tensor_b' data offset 68", "not a multiple of the alignment 32"});
  add("offset-past-end", poked<uint64_t>(f, off_c, uint64_t{1} << 20),
      {"tensor 'tensor_c' data [", "+8) past end of file (size "});
  add("offset-wraps", poked<uint64_t>(f, off_c, u64_max - 31),
      {"tensor 'tensor_c' data offset 18446744073709551584 past end of file"});
  add("overlap-same-offset", poked<uint64_t>(f, off_b, 0), {"overlaps tensor", "tensor_a", "tensor_b"});
  add("overlap-partial", poked<uint64_t>(f, off_c, read_u64(f, off_b) + 64),
      {"tensor 'tensor_c' data [128, 136) overlaps tensor 'tensor_b' data [64, 136)"});
  add("data-truncated", truncated(f, sample_data_end() - 1),
      {"truncated: the file has " + std::to_string(sample_data_end() - 1) + " bytes, its tensor data needs " +
           std::to_string(sample_data_end()) + " (an incomplete download?); tensor 'tensor_c' data [",
       "past end of file"});
  return c;
}

}  // namespace kiln::gguf_test
