#include "models/sd/weight_file.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/gguf_format.h"
#include "core/leading_bytes.h"
#include "core/safetensors.h"

namespace kiln::sd {
namespace {

bool starts_with(std::span<const uint8_t> b, std::string_view magic) {
  return b.size() >= magic.size() && std::memcmp(b.data(), magic.data(), magic.size()) == 0;
}

// A safetensors file: an 8-byte little-endian header length, then a JSON object.
bool looks_like_safetensors(std::span<const uint8_t> b) { return b.size() >= 9 && b[8] == '{'; }

// A PyTorch checkpoint: a zip archive (torch.save since 1.6) or a pickle stream (protocol 2+
// starts with 0x80 and the protocol number).
bool looks_like_pickle(std::span<const uint8_t> b) {
  return starts_with(b, "PK\x03\x04") || (b.size() >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5);
}

std::optional<DType> packed_type(std::string_view dtype) {
  if (dtype == "F32") return DType::F32;
  if (dtype == "F16") return DType::F16;
  if (dtype == "BF16") return DType::BF16;
  return std::nullopt;
}

// The float tensors of `st` as a GGUF image (no metadata), names unchanged, sizes innermost first.
Result<std::vector<uint8_t>> pack_as_gguf(const SafetensorsFile& st) {
  GgufWriter writer;
  writer.set_max_tensor_name(gguf_format::kSdMaxTensorNameLength);
  std::vector<const SafetensorsTensor*> kept;
  for (const SafetensorsTensor& t : st.tensors()) {
    const std::optional<DType> type = packed_type(t.dtype);
    if (!type) continue;
    if (t.shape.size() > kMaxDims)
      return make_error("safetensors: ", st.label(), ": tensor '", t.name, "' has ", t.shape.size(),
                        " dimensions; at most ", kMaxDims, " are supported");
    std::vector<int64_t> ne(t.shape.rbegin(), t.shape.rend());
    if (ne.empty()) ne.push_back(1);
    KILN_TRY(writer.add_tensor(t.name, *type, ne));
    kept.push_back(&t);
  }
  std::vector<uint8_t> image;
  KILN_TRY(writer.begin(image));
  for (const SafetensorsTensor* t : kept) KILN_TRY(writer.write_tensor_data(t->data));
  KILN_TRY(writer.finish());
  return image;
}

}  // namespace

Result<std::unique_ptr<SdWeightFile>> SdWeightFile::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto mapping, MappedFile::open(path));
  KILN_ASSIGN_OR_RETURN(auto file, parse(mapping->bytes(), path));
  file->mapping_ = std::move(mapping);
  return file;
}

Result<std::unique_ptr<SdWeightFile>> SdWeightFile::parse(std::span<const uint8_t> bytes, const std::string& label) {
  std::unique_ptr<SdWeightFile> file(new SdWeightFile());
  if (starts_with(bytes, "GGUF")) {
    auto gguf = GgufFile::parse(bytes);
    if (!gguf.ok()) return make_error("sd: '", label, "': ", gguf.error().message);
    file->gguf_ = std::move(*gguf);
    file->format_ = WeightFormat::Gguf;
    return file;
  }
  if (looks_like_safetensors(bytes)) {
    KILN_ASSIGN_OR_RETURN(auto st, SafetensorsFile::parse(bytes, label));
    KILN_ASSIGN_OR_RETURN(file->packed_, pack_as_gguf(*st));
    KILN_ASSIGN_OR_RETURN(file->gguf_, GgufFile::parse(file->packed_));
    file->format_ = WeightFormat::Safetensors;
    return file;
  }
  if (looks_like_pickle(bytes))
    return make_error("sd: '", label,
                      "' is a PyTorch pickle checkpoint (.ckpt/.pt); kiln does not load pickles, since unpickling "
                      "runs code from the file. Convert it to .safetensors (e.g. with the safetensors package: "
                      "save_file(torch.load(path, weights_only=True)['state_dict'], 'model.safetensors')) or to "
                      "GGUF with stable-diffusion.cpp's `sd-cli -M convert`");
  return make_error("sd: '", label, "' is neither GGUF nor safetensors (it starts with ", leading_bytes(bytes), ")");
}

}  // namespace kiln::sd
