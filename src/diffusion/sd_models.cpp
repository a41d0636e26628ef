#include "diffusion/sd_models.h"

#include <span>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "diffusion/sampling_defaults.h"
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

// Where a part may lie: a tensor name prefix and a tensor (after "prefix.") that marks it.
struct Location {
  std::string_view prefix;
  std::string_view probe;
};

constexpr Location kUnetLocations[] = {{sd::kSdUnetPrefix, "input_blocks.0.0.weight"}};
constexpr Location kClipLocations[] = {{sd::kSd1TextPrefix, "embeddings.token_embedding.weight"},
                                       {"text_model", "embeddings.token_embedding.weight"},
                                       {sd::kOpenClipTextPrefix, "token_embedding.weight"}};
constexpr Location kTaesdLocations[] = {{sd::kTaesdDecoderPrefix, "0.weight"}};
constexpr Location kVaeLocations[] = {{sd::kSdVaePrefix, "decoder.conv_in.weight"}};

std::string probe_name(const Location& l) { return std::string(l.prefix) + "." + std::string(l.probe); }

// A file holding one part under one of its locations: the file and the prefix.
struct Part {
  File file;
  std::string prefix;
};

// The part among `files` (in order, each at the first of `locations` it holds), or an Error naming
// what was looked for.
Result<Part> find_part(std::span<const File> files, std::span<const Location> locations,
                       std::string_view what) {
  for (const File& f : files) {
    for (const Location& l : locations) {
      if (f->gguf().find_tensor(probe_name(l)) != nullptr) return Part{f, std::string(l.prefix)};
    }
  }
  std::string names;
  for (const Location& l : locations) names += (names.empty() ? "" : " or ") + probe_name(l);
  return make_error("sd model: no ", what, " in the files given (looked for ", names, ")");
}

// The latent's decoder as stable-diffusion.cpp picks it (see the header): TAESD's in --taesd, else
// the VAE in --vae (its names bare or under first_stage_model), else the checkpoint's VAE.
Result<Part> find_decoder(const SdModelPaths& paths, std::span<const File> model_files) {
  if (!paths.taesd.empty()) {
    KILN_ASSIGN_OR_RETURN(File f, open_file(paths.taesd));
    const File files[] = {f};
    return find_part(files, kTaesdLocations, "TAESD decoder");
  }
  if (!paths.vae.empty()) {
    KILN_ASSIGN_OR_RETURN(File f, open_file(paths.vae));
    if (f->gguf().find_tensor(std::string(kVaeLocations[0].probe)) != nullptr) return Part{f, ""};
    const File files[] = {f};
    return find_part(files, kVaeLocations, "VAE decoder in --vae");
  }
  auto part = find_part(model_files, kVaeLocations, "VAE decoder");
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

sd::UnetArch unet_arch_for(ModelVersion version) {
  sd::UnetArch arch;
  arch.tiny = version.variant == UnetVariant::TinyUnet || version.variant == UnetVariant::Sdxs;
  if (version.family != ModelFamily::Sd1) arch.head_channels = 64;  // num_head_channels
  return arch;
}

Result<std::unique_ptr<SdModels>> SdModels::open(const SdModelPaths& paths,
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
  if (version.family == ModelFamily::Sdxl || version.variant == UnetVariant::Inpaint ||
      version.variant == UnetVariant::Pix2Pix)
    return make_error("sd model: detected ", describe(version),
                      ", which is not supported yet (SD 1.x and SD 2.x are)");
  KILN_ASSIGN_OR_RETURN(const Part unet, find_part(files, kUnetLocations, "UNet"));
  KILN_ASSIGN_OR_RETURN(const Part clip, find_part(files, kClipLocations, "CLIP text encoder"));
  KILN_ASSIGN_OR_RETURN(const Part decoder, find_decoder(paths, files));

  std::unique_ptr<SdModels> m(new SdModels());
  m->version_ = version;
  for (const File& f : files) m->has_v_pred_tensor_ |= f->gguf().find_tensor("v_pred") != nullptr;
  KILN_ASSIGN_OR_RETURN(m->text_encoder_, ClipTextEncoder::create(clip.file, clip.prefix, placement));
  KILN_ASSIGN_OR_RETURN(m->unet_,
                        UnetModel::create(unet.file, unet.prefix, unet_arch_for(version), placement));
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

Result<LatentEncoder*> SdModels::encoder() {
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

Result<Prediction> SdModels::default_prediction() {
  if (const std::optional<Prediction> p = diffusion::default_prediction(version_.family, has_v_pred_tensor_)) return *p;
  if (detected_prediction_) return *detected_prediction_;
  // ref: is_using_v_parameterization_for_sd2.
  constexpr int64_t kSide = 8, kContextRows = 2;
  const sd::UnetHParams& hp = unet_->hparams();
  const std::vector<float> x(static_cast<size_t>(hp.in_channels * kSide * kSide), 0.5f);
  const std::vector<float> context(static_cast<size_t>(hp.context_dim * kContextRows), 0.5f);
  KILN_ASSIGN_OR_RETURN(const std::vector<float> out, unet_->eval(x, kSide, kSide, 999.0f, context));
  if (out.size() != x.size())
    return make_error("sd model: the UNet's output (", out.size(), " floats) is not the size of its input (",
                      x.size(), ")");
  double sum = 0.0;
  for (size_t i = 0; i < out.size(); ++i) sum += static_cast<double>(out[i]) - static_cast<double>(x[i]);
  detected_prediction_ = sum / static_cast<double>(out.size()) < -1.0 ? Prediction::V : Prediction::Eps;
  return *detected_prediction_;
}

}  // namespace kiln::diffusion
