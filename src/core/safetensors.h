// Reader for Hugging Face .safetensors files and sharded checkpoints.
// ref: https://github.com/huggingface/safetensors (format: 8-byte little-endian header length N,
// N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end)}, "__metadata__": {str: str}},
// then the data buffer; offsets are relative to the start of the buffer).
//
// A file is validated whole at open, like GgufFile: the header length, the JSON, every dtype,
// shape and offset pair, byte counts against shapes, ranges inside the file, overlaps, gaps and
// duplicate names. Every violation is an Error naming the file, the tensor and the numbers; a
// hostile file never causes a crash or an out-of-bounds read.
// Thread-safety: immutable after open; concurrent readers are fine.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/result.h"

namespace kiln {

inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;  // as the reference reader

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // "F32", "F16", "BF16", "I64", ... as in the header
  size_t elem_size = 0;        // bytes per element
  std::vector<int64_t> shape;  // outermost first (PyTorch order)
  uint64_t begin = 0;          // [begin, end) relative to the data buffer
  uint64_t end = 0;
  std::span<const uint8_t> data;  // the bytes, inside the file's memory (unaligned)
  int64_t nelements() const;
};

class SafetensorsFile {
 public:
  // Maps `path` read-only and validates it.
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  // Validates caller-owned bytes, which must outlive the object; `label` names them in errors.
  static Result<std::unique_ptr<SafetensorsFile>> parse(std::span<const uint8_t> bytes, std::string label);

  const std::string& label() const { return label_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // header order
  const SafetensorsTensor* find(std::string_view name) const;                 // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  SafetensorsFile() = default;
  std::unique_ptr<MappedFile> mapping_;
  std::string label_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, size_t, std::less<>> position_;  // name -> index in tensors_
};

// A checkpoint folder: model.safetensors, or the shards listed by model.safetensors.index.json
// (its weight_map must name exactly the tensors the shards hold, each in the shard it names).
class SafetensorsCheckpoint {
 public:
  static Result<SafetensorsCheckpoint> open(const std::string& dir);

  // Every tensor of every shard, in shard order then header order. Pointers stay valid while the
  // checkpoint lives.
  const std::vector<const SafetensorsTensor*>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(std::string_view name) const;  // nullptr if absent

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::vector<const SafetensorsTensor*> tensors_;
  std::map<std::string, const SafetensorsTensor*, std::less<>> by_name_;
};

// The tensor's values as F32 (F32, F16 and BF16 sources; any other dtype is an Error).
Result<std::vector<float>> tensor_to_f32(const SafetensorsTensor& t);

}  // namespace kiln
