#include "core/dtype.h"

#include <array>
#include <cctype>

#include "core/check.h"

namespace kiln {
namespace {

struct Entry {
  bool known;
  DTypeInfo info;
};

// ref: ggml.c type_traits (block sizes and byte sizes per ggml-common.h block structs)
constexpr std::array<Entry, kDTypeIdLimit> kTable = [] {
  std::array<Entry, kDTypeIdLimit> t{};
  auto set = [&](DType d, std::string_view name, int64_t bs, size_t ts, bool q) {
    t[static_cast<uint32_t>(d)] = Entry{true, DTypeInfo{name, bs, ts, q}};
  };
  set(DType::F32, "f32", 1, 4, false);
  set(DType::F16, "f16", 1, 2, false);
  set(DType::Q4_0, "q4_0", 32, 18, true);
  set(DType::Q4_1, "q4_1", 32, 20, true);
  set(DType::Q5_0, "q5_0", 32, 22, true);
  set(DType::Q5_1, "q5_1", 32, 24, true);
  set(DType::Q8_0, "q8_0", 32, 34, true);
  set(DType::Q8_1, "q8_1", 32, 36, true);
  set(DType::Q2_K, "q2_K", 256, 84, true);
  set(DType::Q3_K, "q3_K", 256, 110, true);
  set(DType::Q4_K, "q4_K", 256, 144, true);
  set(DType::Q5_K, "q5_K", 256, 176, true);
  set(DType::Q6_K, "q6_K", 256, 210, true);
  set(DType::Q8_K, "q8_K", 256, 292, true);
  set(DType::IQ2_XXS, "iq2_xxs", 256, 66, true);
  set(DType::IQ2_XS, "iq2_xs", 256, 74, true);
  set(DType::IQ3_XXS, "iq3_xxs", 256, 98, true);
  set(DType::IQ1_S, "iq1_s", 256, 50, true);
  set(DType::IQ4_NL, "iq4_nl", 32, 18, true);
  set(DType::IQ3_S, "iq3_s", 256, 110, true);
  set(DType::IQ2_S, "iq2_s", 256, 82, true);
  set(DType::IQ4_XS, "iq4_xs", 256, 136, true);
  set(DType::I8, "i8", 1, 1, false);
  set(DType::I16, "i16", 1, 2, false);
  set(DType::I32, "i32", 1, 4, false);
  set(DType::I64, "i64", 1, 8, false);
  set(DType::F64, "f64", 1, 8, false);
  set(DType::IQ1_M, "iq1_m", 256, 56, true);
  set(DType::BF16, "bf16", 1, 2, false);
  set(DType::TQ1_0, "tq1_0", 256, 54, true);
  set(DType::TQ2_0, "tq2_0", 256, 66, true);
  set(DType::MXFP4, "mxfp4", 32, 17, true);
  return t;
}();

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

std::optional<DTypeInfo> dtype_info(uint32_t id) {
  if (id >= kDTypeIdLimit || !kTable[id].known) return std::nullopt;
  return kTable[id].info;
}

const DTypeInfo& info(DType t) {
  const auto id = static_cast<uint32_t>(t);
  KILN_ASSERT(id < kDTypeIdLimit && kTable[id].known, "unknown DType");
  return kTable[id].info;
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (uint32_t id = 0; id < kDTypeIdLimit; ++id) {
    if (kTable[id].known && iequals(kTable[id].info.name, name)) return static_cast<DType>(id);
  }
  return std::nullopt;
}

}  // namespace kiln
