// GGUF parsing and validation: GgufFile::open and GgufFile::parse.
// ref: ggml/docs/gguf.md; validation rules follow ggml/src/gguf.cpp (gguf_init_from_file_impl)
// and add the checks a reader of mmap'd memory needs (data ranges inside the file, no overlap).
#include <algorithm>
#include <bit>
#include <cstring>
#include <new>
#include <unordered_set>

#include "core/gguf.h"
#include "core/gguf_format.h"

namespace kiln {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

// Internal errors carry a message without the "gguf: " prefix; GgufParser::run adds it once.
// Reads little-endian values from untrusted bytes; every read is bounds-checked.
class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return bytes_.size() - pos_; }
  // Whether a read failed because the bytes ended (a truncated file, or a length that lies).
  bool ran_out() const { return ran_out_; }
  void set_ran_out() { ran_out_ = true; }

  Status need(uint64_t n, std::string_view what) {
    if (n > left()) {
      ran_out_ = true;
      return make_error(what, " needs ", n, " bytes at offset ", pos_, ", only ", left(), " left (file size ",
                        bytes_.size(), ")");
    }
    return ok_status();
  }

  template <class T>
  Result<T> read(std::string_view what) {
    KILN_TRY(need(sizeof(T), what));
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  Result<std::string> read_string(std::string_view what) {
    KILN_ASSIGN_OR_RETURN(const uint64_t len, read<uint64_t>(what));
    if (len > left()) {
      ran_out_ = true;
      return make_error(what, " length ", len, " at offset ", pos_ - 8, " exceeds the ", left(),
                        " bytes left (file size ", bytes_.size(), ")");
    }
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
  bool ran_out_ = false;
};

Error with_context(std::string_view context, const Error& e) { return make_error(context, ": ", e.message); }

}  // namespace

// Builds a GgufFile from bytes; friend of GgufFile so it can fill the private members.
class GgufParser {
 public:
  static Result<std::unique_ptr<GgufFile>> run(std::span<const uint8_t> bytes) {
    try {
      GgufParser p(bytes);
      Status st = p.parse_all();
      if (st.ok()) return std::move(p.file_);
      // A file that ends too early is most likely an incomplete download: say so first.
      if (p.data_needed_ > 0) {
        return make_error("gguf: truncated: the file has ", bytes.size(), " bytes, its tensor data needs ",
                          p.data_needed_, " (an incomplete download?); ", st.error().message);
      }
      if (p.r_.ran_out()) {
        return make_error("gguf: truncated: the file has ", bytes.size(), " bytes and ends inside its ",
                          p.section_, " (an incomplete download?); ", st.error().message);
      }
      return make_error("gguf: ", st.error().message);
    } catch (const std::bad_alloc&) {
      return make_error("gguf: out of memory while parsing ", bytes.size(), " bytes of metadata");
    }
  }

 private:
  explicit GgufParser(std::span<const uint8_t> bytes) : r_(bytes), file_(new GgufFile()) {
    file_->bytes_ = bytes;
  }

  Status parse_all() {
    KILN_TRY(parse_header());
    section_ = "metadata";
    KILN_TRY(parse_metadata());
    KILN_TRY(parse_alignment());
    section_ = "tensor infos";
    KILN_TRY(parse_tensor_infos());
    // The data section starts at the next multiple of the alignment after the tensor infos.
    // pos <= file size and alignment <= 2^31, so this cannot overflow.
    const uint64_t a = file_->alignment_;
    file_->data_offset_ = (r_.pos() + a - 1) / a * a;
    KILN_TRY(check_tensor_ranges());
    KILN_TRY(check_tensor_overlap());
    for (size_t i = 0; i < file_->tensors_.size(); ++i)
      file_->tensor_index_.emplace(file_->tensors_[i].name, i);
    return ok_status();
  }

  Status parse_header() {
    const uint64_t size = r_.left();
    if (size < 4) return make_error("file too small (", size, " bytes) to hold the magic 'GGUF'");
    KILN_ASSIGN_OR_RETURN(const uint32_t magic, r_.read<uint32_t>("magic"));
    if (magic != gguf_format::kMagic) {
      char shown[4];
      std::memcpy(shown, &magic, 4);
      for (char& c : shown) {
        if (c < 32 || c > 126) c = '?';
      }
      return make_error("bad magic '", std::string_view(shown, 4), "' (0x", to_hex(magic),
                        "), expected 'GGUF'");
    }
    KILN_ASSIGN_OR_RETURN(const uint32_t version, r_.read<uint32_t>("version"));
    if (version == 1) return make_error("version 1 is not supported (only versions 2 and 3)");
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped == 2 || swapped == 3) {
        return make_error("version ", version, " looks like a big-endian file (version ", swapped,
                          "): only little-endian GGUF is supported");
      }
      return make_error("unsupported version ", version, " (expected 2 or 3)");
    }
    file_->version_ = version;
    KILN_ASSIGN_OR_RETURN(n_tensors_, r_.read<uint64_t>("tensor count"));
    KILN_ASSIGN_OR_RETURN(n_kv_, r_.read<uint64_t>("metadata kv count"));
    // Counts are checked against the bytes left before they drive any loop or allocation.
    if (n_kv_ > r_.left() / gguf_format::kMinKvBytes) {
      return make_error("metadata kv count ", n_kv_, " cannot fit in the ", r_.left(),
                        " bytes left (each kv takes at least ", gguf_format::kMinKvBytes, ")");
    }
    if (n_tensors_ > r_.left() / gguf_format::kMinTensorInfoBytes) {
      return make_error("tensor count ", n_tensors_, " cannot fit in the ", r_.left(),
                        " bytes left (each tensor info takes at least ", gguf_format::kMinTensorInfoBytes,
                        ")");
    }
    if (n_kv_ * gguf_format::kMinKvBytes + n_tensors_ * gguf_format::kMinTensorInfoBytes > r_.left()) {
      return make_error("metadata kv count ", n_kv_, " and tensor count ", n_tensors_, " cannot fit in the ",
                        r_.left(), " bytes left");
    }
    return ok_status();
  }

  Status parse_metadata() {
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_kv_; ++i) {
      auto key = r_.read_string("key");
      if (!key.ok()) return with_context(make_error("kv #", i).message, key.error());
      if (key->empty()) return make_error("kv #", i, " has an empty key");
      const std::string context = "key '" + *key + "'";
      if (!seen.insert(*key).second) return make_error("duplicate ", context, " (kv #", i, ")");
      auto type_id = r_.read<uint32_t>("value type");
      if (!type_id.ok()) return with_context(context, type_id.error());
      auto value = read_value(*type_id, 0);
      if (!value.ok()) return with_context(context, value.error());
      file_->kvs_.push_back(GgufKv{std::move(*key), std::move(*value)});
    }
    return ok_status();
  }

  Result<GgufValue> read_value(uint32_t type_id, int depth) {
    if (!gguf_format::is_known_type(type_id)) {
      return make_error("unknown value type id ", type_id, " (known: 0..12)");
    }
    GgufValue v;
    v.type = static_cast<GgufType>(type_id);
    switch (v.type) {
      case GgufType::U8:
        KILN_TRY(read_into<uint8_t>(v.num.u, "u8 value"));
        break;
      case GgufType::I8:
        KILN_TRY(read_into<int8_t>(v.num.i, "i8 value"));
        break;
      case GgufType::U16:
        KILN_TRY(read_into<uint16_t>(v.num.u, "u16 value"));
        break;
      case GgufType::I16:
        KILN_TRY(read_into<int16_t>(v.num.i, "i16 value"));
        break;
      case GgufType::U32:
        KILN_TRY(read_into<uint32_t>(v.num.u, "u32 value"));
        break;
      case GgufType::I32:
        KILN_TRY(read_into<int32_t>(v.num.i, "i32 value"));
        break;
      case GgufType::U64:
        KILN_TRY(read_into<uint64_t>(v.num.u, "u64 value"));
        break;
      case GgufType::I64:
        KILN_TRY(read_into<int64_t>(v.num.i, "i64 value"));
        break;
      case GgufType::F32:
        KILN_TRY(read_into<float>(v.num.f, "f32 value"));
        break;
      case GgufType::F64:
        KILN_TRY(read_into<double>(v.num.f, "f64 value"));
        break;
      // Kept as stored (llama.cpp does not check 0/1 either) so a rewrite is byte-exact.
      case GgufType::BOOL:
        KILN_TRY(read_into<uint8_t>(v.num.u, "bool value"));
        break;
      case GgufType::STRING: {
        KILN_ASSIGN_OR_RETURN(v.str, r_.read_string("string"));
        break;
      }
      case GgufType::ARRAY:
        KILN_TRY(read_array(v, depth));
        break;
    }
    return v;
  }

  // Reads a T and widens it into `dst` (the u, i or f member of GgufValue::num).
  template <class T, class D>
  Status read_into(D& dst, std::string_view what) {
    KILN_ASSIGN_OR_RETURN(const T v, r_.read<T>(what));
    dst = static_cast<D>(v);
    return ok_status();
  }

  Status read_array(GgufValue& v, int depth) {
    KILN_ASSIGN_OR_RETURN(const uint32_t elem_id, r_.read<uint32_t>("array element type"));
    if (!gguf_format::is_known_type(elem_id)) {
      return make_error("unknown array element type id ", elem_id, " (known: 0..12)");
    }
    v.elem_type = static_cast<GgufType>(elem_id);
    if (v.elem_type == GgufType::ARRAY && depth + 1 >= gguf_format::kMaxArrayDepth) {
      return make_error("arrays nested deeper than ", gguf_format::kMaxArrayDepth, " levels");
    }
    KILN_ASSIGN_OR_RETURN(const uint64_t count, r_.read<uint64_t>("array length"));
    const uint64_t min_elem = gguf_format::min_value_bytes(v.elem_type);
    if (count > r_.left() / min_elem) {
      r_.set_ran_out();
      return make_error("array of ", count, " ", gguf_type_name(v.elem_type), " elements at offset ",
                        r_.pos() - 8, " cannot fit in the ", r_.left(), " bytes left (at least ", min_elem,
                        " bytes each)");
    }
    if (count > gguf_format::kMaxMetadataElements - n_elements_) {
      return make_error("array of ", count, " elements exceeds the limit of ",
                        gguf_format::kMaxMetadataElements, " metadata array elements per file");
    }
    n_elements_ += count;
    v.arr.reserve(static_cast<size_t>(count));
    for (uint64_t j = 0; j < count; ++j) {
      auto e = read_value(elem_id, depth + 1);
      if (!e.ok()) return with_context(make_error("element ", j).message, e.error());
      v.arr.push_back(std::move(*e));
    }
    return ok_status();
  }

  // general.alignment: an integer that is a non-zero power of two (llama.cpp stores it as u32).
  Status parse_alignment() {
    const GgufValue* a = file_->find(gguf_format::kAlignmentKey);
    if (a == nullptr) return ok_status();
    KILN_ASSIGN_OR_RETURN(const uint64_t value, gguf_format::alignment_value(*a));
    file_->alignment_ = value;
    return ok_status();
  }

  Status parse_tensor_infos() {
    std::unordered_set<std::string> seen;
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      auto name = r_.read_string("tensor name");
      if (!name.ok()) return with_context(make_error("tensor #", i).message, name.error());
      if (name->empty()) return make_error("tensor #", i, " has an empty name");
      const std::string context = "tensor '" + *name + "'";
      if (!seen.insert(*name).second) return make_error("duplicate ", context, " (tensor #", i, ")");
      GgufTensorInfo t;
      t.name = std::move(*name);
      Status st = read_tensor_info(t);
      if (!st.ok()) return with_context(context, st.error());
      file_->tensors_.push_back(std::move(t));
    }
    return ok_status();
  }

  Status read_tensor_info(GgufTensorInfo& t) {
    KILN_ASSIGN_OR_RETURN(const uint32_t n_dims, r_.read<uint32_t>("n_dims"));
    if (n_dims < 1 || n_dims > kMaxDims) return make_error("n_dims ", n_dims, " outside 1..", kMaxDims);
    t.n_dims = static_cast<int>(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      KILN_ASSIGN_OR_RETURN(t.ne[d], r_.read<int64_t>("dimension"));
      if (t.ne[d] < 0) return make_error("ne[", d, "] = ", t.ne[d], " is negative");
    }
    KILN_ASSIGN_OR_RETURN(const uint32_t type_id, r_.read<uint32_t>("tensor type"));
    KILN_ASSIGN_OR_RETURN(t.offset, r_.read<uint64_t>("data offset"));
    auto info = dtype_info(type_id);
    if (!info) return make_error("unknown tensor type id ", type_id);
    t.type = static_cast<DType>(type_id);
    KILN_ASSIGN_OR_RETURN(t.size, gguf_format::tensor_bytes(t.type, t.ne));
    return ok_status();
  }

  // Each tensor's data lies inside the file. When some ends past it, data_needed_ is the size the
  // file would need for all of them (left 0 when that overflows: a hostile offset, not a short file).
  Status check_tensor_ranges() {
    const uint64_t file_size = file_->bytes_.size();
    const uint64_t a = file_->alignment_;
    uint64_t needed = 0;
    bool overflows = false;
    for (const GgufTensorInfo& t : file_->tensors_) {
      uint64_t end = 0;
      overflows |= __builtin_add_overflow(file_->data_offset_, t.offset, &end) ||
                   __builtin_add_overflow(end, t.size, &end);
      needed = std::max(needed, end);
    }
    for (const GgufTensorInfo& t : file_->tensors_) {
      if (t.offset % a != 0) {
        return make_error("tensor '", t.name, "' data offset ", t.offset,
                          " is not a multiple of the alignment ", a);
      }
      uint64_t start = 0;
      if (__builtin_add_overflow(file_->data_offset_, t.offset, &start)) {
        return make_error("tensor '", t.name, "' data offset ", t.offset, " past end of file (size ",
                          file_size, ")");
      }
      if (start > file_size || t.size > file_size - start) {
        if (!overflows) data_needed_ = needed;
        return make_error("tensor '", t.name, "' data [", start, ", ", start, "+", t.size,
                          ") past end of file (size ", file_size, ")");
      }
    }
    return ok_status();
  }

  Status check_tensor_overlap() const {
    std::vector<const GgufTensorInfo*> order;
    for (const GgufTensorInfo& t : file_->tensors_) {
      if (t.size > 0) order.push_back(&t);
    }
    std::sort(order.begin(), order.end(),
              [](const GgufTensorInfo* x, const GgufTensorInfo* y) { return x->offset < y->offset; });
    for (size_t i = 1; i < order.size(); ++i) {
      const GgufTensorInfo& prev = *order[i - 1];
      const GgufTensorInfo& cur = *order[i];
      if (prev.offset + prev.size > cur.offset) {
        return make_error("tensor '", cur.name, "' data [", cur.offset, ", ", cur.offset + cur.size,
                          ") overlaps tensor '", prev.name, "' data [", prev.offset, ", ",
                          prev.offset + prev.size, ") (offsets relative to the data section)");
      }
    }
    return ok_status();
  }

  static std::string to_hex(uint32_t v) {
    static const char* kDigits = "0123456789abcdef";
    std::string s(8, '0');
    for (int i = 7; i >= 0; --i, v >>= 4) s[i] = kDigits[v & 0xf];
    return s;
  }

  ByteReader r_;
  std::unique_ptr<GgufFile> file_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  uint64_t n_elements_ = 0;  // metadata array elements read so far (all arrays, all depths)
  const char* section_ = "header";  // the part being read, for errors
  uint64_t data_needed_ = 0;        // set by check_tensor_ranges when the file is too short for the data
};

Result<std::unique_ptr<GgufFile>> GgufFile::parse(std::span<const uint8_t> bytes) {
  return GgufParser::run(bytes);
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  auto mapping = MappedFile::open(path);
  if (!mapping.ok()) return mapping.error();  // names the path and the reason
  auto file = GgufParser::run((*mapping)->bytes());
  if (!file.ok()) {
    // "gguf: X" -> "gguf: 'path': X"
    std::string_view msg = file.error().message;
    if (msg.starts_with("gguf: ")) msg.remove_prefix(6);
    return make_error("gguf: '", path, "': ", msg);
  }
  (*file)->mapping_ = std::move(*mapping);
  return std::move(*file);
}

}  // namespace kiln
