// GGUF reader and writer. ref: ggml/docs/gguf.md (versions 2 and 3, little-endian).
//
// GgufFile parses and validates a whole file up front over read-only memory (an mmap'd file or
// caller bytes); every later accessor is then a cheap lookup that cannot fail on bad offsets.
// A hostile file gets an Error naming the key or tensor and the numbers; never a crash, an
// out-of-bounds read or an allocation sized by an unchecked count.
// Thread-safety: a GgufFile is immutable after open/parse; concurrent readers are fine.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/result.h"
#include "core/tensor_view.h"

namespace kiln {

enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view gguf_type_name(GgufType t);

// One metadata value. Scalars are held widened; arrays hold their element type and elements
// (nested arrays are readable; the writer refuses them because llama.cpp does).
struct GgufValue {
  GgufType type = GgufType::U8;
  union {
    uint64_t u;  // U8, U16, U32, U64, BOOL
    int64_t i;   // I8, I16, I32, I64
    double f;    // F32, F64
  } num{};
  std::string str;                 // STRING
  GgufType elem_type = GgufType::U8;  // ARRAY: type of the elements
  std::vector<GgufValue> arr;      // ARRAY elements

  bool is_integer() const;
  bool is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
};

struct GgufKv {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  DType type = DType::F32;
  int n_dims = 0;
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};  // ne[0] innermost, as stored in the file
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t size = 0;    // bytes: ne[0]/block_size*type_size*ne[1]*ne[2]*ne[3]
  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

class GgufFile {
 public:
  // Maps `path` read-only and parses it. Errors read "gguf: 'PATH': what went wrong" ("gguf: 'PATH':
  // truncated: ..." first when the file ends too early), or "cannot open 'PATH': reason".
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Parses caller-owned bytes, which must outlive the GgufFile (used by the fuzzer and tests).
  static Result<std::unique_ptr<GgufFile>> parse(std::span<const uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Absolute file offset of the tensor data section; past the end of a file without tensors
  // whose writer omitted the final padding (gguf-py does).
  uint64_t data_offset() const { return data_offset_; }
  std::span<const uint8_t> bytes() const { return bytes_; }
  // Whether bytes() are a read-only map of the file (open()), whose pages the kernel can drop and
  // read again; false for caller bytes (parse()).
  bool mapped() const { return mapping_ != nullptr; }

  const std::vector<GgufKv>& metadata() const { return kvs_; }
  const GgufValue* find(std::string_view key) const;  // nullptr when absent

  // Typed getters: an Error when the key is absent or has an incompatible type. Integer getters
  // accept any integer type whose value fits; get_f32 accepts F32/F64 (and integers). The array
  // getters take an array of that kind: strings; numbers (converted to float); integers that fit.
  Result<std::string> get_string(std::string_view key) const;
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_f32_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_i64_array(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
  // The tensor's bytes inside the file (validated in range at parse time).
  std::span<const uint8_t> tensor_data(const GgufTensorInfo& t) const;
  // A contiguous view over the tensor's bytes (read-only memory: do not write through it).
  TensorView tensor_view(const GgufTensorInfo& t) const;
  // Takes the mapped pages of tensors `drop` (this file's) out of the process
  // (MappedFile::drop_pages): tensors that follow each other in the file, padding included, go as
  // one range, so the only pages kept are those that also hold bytes of another tensor or of the
  // header. Their bytes stay readable: the next read faults the pages back in from the file.
  // Nothing to do unless mapped().
  void drop_tensor_pages(std::span<const GgufTensorInfo* const> drop) const;

 private:
  GgufFile() = default;
  std::unique_ptr<MappedFile> mapping_;  // null when parsing caller bytes
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> tensor_index_;  // name (viewing tensors_) -> index
  friend class GgufParser;
};

// Builds a GGUF file (version 3) that llama.cpp loads: metadata in insertion order, tensor data
// packed in tensor-info order, each tensor aligned to `general.alignment` (default 32).
class GgufWriter {
 public:
  void set(std::string key, GgufValue value);  // replaces an existing key in place
  void set_string(std::string key, std::string v);
  void set_u32(std::string key, uint32_t v);
  void set_i32(std::string key, int32_t v);
  void set_u64(std::string key, uint64_t v);
  void set_f32(std::string key, float v);
  void set_bool(std::string key, bool v);
  void set_string_array(std::string key, const std::vector<std::string>& v);
  void set_f32_array(std::string key, const std::vector<float>& v);
  void set_i32_array(std::string key, const std::vector<int32_t>& v);
  // Copies every key of `src` (in order), e.g. when quantizing a file.
  void copy_metadata(const GgufFile& src);

  // Longest tensor name add_tensor accepts: gguf_format::kMaxTensorNameLength (63, llama.cpp's
  // limit) unless raised, e.g. to kSdMaxTensorNameLength for stable-diffusion.cpp's files.
  void set_max_tensor_name(size_t bytes);
  // Declares a tensor; its bytes come later from write_tensor_data in the same order.
  Status add_tensor(std::string name, DType type, std::span<const int64_t> ne);

  // Streaming write: header + metadata + tensor infos, then each tensor's bytes in declared order.
  Status begin(const std::string& path);
  // The same, appending the file's bytes to `out` (which must outlive finish()) instead of a file.
  Status begin(std::vector<uint8_t>& out);
  Status write_tensor_data(std::span<const uint8_t> bytes);  // exactly the declared size
  Status finish();  // checks every tensor was written, closes the file
 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
  Impl& impl();
};

}  // namespace kiln
