// Sd1Models: the networks of an SD 1.x text-to-image run, opened from the files sd-cli takes: a
// single-file checkpoint (-m: the UNet under model.diffusion_model, CLIP-L under
// cond_stage_model.transformer.text_model) or its parts (--diffusion-model for the UNet, --clip_l
// for the text encoder, whose tensors may also be a Hugging Face text_model.*), and the decoder of
// the latent, as stable-diffusion.cpp picks it: TAESD's (--taesd, decoder.layers.*) when given, else
// the VAE of --vae (decoder.*, or first_stage_model.decoder.*), else the checkpoint's VAE
// (first_stage_model.*); for img2img, the encoder beside that decoder (encoder()). The version is detected
// from all the model's tensors (detect_model_version) and described for the user; SD 2.x and SDXL are refused
// as not supported yet.
//
// Devices: the networks (and the encoder, when img2img asks for it) are placed as the
// NetworkPlacement says, each a resident of its own owner there (diffusion/device_network.h),
// planning in the same arena. Ownership: owns the files and the networks; the Backend (and the
// arena) must outlive the object. Thread-safety: none.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "diffusion/clip_text_encoder.h"
#include "diffusion/latent_decoder.h"
#include "diffusion/latent_encoder.h"
#include "diffusion/device_network.h"
#include "diffusion/model_version.h"
#include "diffusion/noise_schedule.h"
#include "diffusion/unet_model.h"
#include "models/sd/weight_file.h"

namespace kiln::diffusion {

// Paths as sd-cli's flags name them; empty when not given.
struct Sd1ModelPaths {
  std::string model;            // -m
  std::string diffusion_model;  // --diffusion-model
  std::string clip_l;           // --clip_l
  std::string taesd;            // --taesd
  std::string vae;              // --vae
};

class Sd1Models {
 public:
  // Weights of any type kiln's kernels run (F32, F16, BF16 and the quantized types of GGUF files,
  // as stable-diffusion.cpp's `convert` writes them); each network reads them as
  // stable-diffusion.cpp does (models/sd/sd_layers.h). Errors: a file that does not open
  // (sd::SdWeightFile's messages), no UNet or no text encoder among the files, a version other than
  // SD 1.x, no decoder, tensors the networks cannot bind.
  static Result<std::unique_ptr<Sd1Models>> open(const Sd1ModelPaths& paths, const NetworkPlacement& placement);

  ModelVersion version() const { return version_; }
  ClipTextEncoder& text_encoder() { return *text_encoder_; }
  UnetModel& unet() { return *unet_; }
  // TAESD's or the VAE's; decoder_name() says which ("TAESD", "VAE").
  LatentDecoder& decoder() { return *decoder_; }
  const char* decoder_name() const { return decoder_name_; }
  // The encoder in the decoder's file, loaded on first use (text to image needs none): TAESD's
  // (encoder.layers.*) or the VAE's. Errors: the file has no encoder, tensors it cannot bind.
  Result<LatentEncoder*> encoder();
  // SD 1.x's scaled-linear schedule (stable-diffusion.cpp's default for these models).
  const NoiseSchedule& schedule() const { return schedule_; }

 private:
  Sd1Models() = default;
  ModelVersion version_{};
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
