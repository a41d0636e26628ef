// Constants and rules of the GGUF format shared by the reader and the writer (internal to core).
// ref: ggml/docs/gguf.md, ggml/src/gguf.cpp
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "core/dtype.h"
#include "core/gguf.h"
#include "core/result.h"

namespace kiln::gguf_format {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr uint32_t kWriteVersion = 3;
inline constexpr std::string_view kAlignmentKey = "general.alignment";
inline constexpr uint64_t kDefaultAlignment = 32;
// Upper bound on general.alignment (a u32 in llama.cpp); keeps offset arithmetic far from overflow.
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 31;
// ggml's GGML_MAX_NAME is 64 including the terminating NUL: llama.cpp refuses longer names.
inline constexpr size_t kMaxTensorNameLength = 63;
// stable-diffusion.cpp builds ggml with GGML_MAX_NAME=160: its checkpoints' names reach 159 bytes.
inline constexpr size_t kSdMaxTensorNameLength = 159;
// Arrays of arrays are legal GGUF; depth is bounded so a hostile file cannot exhaust the stack.
inline constexpr int kMaxArrayDepth = 8;
// Total elements of all metadata arrays in one file (real vocabularies use about 10^6). A parsed
// element takes ~100 bytes of memory, so this bounds what a hostile file can make the reader allocate.
inline constexpr uint64_t kMaxMetadataElements = uint64_t{1} << 24;
// Smallest encodings, used to bound counts by the bytes left before anything is allocated:
// a kv is key length (8) + type (4) + a 1-byte value; a tensor info is name length (8) +
// n_dims (4) + one dimension (8) + type (4) + offset (8).
inline constexpr uint64_t kMinKvBytes = 8 + 4 + 1;
inline constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

inline bool is_known_type(uint32_t id) { return id <= static_cast<uint32_t>(GgufType::F64); }

// Fewest bytes one value of type `t` occupies in a file.
uint64_t min_value_bytes(GgufType t);
// Bytes of a fixed-size scalar type (0 for STRING and ARRAY).
uint64_t scalar_bytes(GgufType t);

// The alignment a general.alignment value asks for: an integer that is a power of two in
// [1, kMaxAlignment]; otherwise an Error naming the key and the value (no "gguf: " prefix).
Result<uint64_t> alignment_value(const GgufValue& v);

// Byte size of a tensor of `type` with sizes `ne` (all >= 0): checks ne[0] is a multiple of the
// block size and that the element count and byte size do not overflow (no "gguf: " prefix).
Result<uint64_t> tensor_bytes(DType type, const std::array<int64_t, kMaxDims>& ne);

}  // namespace kiln::gguf_format
