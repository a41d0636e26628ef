#include "core/gguf_format.h"

namespace kiln::gguf_format {

uint64_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
      return 8;
    case GgufType::STRING:
    case GgufType::ARRAY:
      return 0;
  }
  return 0;
}

uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::STRING:
      return 8;  // length
    case GgufType::ARRAY:
      return 4 + 8;  // element type + count
    default:
      return scalar_bytes(t);
  }
}

Result<uint64_t> alignment_value(const GgufValue& v) {
  if (!v.is_integer()) {
    return make_error("key '", kAlignmentKey, "' has type ", gguf_type_name(v.type), ", expected an integer");
  }
  const bool is_signed =
      v.type == GgufType::I8 || v.type == GgufType::I16 || v.type == GgufType::I32 || v.type == GgufType::I64;
  if (is_signed && v.num.i <= 0) {
    return make_error("key '", kAlignmentKey, "' = ", v.num.i, " is not a positive power of two");
  }
  const uint64_t a = is_signed ? static_cast<uint64_t>(v.num.i) : v.num.u;
  if (a == 0 || (a & (a - 1)) != 0 || a > kMaxAlignment) {
    return make_error("key '", kAlignmentKey, "' = ", a, " is not a power of two in [1, ", kMaxAlignment,
                      "]");
  }
  return a;
}

Result<uint64_t> tensor_bytes(DType type, const std::array<int64_t, kMaxDims>& ne) {
  const DTypeInfo& ti = info(type);
  if (ne[0] % ti.block_size != 0) {
    return make_error("ne[0] = ", ne[0], " is not a multiple of the block size ", ti.block_size, " of ",
                      ti.name);
  }
  int64_t n = 1;
  for (int d = 0; d < kMaxDims; ++d) {
    if (__builtin_mul_overflow(n, ne[d], &n)) {
      return make_error("element count overflows: ne = [", ne[0], ", ", ne[1], ", ", ne[2], ", ", ne[3], "]");
    }
  }
  uint64_t bytes = static_cast<uint64_t>(ne[0] / ti.block_size);
  if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(ti.type_size), &bytes)) {
    return make_error("row size overflows: ne[0] = ", ne[0], " of ", ti.name);
  }
  for (int d = 1; d < kMaxDims; ++d) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(ne[d]), &bytes)) {
      return make_error("byte size overflows: ne = [", ne[0], ", ", ne[1], ", ", ne[2], ", ", ne[3], "] of ",
                        ti.name);
    }
  }
  return bytes;
}

}  // namespace kiln::gguf_format
