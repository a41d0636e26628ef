// Sd1Models: the networks of an SD 1.x text-to-image run, opened from the files sd-cli takes: a
// single-file checkpoint (-m: the UNet under model.diffusion_model, CLIP-L under
// cond_stage_model.transformer.text_model) or its parts (--diffusion-model for the UNet, --clip_l
// for the text encoder, whose tensors may also be a Hugging Face text_model.*), and TAESD's decoder
// (--taesd, decoder.layers.*). The version is detected from all the model's tensors
// (detect_model_version) and described for the user; SD 2.x and SDXL are refused as not supported
// yet, as is a model without TAESD (the VAE is not built yet).
//
// Devices: the three networks are placed as the NetworkPlacement says, each a resident of its own
// owner there (diffusion/device_network.h), planning in the same arena. Ownership: owns the files
// and the networks; the Backend (and the arena) must outlive the object. Thread-safety: none.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "diffusion/clip_text_encoder.h"
#include "diffusion/device_network.h"
#include "diffusion/model_version.h"
#include "diffusion/noise_schedule.h"
#include "diffusion/taesd_decoder.h"
#include "diffusion/unet_model.h"

namespace kiln::diffusion {

// Paths as sd-cli's flags name them; empty when not given.
struct Sd1ModelPaths {
  std::string model;            // -m
  std::string diffusion_model;  // --diffusion-model
  std::string clip_l;           // --clip_l
  std::string taesd;            // --taesd
};

class Sd1Models {
 public:
  // Errors: a file that does not open (sd::SdWeightFile's messages) or holds quantized tensors
  // (not supported yet), no UNet or no text encoder
  // among the files, a version other than SD 1.x, no TAESD, tensors the networks cannot bind.
  static Result<std::unique_ptr<Sd1Models>> open(const Sd1ModelPaths& paths, const NetworkPlacement& placement);

  ModelVersion version() const { return version_; }
  ClipTextEncoder& text_encoder() { return *text_encoder_; }
  UnetModel& unet() { return *unet_; }
  TaesdDecoder& taesd() { return *taesd_; }
  // SD 1.x's scaled-linear schedule (stable-diffusion.cpp's default for these models).
  const NoiseSchedule& schedule() const { return schedule_; }

 private:
  Sd1Models() = default;
  ModelVersion version_{};
  NoiseSchedule schedule_;
  std::unique_ptr<ClipTextEncoder> text_encoder_;
  std::unique_ptr<UnetModel> unet_;
  std::unique_ptr<TaesdDecoder> taesd_;
};

}  // namespace kiln::diffusion
