// Images and audio on the command line, with llama.cpp's flags: --mmproj FILE (the model's vision
// and/or audio encoder and projector), --mmproj-device / --no-mmproj-offload (where its encoders
// run), --image FILE and --audio FILE (repeatable; placed at the prompt's markers in command-line
// order), --max-audio-seconds S, for `run` and `chat`.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "llm/context.h"
#include "llm/audio_encoder.h"
#include "llm/media_prompt.h"
#include "llm/vision_encoder.h"
#include "model_flags.h"
#include "options.h"

namespace kiln::cli {

// Where the mmproj's encoders run, with llama.cpp's flags (for `run`, `chat`, `bench` and `serve`).
struct EncoderDeviceFlags {
  std::string device;       // -mmdev/--mmproj-device (none: the CPU); empty: the model's main device
  bool no_offload = false;  // --no-mmproj-offload: the CPU, whatever -mmdev says
  void declare(OptionParser& p);
  // The device's name; empty: the model's main device.
  std::string resolved() const { return no_offload ? "cpu" : device; }
};

// The models of an mmproj's two sides; either may be null.
struct MediaModelsOwned {
  std::shared_ptr<const VisionModel> vision;
  std::shared_ptr<const AudioModel> audio;
};

struct MediaFlags {
  std::string mmproj;               // empty: no vision
  EncoderDeviceFlags encoder_device_flags;  // -mmdev, --no-mmproj-offload
  std::vector<std::string> images;  // in order
  std::vector<std::string> audio;   // in order
  std::vector<bool> order_is_audio;  // every --image (false) and --audio (true) in command-line order
  float max_audio_seconds = static_cast<float>(audio::DecodeOptions{}.max_seconds);

  // Declares --mmproj, -mmdev, --(no-)mmproj-offload and --image on `p`, and with `audio` --audio
  // and --max-audio-seconds (the commands that take audio: `run`, `chat`).
  void declare(OptionParser& p, bool audio = false);
  // The mmproj of --mmproj, checked against `model`; null without --mmproj. An error when it
  // cannot be loaded, or when images are given without it.
  // With --audio and no --image, the vision side is not loaded (null): the file may hold audio only.
  Result<std::shared_ptr<const VisionModel>> load_vision(const Model& model) const;
  // The audio side of --mmproj; null without --audio. An error when it cannot be loaded (an mmproj
  // without an audio encoder says so), or when audio is given without --mmproj.
  Result<std::shared_ptr<const AudioModel>> load_audio(const Model& model) const;
  // Both sides --mmproj declares (mmproj_encoders), for `chat`, whose later messages may bring
  // either: each null when the file lacks it, both without --mmproj. An error when one cannot be
  // loaded, or when --image or --audio needs a side that is not there.
  Result<MediaModelsOwned> load_declared(const Model& model) const;
  bool any_media() const { return !images.empty() || !audio.empty(); }
  // The media in command-line order, read and prepared (errors name the file and the flag).
  Result<std::vector<MediaItem>> read_media(const VisionModel* vision, const AudioModel* audio_model) const;

  // The mmproj's encoders for the context of `mc` (which must outlive them), made with `context`:
  // on -mmdev's device (else the model's main device), planning in that device's compute arena, with the
  // context's attention path; their weights held and prepared with `weights` (the model's);
  // `cache_entries` embeddings kept. Errors: -mmdev's device is not open, the encoder's.
  Result<std::unique_ptr<VisionEncoder>> vision_encoder(std::shared_ptr<const VisionModel> model,
                                                        const ModelContext& mc, const ContextOptions& context,
                                                        const WeightOptions& weights,
                                                        size_t cache_entries = EncoderOptions{}.cache_entries) const;
  Result<std::unique_ptr<AudioEncoder>> audio_encoder(std::shared_ptr<const AudioModel> model, const ModelContext& mc,
                                                      const ContextOptions& context,
                                                      const WeightOptions& weights) const;

 private:
  // The encoders' options on `device`.
  EncoderOptions encoder_options(const ModelContext& mc, Device& device, const ContextOptions& context,
                                 const WeightOptions& weights) const;
};

// The image file at `path`, prepared for `vision`; errors name the file ("'cat.svg': image: SVG is
// not supported ...").
Result<std::shared_ptr<const PreparedImage>> read_image(const VisionModel& vision, const std::string& path);

// The audio file at `path` (WAV, FLAC, MP3), cut into `model`'s chunks; errors name the file.
Result<std::vector<std::shared_ptr<const PreparedAudio>>> read_audio(const AudioModel& model, const std::string& path,
                                                                     float max_seconds);

}  // namespace kiln::cli
