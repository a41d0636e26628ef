#include "diffusion/sd1_models.h"

#include <array>
#include <span>
#include <string_view>
#include <vector>

#include "diffusion/taesd_decoder.h"
#include "diffusion/vae_decoder.h"
#include "models/sd/clip_text.h"
#include "models/sd/taesd.h"
#include "models/sd/unet.h"
#include "models/sd/vae.h"
#include "models/sd/weight_file.h"

namespace kiln::diffusion {
namespace {

using File = std::shared_ptr<const sd::SdWeightFile>;

// The file at `path`, shared by the networks that read it.
Result<File> open_file(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<sd::SdWeightFile> f, sd::SdWeightFile::open(path));
  return File(std::move(f));
}

// The first of `prefixes` under which `file` holds `probe` (a tensor name after "prefix."), or "".
std::string find_prefix(const sd::SdWeightFile& file, std::span<const std::string_view> prefixes,
                        std::string_view probe) {
  for (std::string_view p : prefixes) {
    if (file.gguf().find_tensor(std::string(p) + "." + std::string(probe)) != nullptr) return std::string(p);
  }
  return "";
}

constexpr std::array<std::string_view, 1> kUnetPrefixes = {sd::kSdUnetPrefix};
constexpr std::string_view kUnetProbe = "input_blocks.0.0.weight";
constexpr std::array<std::string_view, 2> kClipPrefixes = {sd::kSd1TextPrefix, "text_model"};
constexpr std::string_view kClipProbe = "embeddings.token_embedding.weight";
constexpr std::array<std::string_view, 1> kTaesdPrefixes = {sd::kTaesdDecoderPrefix};
constexpr std::string_view kTaesdProbe = "0.weight";
constexpr std::array<std::string_view, 1> kVaePrefixes = {sd::kSdVaePrefix};
constexpr std::string_view kVaeProbe = "decoder.conv_in.weight";

// A file holding one part under one of `prefixes`: the file and the prefix.
struct Part {
  File file;
  std::string prefix;
};

// The part among `files` (in order), or an Error naming what was looked for.
Result<Part> find_part(std::span<const File> files, std::span<const std::string_view> prefixes,
                       std::string_view probe, std::string_view what) {
  for (const File& f : files) {
    std::string p = find_prefix(*f, prefixes, probe);
    if (!p.empty()) return Part{f, std::move(p)};
  }
  std::string names;
  for (std::string_view p : prefixes)
    names += (names.empty() ? "" : " or ") + std::string(p) + "." + std::string(probe);
  return make_error("sd model: no ", what, " in the files given (looked for ", names, ")");
}

// The latent's decoder as stable-diffusion.cpp picks it (see the header): TAESD's in --taesd, else
// the VAE in --vae (its names bare or under first_stage_model), else the checkpoint's VAE.
Result<Part> find_decoder(const Sd1ModelPaths& paths, std::span<const File> model_files) {
  if (!paths.taesd.empty()) {
    KILN_ASSIGN_OR_RETURN(File f, open_file(paths.taesd));
    const File files[] = {f};
    return find_part(files, kTaesdPrefixes, kTaesdProbe, "TAESD decoder");
  }
  if (!paths.vae.empty()) {
    KILN_ASSIGN_OR_RETURN(File f, open_file(paths.vae));
    if (f->gguf().find_tensor(std::string(kVaeProbe)) != nullptr) return Part{f, ""};
    const File files[] = {f};
    return find_part(files, kVaePrefixes, kVaeProbe, "VAE decoder in --vae");
  }
  auto part = find_part(model_files, kVaePrefixes, kVaeProbe, "VAE decoder");
  if (!part.ok()) return make_error(part.error().message, "; give --vae or --taesd");
  return part;
}

// Every tensor of `files` with its PyTorch-order shape, for detect_model_version.
Result<ModelVersion> detect(std::span<const File> files) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<const GgufTensorInfo*> infos;
  for (const File& f : files)
    for (const GgufTensorInfo& t : f->gguf().tensors()) infos.push_back(&t);
  shapes.reserve(infos.size());
  std::vector<NamedShape> named;
  named.reserve(infos.size());
  for (const GgufTensorInfo* t : infos) {
    shapes.emplace_back(t->ne.rend() - t->n_dims, t->ne.rend());
    named.push_back({t->name, shapes.back()});
  }
  return detect_model_version(named);
}

}  // namespace

Result<std::unique_ptr<Sd1Models>> Sd1Models::open(const Sd1ModelPaths& paths,
                                                   const NetworkPlacement& placement) {
  std::vector<File> files;  // the model's: -m, --diffusion-model, --clip_l
  for (const std::string* path : {&paths.model, &paths.diffusion_model, &paths.clip_l}) {
    if (path->empty()) continue;
    KILN_ASSIGN_OR_RETURN(File f, open_file(*path));
    files.push_back(std::move(f));
  }
  if (files.empty())
    return make_error("sd model: no model file (give -m, or --diffusion-model and --clip_l)");
  KILN_ASSIGN_OR_RETURN(const ModelVersion version, detect(files));
  if (version.family != ModelFamily::Sd1)
    return make_error("sd model: detected ", describe(version), ", which is not supported yet (SD 1.x only)");
  if (version.variant == UnetVariant::Inpaint || version.variant == UnetVariant::Pix2Pix)
    return make_error("sd model: detected ", describe(version), ", which is not supported yet");
  KILN_ASSIGN_OR_RETURN(const Part unet, find_part(files, kUnetPrefixes, kUnetProbe, "UNet"));
  KILN_ASSIGN_OR_RETURN(const Part clip, find_part(files, kClipPrefixes, kClipProbe, "CLIP-L text encoder"));
  KILN_ASSIGN_OR_RETURN(const Part decoder, find_decoder(paths, files));

  std::unique_ptr<Sd1Models> m(new Sd1Models());
  m->version_ = version;
  const bool tiny = version.variant == UnetVariant::TinyUnet || version.variant == UnetVariant::Sdxs;
  KILN_ASSIGN_OR_RETURN(m->text_encoder_, ClipTextEncoder::create(clip.file, clip.prefix, placement));
  KILN_ASSIGN_OR_RETURN(m->unet_, UnetModel::create(unet.file, unet.prefix, tiny, placement));
  m->placement_ = placement;
  m->decoder_file_ = decoder.file;
  m->vae_prefix_ = decoder.prefix;
  if (!paths.taesd.empty()) {
    KILN_ASSIGN_OR_RETURN(m->decoder_, TaesdDecoder::create(decoder.file, decoder.prefix, placement));
    m->decoder_name_ = "TAESD";
  } else {
    KILN_ASSIGN_OR_RETURN(m->decoder_, VaeDecoder::create(decoder.file, decoder.prefix, placement));
    m->decoder_name_ = "VAE";
  }
  return m;
}

Result<LatentEncoder*> Sd1Models::encoder() {
  if (encoder_) return encoder_.get();
  if (std::string_view(decoder_name_) == "TAESD") {
    if (decoder_file_->gguf().find_tensor(std::string(sd::kTaesdEncoderPrefix) + ".0.weight") == nullptr)
      return make_error("sd model: the TAESD file has no encoder (", sd::kTaesdEncoderPrefix,
                        ".*), which image to image needs");
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<TaesdEncoder> e,
                          TaesdEncoder::create(decoder_file_, sd::kTaesdEncoderPrefix, placement_));
    encoder_ = std::make_unique<LatentEncoder>(std::move(e));
  } else {
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<VaeEncoder> e,
                          VaeEncoder::create(decoder_file_, vae_prefix_, placement_));
    encoder_ = std::make_unique<LatentEncoder>(std::move(e));
  }
  return encoder_.get();
}

}  // namespace kiln::diffusion
