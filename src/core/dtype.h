// ggml tensor types: ids and block layouts exactly as GGUF/ggml define them.
// A row of `n` elements of type T occupies n / block_size(T) * type_size(T) bytes and n must be a
// multiple of block_size(T).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

inline constexpr uint32_t kDTypeIdLimit = 40;  // ids are < this; some ids below it are retired
inline constexpr int64_t kQK_K = 256;          // super-block size of the K-quants

struct DTypeInfo {
  std::string_view name;  // ggml's name: "f32", "q4_0", "q4_K", "iq4_nl", "bf16"
  int64_t block_size;     // elements per block
  size_t type_size;       // bytes per block
  bool quantized;
};

// Info for a known type id, or nullopt for retired/unknown ids (untrusted input: check first).
std::optional<DTypeInfo> dtype_info(uint32_t id);
// Info for a valid DType (asserts it is known).
const DTypeInfo& info(DType t);

inline std::string_view dtype_name(DType t) { return info(t).name; }
inline int64_t block_size(DType t) { return info(t).block_size; }
inline size_t type_size(DType t) { return info(t).type_size; }
// Bytes of a row of n elements (n a multiple of block_size).
inline size_t row_size(DType t, int64_t n) { return static_cast<size_t>(n / block_size(t)) * type_size(t); }
// Type from ggml's name ("q4_K", case-insensitive), or nullopt.
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace kiln
