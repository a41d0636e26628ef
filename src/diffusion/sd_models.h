// SdModels: the networks of an SD 1.x or SD 2.x text-to-image run, opened from the files sd-cli
// takes: a single-file checkpoint (-m: the UNet under model.diffusion_model; the text encoder, CLIP-L
// under cond_stage_model.transformer.text_model or, for SD 2.x, OpenCLIP-H under
// cond_stage_model.model in OpenCLIP's spelling) or its parts (--diffusion-model for the UNet,
// --clip_l for the text encoder, whose tensors may also be a Hugging Face text_model.*), and the
// decoder of the latent, as stable-diffusion.cpp picks it: TAESD's (--taesd, decoder.layers.*) when
// given, else the VAE of --vae (decoder.*, or first_stage_model.decoder.*), else the checkpoint's VAE
// (first_stage_model.*); for img2img, the encoder beside that decoder (encoder()). The version is
// detected from all the model's tensors (detect_model_version) and described for the user; SDXL,
// inpainting and instruct-pix2pix models are refused as not supported yet.
//
// Devices: the networks (and the encoder, when img2img asks for it) are placed as the
// NetworkPlacement says, each a resident of its own owner there (diffusion/device_network.h),
// planning in the same arena. Ownership: owns the files and the networks; the Backend (and the
// arena) must outlive the object. Thread-safety: none.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/result.h"
#include "diffusion/clip_text_encoder.h"
#include "diffusion/device_network.h"
#include "diffusion/latent_decoder.h"
#include "diffusion/latent_encoder.h"
#include "diffusion/model_version.h"
#include "diffusion/noise_schedule.h"
#include "diffusion/prediction.h"
#include "diffusion/unet_model.h"
#include "models/sd/weight_file.h"

namespace kiln::diffusion {

// Paths as sd-cli's flags name them; empty when not given.
struct SdModelPaths {
  std::string model;            // -m
  std::string diffusion_model;  // --diffusion-model
  std::string clip_l;           // --clip_l (SD 2.x: its OpenCLIP-H)
  std::string taesd;            // --taesd
  std::string vae;              // --vae
};

// The UNet architecture stable-diffusion.cpp builds for `version` (UNetConfig::detect_from_weights'
// per-version part).
sd::UnetArch unet_arch_for(ModelVersion version);

class SdModels {
 public:
  // Weights of any type kiln's kernels run (F32, F16, BF16 and the quantized types of GGUF files,
  // as stable-diffusion.cpp's `convert` writes them); each network reads them as
  // stable-diffusion.cpp does (models/sd/sd_layers.h). Errors: a file that does not open
  // (sd::SdWeightFile's messages), no UNet or no text encoder among the files, a version not
  // supported yet, no decoder, tensors the networks cannot bind.
  static Result<std::unique_ptr<SdModels>> open(const SdModelPaths& paths, const NetworkPlacement& placement);

  ModelVersion version() const { return version_; }
  ClipTextEncoder& text_encoder() { return *text_encoder_; }
  UnetModel& unet() { return *unet_; }
  // TAESD's or the VAE's; decoder_name() says which ("TAESD", "VAE").
  LatentDecoder& decoder() { return *decoder_; }
  const char* decoder_name() const { return decoder_name_; }
  // The encoder in the decoder's file, loaded on first use (text to image needs none): TAESD's
  // (encoder.layers.*) or the VAE's. Errors: the file has no encoder, tensors it cannot bind.
  Result<LatentEncoder*> encoder();
  // The scaled-linear schedule (stable-diffusion.cpp's for SD 1.x and 2.x).
  const NoiseSchedule& schedule() const { return schedule_; }
  // What the UNet predicts when --prediction is left out, as stable-diffusion.cpp decides it
  // (sampling_defaults.h's default_prediction); for SD 2.x the UNet runs once on a fixed input
  // (is_using_v_parameterization_for_sd2: an 8 x 8 latent and a 2-row context of 0.5 at timestep
  // 999; v when the output's mean minus the input's is below -1), once: the answer is kept for the
  // model's later jobs. Errors: the UNet's.
  Result<Prediction> default_prediction();

 private:
  SdModels() = default;
  ModelVersion version_{};
  bool has_v_pred_tensor_ = false;  // a `v_pred` tensor in the model's files (SDXL's v marker)
  std::optional<Prediction> detected_prediction_;  // SD 2.x: the UNet run's answer, once made
  NoiseSchedule schedule_;
  std::unique_ptr<ClipTextEncoder> text_encoder_;
  std::unique_ptr<UnetModel> unet_;
  std::unique_ptr<LatentDecoder> decoder_;
  const char* decoder_name_ = "";
  NetworkPlacement placement_;  // where encoder() places the encoder
  std::shared_ptr<const sd::SdWeightFile> decoder_file_;
  std::string vae_prefix_;  // the VAE's prefix in decoder_file_; unused for TAESD
  std::unique_ptr<LatentEncoder> encoder_;
};

}  // namespace kiln::diffusion
