// GgufFile accessors over the validated, parsed file.
#include <algorithm>
#include <limits>
#include <numeric>

#include "core/gguf.h"

namespace kiln {

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8:
      return "u8";
    case GgufType::I8:
      return "i8";
    case GgufType::U16:
      return "u16";
    case GgufType::I16:
      return "i16";
    case GgufType::U32:
      return "u32";
    case GgufType::I32:
      return "i32";
    case GgufType::F32:
      return "f32";
    case GgufType::BOOL:
      return "bool";
    case GgufType::STRING:
      return "string";
    case GgufType::ARRAY:
      return "array";
    case GgufType::U64:
      return "u64";
    case GgufType::I64:
      return "i64";
    case GgufType::F64:
      return "f64";
  }
  return "unknown";
}

bool GgufValue::is_integer() const {
  switch (type) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64:
      return true;
    default:
      return false;
  }
}

namespace {

bool is_signed_integer(GgufType t) {
  return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}

std::string describe(const GgufValue& v) {
  if (v.type == GgufType::ARRAY) return "array of " + std::string(gguf_type_name(v.elem_type));
  return std::string(gguf_type_name(v.type));
}

// Integer value of `v` as an int64, or an error if it is not an integer or does not fit.
Result<int64_t> to_i64(const GgufValue& v, std::string_view key) {
  if (!v.is_integer())
    return make_error("gguf: key '", key, "' has type ", describe(v), ", expected an integer");
  if (is_signed_integer(v.type)) return v.num.i;
  if (v.num.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return make_error("gguf: key '", key, "' = ", v.num.u, " does not fit in i64");
  }
  return static_cast<int64_t>(v.num.u);
}

Result<uint64_t> to_u64(const GgufValue& v, std::string_view key) {
  if (!v.is_integer())
    return make_error("gguf: key '", key, "' has type ", describe(v), ", expected an integer");
  if (is_signed_integer(v.type)) {
    if (v.num.i < 0)
      return make_error("gguf: key '", key, "' = ", v.num.i, " is negative, expected unsigned");
    return static_cast<uint64_t>(v.num.i);
  }
  return v.num.u;
}

Result<float> to_f32(const GgufValue& v, std::string_view key) {
  if (v.is_float()) return static_cast<float>(v.num.f);
  if (v.is_integer()) {
    return is_signed_integer(v.type) ? static_cast<float>(v.num.i) : static_cast<float>(v.num.u);
  }
  return make_error("gguf: key '", key, "' has type ", describe(v), ", expected a number");
}

}  // namespace

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const GgufKv& kv : kvs_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

namespace {

Result<const GgufValue*> require(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) return make_error("gguf: key '", key, "' not found");
  return v;
}

Result<const GgufValue*> require_array(const GgufFile& f, std::string_view key) {
  KILN_ASSIGN_OR_RETURN(const GgufValue* v, require(f, key));
  if (v->type != GgufType::ARRAY)
    return make_error("gguf: key '", key, "' has type ", describe(*v), ", expected an array");
  return v;
}

}  // namespace

Result<std::string> GgufFile::get_string(std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  if (v->type != GgufType::STRING)
    return make_error("gguf: key '", key, "' has type ", describe(*v), ", expected string");
  return v->str;
}

Result<uint64_t> GgufFile::get_u64(std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  return to_u64(*v, key);
}

Result<uint32_t> GgufFile::get_u32(std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const uint64_t u, get_u64(key));
  if (u > std::numeric_limits<uint32_t>::max())
    return make_error("gguf: key '", key, "' = ", u, " does not fit in u32");
  return static_cast<uint32_t>(u);
}

Result<int64_t> GgufFile::get_i64(std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  return to_i64(*v, key);
}

Result<float> GgufFile::get_f32(std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  return to_f32(*v, key);
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const GgufValue* v, require(*this, key));
  if (v->type != GgufType::BOOL)
    return make_error("gguf: key '", key, "' has type ", describe(*v), ", expected bool");
  return v->num.u != 0;
}

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const GgufValue* v, require_array(*this, key));
  if (v->elem_type != GgufType::STRING) {
    return make_error("gguf: key '", key, "' has type ", describe(*v), ", expected array of string");
  }
  std::vector<std::string> out;
  out.reserve(v->arr.size());
  for (const GgufValue& e : v->arr) out.push_back(e.str);
  return out;
}

Result<std::vector<float>> GgufFile::get_f32_array(std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const GgufValue* v, require_array(*this, key));
  std::vector<float> out;
  out.reserve(v->arr.size());
  for (size_t i = 0; i < v->arr.size(); ++i) {
    auto f = to_f32(v->arr[i], key);
    if (!f.ok())
      return make_error("gguf: key '", key, "' has type ", describe(*v), ", expected array of numbers");
    out.push_back(*f);
  }
  return out;
}

Result<std::vector<int64_t>> GgufFile::get_i64_array(std::string_view key) const {
  KILN_ASSIGN_OR_RETURN(const GgufValue* v, require_array(*this, key));
  std::vector<int64_t> out;
  out.reserve(v->arr.size());
  for (size_t i = 0; i < v->arr.size(); ++i) {
    auto n = to_i64(v->arr[i], key);
    if (!n.ok()) return make_error(n.error().message, " (element ", i, ")");
    out.push_back(*n);
  }
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::tensor_data(const GgufTensorInfo& t) const {
  // Ranges were validated at parse time; `t` must be one of this file's tensors.
  KILN_ASSERT(data_offset_ + t.offset + t.size <= bytes_.size() || t.size == 0,
              "GgufFile::tensor_data: tensor is not from this file");
  if (t.size == 0) return {};
  return bytes_.subspan(static_cast<size_t>(data_offset_ + t.offset), static_cast<size_t>(t.size));
}

TensorView GgufFile::tensor_view(const GgufTensorInfo& t) const {
  std::span<const uint8_t> data = tensor_data(t);
  // Read-only memory: TensorView has no const variant, callers must not write through it.
  return contiguous_view(t.type, t.ne, const_cast<uint8_t*>(data.data()));
}

void GgufFile::drop_tensor_pages(std::span<const GgufTensorInfo* const> drop) const {
  if (mapping_ == nullptr || drop.empty()) return;
  std::vector<bool> dropped(tensors_.size(), false);
  for (const GgufTensorInfo* t : drop) {
    KILN_ASSERT(t >= tensors_.data() && t < tensors_.data() + tensors_.size(),
                "GgufFile::drop_tensor_pages: tensor is not from this file");
    dropped[static_cast<size_t>(t - tensors_.data())] = true;
  }
  std::vector<size_t> in_file_order(tensors_.size());
  std::iota(in_file_order.begin(), in_file_order.end(), size_t{0});
  std::sort(in_file_order.begin(), in_file_order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  // [begin, end): the run of dropped tensors so far, relative to the data section.
  uint64_t begin = 0, end = 0;
  const auto flush = [&](uint64_t limit) {
    end = std::min(end, limit);  // a kept tensor that overlaps the run (a hostile file) keeps its pages
    if (end > begin) mapping_->drop_pages(static_cast<size_t>(data_offset_ + begin), static_cast<size_t>(end - begin));
    begin = end = 0;
  };
  for (size_t i : in_file_order) {
    const GgufTensorInfo& t = tensors_[i];
    if (t.size == 0) continue;
    if (!dropped[i]) {
      flush(t.offset);
    } else if (end == 0) {
      begin = t.offset;
      end = t.offset + t.size;
    } else {
      end = std::max(end, t.offset + t.size);
    }
  }
  flush(std::numeric_limits<uint64_t>::max());
}

}  // namespace kiln
