// GgufWriter: GGUF version 3 in the layout llama.cpp writes (ref: ggml/src/gguf.cpp,
// gguf_write_to_buf): header, metadata, tensor infos, zero padding to the alignment, then each
// tensor's bytes followed by zero padding to the alignment.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "core/gguf.h"
#include "core/gguf_format.h"

namespace kiln {

namespace {

// Appends little-endian encodings to a byte vector.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  // Writes one value without its type tag (the caller wrote it, or it is an array element).
  void put_value(const GgufValue& v) {
    switch (v.type) {
      case GgufType::U8:
        put(static_cast<uint8_t>(v.num.u));
        break;
      case GgufType::I8:
        put(static_cast<int8_t>(v.num.i));
        break;
      case GgufType::U16:
        put(static_cast<uint16_t>(v.num.u));
        break;
      case GgufType::I16:
        put(static_cast<int16_t>(v.num.i));
        break;
      case GgufType::U32:
        put(static_cast<uint32_t>(v.num.u));
        break;
      case GgufType::I32:
        put(static_cast<int32_t>(v.num.i));
        break;
      case GgufType::U64:
        put(static_cast<uint64_t>(v.num.u));
        break;
      case GgufType::I64:
        put(static_cast<int64_t>(v.num.i));
        break;
      case GgufType::F32:
        put(static_cast<float>(v.num.f));
        break;
      case GgufType::F64:
        put(static_cast<double>(v.num.f));
        break;
      case GgufType::BOOL:
        put(static_cast<uint8_t>(v.num.u));
        break;
      case GgufType::STRING:
        put_string(v.str);
        break;
      case GgufType::ARRAY:
        put(static_cast<uint32_t>(v.elem_type));
        put<uint64_t>(v.arr.size());
        for (const GgufValue& e : v.arr) put_value(e);
        break;
    }
  }

 private:
  std::vector<uint8_t>& out_;
};

// A value the writer can emit: a known type; arrays hold elements of their declared element type
// and no arrays (llama.cpp's gguf_set_arr_* has no nested arrays and its reader refuses them).
Status check_writable(const std::string& key, const GgufValue& v) {
  if (key.empty()) return make_error("gguf writer: empty key (llama.cpp refuses them)");
  if (!gguf_format::is_known_type(static_cast<uint32_t>(v.type))) {
    return make_error("gguf writer: key '", key, "' has unknown type id ", static_cast<uint32_t>(v.type));
  }
  if (v.type != GgufType::ARRAY) return ok_status();
  if (v.elem_type == GgufType::ARRAY) {
    return make_error("gguf writer: key '", key, "' is a nested array; llama.cpp does not support them");
  }
  if (!gguf_format::is_known_type(static_cast<uint32_t>(v.elem_type))) {
    return make_error("gguf writer: key '", key, "' has unknown array element type id ",
                      static_cast<uint32_t>(v.elem_type));
  }
  for (size_t i = 0; i < v.arr.size(); ++i) {
    if (v.arr[i].type != v.elem_type) {
      return make_error("gguf writer: key '", key, "' element ", i, " has type ",
                        gguf_type_name(v.arr[i].type), " in an array of ", gguf_type_name(v.elem_type));
    }
  }
  return ok_status();
}

GgufValue scalar_u(GgufType type, uint64_t u) {
  GgufValue v;
  v.type = type;
  v.num.u = u;
  return v;
}

GgufValue scalar_i(GgufType type, int64_t i) {
  GgufValue v;
  v.type = type;
  v.num.i = i;
  return v;
}

GgufValue scalar_f(GgufType type, double f) {
  GgufValue v;
  v.type = type;
  v.num.f = f;
  return v;
}

GgufValue string_value(std::string s) {
  GgufValue v;
  v.type = GgufType::STRING;
  v.str = std::move(s);
  return v;
}

GgufValue array_value(GgufType elem_type, std::vector<GgufValue> elems) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = elem_type;
  v.arr = std::move(elems);
  return v;
}

uint64_t padding(uint64_t n, uint64_t alignment) { return (alignment - n % alignment) % alignment; }

}  // namespace

struct GgufWriter::Impl {
  std::vector<GgufKv> kvs;
  std::vector<GgufTensorInfo> tensors;
  std::unordered_set<std::string> tensor_names;

  enum class State { kDeclaring, kWriting, kFinished } state = State::kDeclaring;
  uint64_t alignment = gguf_format::kDefaultAlignment;
  size_t max_name = gguf_format::kMaxTensorNameLength;
  size_t next_tensor = 0;  // index of the tensor whose bytes come next
  uint64_t written = 0;    // bytes emitted so far
  std::string path;        // file sink: its path ("" for a buffer sink)
  std::FILE* file = nullptr;
  std::vector<uint8_t>* buffer = nullptr;

  ~Impl() {
    if (file != nullptr) std::fclose(file);
  }

  Status emit(std::span<const uint8_t> bytes) {
    if (buffer != nullptr) {
      buffer->insert(buffer->end(), bytes.begin(), bytes.end());
    } else if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size()) {
      return make_error("gguf writer: writing ", bytes.size(), " bytes to '", path, "' at offset ", written,
                        " failed: ", std::strerror(errno));
    }
    written += bytes.size();
    return ok_status();
  }

  Status emit_padding() {
    static constexpr uint8_t kZeros[64] = {};
    uint64_t n = padding(written, alignment);
    while (n > 0) {
      const uint64_t chunk = std::min<uint64_t>(n, sizeof kZeros);
      KILN_TRY(emit({kZeros, static_cast<size_t>(chunk)}));
      n -= chunk;
    }
    return ok_status();
  }

  // Checks the metadata, assigns tensor offsets and writes everything before the tensor data.
  Status start() {
    if (state != State::kDeclaring) return make_error("gguf writer: begin called twice");
    for (const GgufKv& kv : kvs) KILN_TRY(check_writable(kv.key, kv.value));
    alignment = gguf_format::kDefaultAlignment;
    for (const GgufKv& kv : kvs) {
      if (kv.key == gguf_format::kAlignmentKey) {
        if (kv.value.type != GgufType::U32) {
          return make_error("gguf writer: key '", kv.key, "' has type ", gguf_type_name(kv.value.type),
                            ", llama.cpp requires u32");
        }
        auto a = gguf_format::alignment_value(kv.value);
        if (!a.ok()) return make_error("gguf writer: ", a.error().message);
        alignment = *a;
      }
    }
    uint64_t offset = 0;
    for (GgufTensorInfo& t : tensors) {
      t.offset = offset;
      offset += t.size + padding(t.size, alignment);
    }

    std::vector<uint8_t> head;
    ByteWriter w(head);
    w.put(gguf_format::kMagic);
    w.put(gguf_format::kWriteVersion);
    w.put<uint64_t>(tensors.size());
    w.put<uint64_t>(kvs.size());
    for (const GgufKv& kv : kvs) {
      w.put_string(kv.key);
      w.put(static_cast<uint32_t>(kv.value.type));
      w.put_value(kv.value);
    }
    for (const GgufTensorInfo& t : tensors) {
      w.put_string(t.name);
      w.put(static_cast<uint32_t>(t.n_dims));
      for (int d = 0; d < t.n_dims; ++d) w.put<int64_t>(t.ne[d]);
      w.put(static_cast<uint32_t>(t.type));
      w.put<uint64_t>(t.offset);
    }
    state = State::kWriting;
    KILN_TRY(emit(head));
    return emit_padding();
  }
};

GgufWriter::Impl& GgufWriter::impl() {
  if (!impl_) impl_ = std::make_shared<Impl>();
  return *impl_;
}

void GgufWriter::set(std::string key, GgufValue value) {
  Impl& m = impl();
  KILN_ASSERT(m.state == Impl::State::kDeclaring, "GgufWriter::set after begin");
  for (GgufKv& kv : m.kvs) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  m.kvs.push_back(GgufKv{std::move(key), std::move(value)});
}

void GgufWriter::set_string(std::string key, std::string v) {
  set(std::move(key), string_value(std::move(v)));
}
void GgufWriter::set_u32(std::string key, uint32_t v) { set(std::move(key), scalar_u(GgufType::U32, v)); }
void GgufWriter::set_i32(std::string key, int32_t v) { set(std::move(key), scalar_i(GgufType::I32, v)); }
void GgufWriter::set_u64(std::string key, uint64_t v) { set(std::move(key), scalar_u(GgufType::U64, v)); }
void GgufWriter::set_f32(std::string key, float v) { set(std::move(key), scalar_f(GgufType::F32, v)); }
void GgufWriter::set_bool(std::string key, bool v) {
  set(std::move(key), scalar_u(GgufType::BOOL, v ? 1 : 0));
}

void GgufWriter::set_string_array(std::string key, const std::vector<std::string>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (const std::string& s : v) elems.push_back(string_value(s));
  set(std::move(key), array_value(GgufType::STRING, std::move(elems)));
}

void GgufWriter::set_f32_array(std::string key, const std::vector<float>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (float f : v) elems.push_back(scalar_f(GgufType::F32, f));
  set(std::move(key), array_value(GgufType::F32, std::move(elems)));
}

void GgufWriter::set_i32_array(std::string key, const std::vector<int32_t>& v) {
  std::vector<GgufValue> elems;
  elems.reserve(v.size());
  for (int32_t i : v) elems.push_back(scalar_i(GgufType::I32, i));
  set(std::move(key), array_value(GgufType::I32, std::move(elems)));
}

void GgufWriter::copy_metadata(const GgufFile& src) {
  for (const GgufKv& kv : src.metadata()) set(kv.key, kv.value);
}

void GgufWriter::set_max_tensor_name(size_t bytes) { impl().max_name = bytes; }

Status GgufWriter::add_tensor(std::string name, DType type, std::span<const int64_t> ne) {
  Impl& m = impl();
  if (m.state != Impl::State::kDeclaring)
    return make_error("gguf writer: tensor '", name, "' added after begin");
  if (name.empty()) return make_error("gguf writer: empty tensor name");
  if (name.size() > m.max_name) {
    return make_error("gguf writer: tensor '", name, "' name is ", name.size(), " bytes, ",
                      m.max_name == gguf_format::kMaxTensorNameLength ? "llama.cpp" : "the reader",
                      " allows at most ", m.max_name);
  }
  if (m.tensor_names.count(name) != 0) return make_error("gguf writer: duplicate tensor '", name, "'");
  if (ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
    return make_error("gguf writer: tensor '", name, "' has ", ne.size(), " dimensions, expected 1..",
                      kMaxDims);
  }
  GgufTensorInfo t;
  t.name = name;
  t.type = type;
  t.n_dims = static_cast<int>(ne.size());
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0)
      return make_error("gguf writer: tensor '", name, "' ne[", d, "] = ", ne[d], " is negative");
    t.ne[d] = ne[d];
  }
  auto size = gguf_format::tensor_bytes(type, t.ne);
  if (!size.ok()) return make_error("gguf writer: tensor '", name, "': ", size.error().message);
  t.size = *size;
  m.tensor_names.insert(std::move(name));
  m.tensors.push_back(std::move(t));
  return ok_status();
}

Status GgufWriter::begin(const std::string& path) {
  Impl& m = impl();
  if (m.state != Impl::State::kDeclaring) return make_error("gguf writer: begin called twice");
  m.file = std::fopen(path.c_str(), "wb");
  if (m.file == nullptr) return make_error("gguf writer: cannot create '", path, "': ", std::strerror(errno));
  m.path = path;
  return m.start();
}

Status GgufWriter::begin(std::vector<uint8_t>& out) {
  Impl& m = impl();
  if (m.state != Impl::State::kDeclaring) return make_error("gguf writer: begin called twice");
  m.buffer = &out;
  return m.start();
}

Status GgufWriter::write_tensor_data(std::span<const uint8_t> bytes) {
  Impl& m = impl();
  if (m.state != Impl::State::kWriting)
    return make_error("gguf writer: tensor data written outside begin..finish");
  if (m.next_tensor >= m.tensors.size()) {
    return make_error("gguf writer: tensor data written after all ", m.tensors.size(), " tensors");
  }
  const GgufTensorInfo& t = m.tensors[m.next_tensor];
  if (bytes.size() != t.size) {
    return make_error("gguf writer: tensor '", t.name, "' expects ", t.size, " bytes, got ", bytes.size());
  }
  KILN_TRY(m.emit(bytes));
  KILN_TRY(m.emit_padding());
  ++m.next_tensor;
  return ok_status();
}

Status GgufWriter::finish() {
  Impl& m = impl();
  if (m.state != Impl::State::kWriting) return make_error("gguf writer: finish without begin");
  if (m.next_tensor != m.tensors.size()) {
    return make_error("gguf writer: finish after ", m.next_tensor, " of ", m.tensors.size(),
                      " tensors; next missing: '", m.tensors[m.next_tensor].name, "'");
  }
  m.state = Impl::State::kFinished;
  if (m.file != nullptr) {
    const bool flushed = std::fflush(m.file) == 0;
    const int err = errno;
    const bool closed = std::fclose(m.file) == 0;
    m.file = nullptr;
    if (!flushed || !closed) {
      return make_error("gguf writer: closing '", m.path, "' failed: ", std::strerror(flushed ? errno : err));
    }
  }
  return ok_status();
}

}  // namespace kiln
