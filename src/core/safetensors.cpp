#include "core/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json_file.h"
#include "core/half.h"

namespace kiln {

namespace {

using json = nlohmann::json;

// Element size of a safetensors dtype, or 0 when the name is unknown.
size_t dtype_size(std::string_view d) {
  static constexpr std::pair<std::string_view, size_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"F64", 8},     {"I64", 8}, {"U64", 8},
  };
  for (const auto& [name, size] : kSizes) {
    if (name == d) return size;
  }
  return 0;
}

Status parse_tensor(const std::string& label, const std::string& name, const json& entry, uint64_t buffer_size,
                    SafetensorsTensor& t) {
  const std::string where = "safetensors: " + label + ": tensor '" + name + "'";
  if (!entry.is_object()) return make_error(where, ": entry is not an object");
  auto dt = entry.find("dtype");
  auto sh = entry.find("shape");
  auto off = entry.find("data_offsets");
  if (dt == entry.end() || !dt->is_string()) return make_error(where, ": missing or non-string 'dtype'");
  if (sh == entry.end() || !sh->is_array()) return make_error(where, ": missing or non-array 'shape'");
  if (off == entry.end() || !off->is_array() || off->size() != 2)
    return make_error(where, ": 'data_offsets' is not an array of 2 integers");
  t.name = name;
  t.dtype = dt->get<std::string>();
  t.elem_size = dtype_size(t.dtype);
  if (t.elem_size == 0) return make_error(where, ": unknown dtype '", t.dtype, "'");
  uint64_t count = 1;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) return make_error(where, ": shape entry ", d.dump(), " is not a non-negative integer");
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (v != 0 && count > std::numeric_limits<uint64_t>::max() / v))
      return make_error(where, ": shape ", sh->dump(), " overflows");
    count *= v;
    t.shape.push_back(static_cast<int64_t>(v));
  }
  if (count > std::numeric_limits<uint64_t>::max() / t.elem_size)
    return make_error(where, ": shape ", sh->dump(), " overflows");
  for (const json& o : *off) {
    if (!o.is_number_unsigned()) return make_error(where, ": data_offsets ", off->dump(), " are not non-negative integers");
  }
  t.begin = (*off)[0].get<uint64_t>();
  t.end = (*off)[1].get<uint64_t>();
  if (t.begin > t.end) return make_error(where, ": data_offsets [", t.begin, ", ", t.end, ") are reversed");
  if (t.end > buffer_size)
    return make_error(where, ": data [", t.begin, ", ", t.end, ") past the end of the data buffer (size ", buffer_size, ")");
  if (t.end - t.begin != count * t.elem_size)
    return make_error(where, ": data_offsets [", t.begin, ", ", t.end, ") hold ", t.end - t.begin, " bytes but ", t.dtype,
                      " shape ", sh->dump(), " needs ", count * t.elem_size);
  return ok_status();
}

}  // namespace

int64_t SafetensorsTensor::nelements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto mapping, MappedFile::open(path));
  KILN_ASSIGN_OR_RETURN(auto file, parse(mapping->bytes(), path));
  file->mapping_ = std::move(mapping);
  return file;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(std::span<const uint8_t> bytes, std::string label) {
  const std::string where = "safetensors: " + label;
  if (bytes.size() < 8) return make_error(where, ": file is ", bytes.size(), " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kSafetensorsMaxHeader) return make_error(where, ": header length ", n, " exceeds the limit ", kSafetensorsMaxHeader);
  if (n > bytes.size() - 8)
    return make_error(where, ": header length ", n, " runs past the end of the file (size ", bytes.size(), ")");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8), n);
  if (text.empty() || text.front() != '{') return make_error(where, ": header does not start with '{'");
  KILN_ASSIGN_OR_RETURN(json header, parse_json_text(text, where + ": header"));
  if (!header.is_object()) return make_error(where, ": header is not a JSON object");

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->label_ = label;
  const uint64_t buffer_offset = 8 + n;
  const uint64_t buffer_size = bytes.size() - buffer_offset;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return make_error(where, ": __metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) return make_error(where, ": __metadata__ value of '", mk, "' is not a string");
        file->metadata_[mk] = mv.get<std::string>();
      }
      continue;
    }
    SafetensorsTensor t;
    KILN_TRY(parse_tensor(label, key, value, buffer_size, t));
    t.data = bytes.subspan(buffer_offset + t.begin, t.end - t.begin);
    file->position_[t.name] = file->tensors_.size();
    file->tensors_.push_back(std::move(t));
  }
  // The tensors must tile the data buffer: sorted by offset, no overlap, no gap, nothing after.
  std::vector<const SafetensorsTensor*> sorted;
  for (const auto& t : file->tensors_) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t cursor = 0;
  const SafetensorsTensor* prev = nullptr;
  for (const auto* t : sorted) {
    if (t->begin < cursor)
      return make_error(where, ": tensor '", t->name, "' data [", t->begin, ", ", t->end, ") overlaps tensor '", prev->name,
                        "' data [", prev->begin, ", ", prev->end, ")");
    if (t->begin > cursor)
      return make_error(where, ": gap of ", t->begin - cursor, " bytes in the data buffer before tensor '", t->name, "' at ",
                        t->begin);
    cursor = t->end;
    prev = t;
  }
  if (cursor != buffer_size)
    return make_error(where, ": tensors cover ", cursor, " bytes of the data buffer but it holds ", buffer_size);
  return file;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = position_.find(name);
  return it == position_.end() ? nullptr : &tensors_[it->second];
}

Result<SafetensorsCheckpoint> SafetensorsCheckpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint ck;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::is_regular_file(index_path, ec)) {
    const std::string where = "safetensors: " + index_path.string();
    KILN_ASSIGN_OR_RETURN(json index, read_json_file(index_path.string()));
    auto wm = index.is_object() ? index.find("weight_map") : index.end();
    if (wm == index.end() || !wm->is_object()) return make_error(where, ": no 'weight_map' object");
    std::map<std::string, std::string> shard_of;  // tensor -> shard file
    std::vector<std::string> shard_names;
    for (const auto& [name, file] : wm->items()) {
      if (!file.is_string()) return make_error(where, ": weight_map entry '", name, "' is not a string");
      const std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        return make_error(where, ": weight_map entry '", name, "' names shard '", f, "' outside the folder");
      shard_of[name] = f;
      if (std::find(shard_names.begin(), shard_names.end(), f) == shard_names.end()) shard_names.push_back(f);
    }
    std::sort(shard_names.begin(), shard_names.end());  // as llama.cpp's converter visits them
    for (const std::string& shard : shard_names) {
      KILN_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open((fs::path(dir) / shard).string()));
      ck.shards_.push_back(std::shared_ptr<SafetensorsFile>(std::move(file)));
      for (const SafetensorsTensor& t : ck.shards_.back()->tensors()) {
        auto it = shard_of.find(t.name);
        if (it == shard_of.end())
          return make_error(where, ": tensor '", t.name, "' is in shard '", shard, "' but not in the weight_map");
        if (it->second != shard)
          return make_error(where, ": tensor '", t.name, "' is in shard '", shard, "' but the weight_map names '", it->second,
                            "'");
      }
    }
    for (const auto& [name, shard] : shard_of) {
      bool found = false;
      for (const auto& s : ck.shards_) found = found || (s->find(name) != nullptr);
      if (!found) return make_error(where, ": tensor '", name, "' listed for shard '", shard, "' is missing from it");
    }
  } else {
    KILN_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open((fs::path(dir) / "model.safetensors").string()));
    ck.shards_.push_back(std::shared_ptr<SafetensorsFile>(std::move(file)));
  }
  for (const auto& shard : ck.shards_) {
    for (const SafetensorsTensor& t : shard->tensors()) {
      if (!ck.by_name_.emplace(t.name, &t).second)
        return make_error("safetensors: tensor '", t.name, "' appears in more than one shard (again in '", shard->label(), "')");
      ck.tensors_.push_back(&t);
    }
  }
  return ck;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<std::vector<float>> tensor_to_f32(const SafetensorsTensor& t) {
  const size_t n = static_cast<size_t>(t.nelements());
  std::vector<float> out(n);
  if (t.dtype == "F32") {
    if (n) std::memcpy(out.data(), t.data.data(), n * 4);
  } else if (t.dtype == "F16" || t.dtype == "BF16") {
    const bool bf = t.dtype == "BF16";
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data.data() + 2 * i, 2);
      out[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
    }
  } else {
    return make_error("safetensors: tensor '", t.name, "' has dtype ", t.dtype, "; only F32, F16 and BF16 convert");
  }
  return out;
}

}  // namespace kiln
