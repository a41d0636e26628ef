// ImageModels: the image models of a server of many models (ModelSpec::kind Image: SD 1.x and 2.x), beside the
// text models of the ModelRouter and on the same DeviceRegistry: each model's networks (CLIP, UNet,
// decoder, the encoder for image to image) are residents of owners of their own on the server's
// device (diffusion/device_network.h) and compute in the device's shared arena, so on a --max-mem
// budget the text models and the image models evict each other, least recently used first, and
// come back bit-exact when they compute again.
//
// A model opens on its first job and stays open. Jobs run one at a time (the device's image jobs
// take turns; a text model's engine computes between their passes, each pass holding the arena's
// turn): at most `queue_limit` jobs wait, one more is refused with 503. A job is cancelled at its
// next UNet evaluation by its own `cancelled` hook (a client gone), by interrupt() (A1111's
// /sdapi/v1/interrupt: the running job) or by stop().
//
// Thread-safety: every method may be called from any thread; run() blocks its caller for the job.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backends/device_registry.h"
#include "diffusion/a1111_parameters.h"
#include "diffusion/image_generation.h"
#include "diffusion/sd_models.h"
#include "serve/api_json.h"
#include "serve/server.h"

namespace kiln::serve {

// How long a job pauses between its passes for a text engine waiting for the arena to take it.
inline constexpr std::chrono::milliseconds kTurnHandover{2};

class ImageModels {
 public:
  // `specs`: the image models (kind Image); `device`: the DeviceRegistry name their networks run
  // on; `weights`: how their weights are held (--no-mmap, --mlock).
  ImageModels(std::vector<ModelSpec> specs, std::shared_ptr<DeviceRegistry> devices, std::string device,
              WeightOptions weights, int32_t queue_limit);
  ~ImageModels();  // stop(), then closes the models before the registry goes

  struct Listing {
    std::string name, path;  // path: the checkpoint, else the diffusion model's file
    bool loaded = false;
  };
  std::vector<Listing> list() const;  // in the order of the specs
  bool has(const std::string& name) const;
  const std::string& first() const { return entries_.front().spec.name; }  // at least one model
  // The files of `name` as A1111's parameters text names them (an unknown name: none).
  diffusion::ParameterFiles parameter_files(const std::string& name) const;

  // Runs `job` with the model `name` (opened first when it is not) once the jobs before it are
  // done, its params first resolved for the model (diffusion::resolve_for_model with `clip_skip`,
  // <= 0: the model's; the prediction the model's), in place; `hooks` as generate_images takes them (their `cancelled` asked beside interrupt() and
  // stop()). nullopt when it succeeded; else 404 (unknown model), 503 (queue full, stopping, a
  // cancelled job: its message starts with diffusion::kImagesCancelled), 500 for a model that does
  // not open or a network's error.
  // The model's networks stay open on the device (residents the manager may evict) after the job.
  std::optional<HttpError> run(const std::string& name, diffusion::ImageJob& job, int clip_skip,
                               const diffusion::ImageHooks& hooks);

  // What /sdapi/v1/progress reports of the running job.
  struct Progress {
    bool active = false;
    std::string model;
    int image = 0, images = 0;  // the image being made (0-based) and the batch
    int step = 0, steps = 0;    // its denoise step (1-based, 0 before the first)
    double elapsed_seconds = 0;  // since the job started
  };
  Progress progress() const;
  // Cancels the running job (none: nothing happens); true when there was one.
  bool interrupt();
  // Cancels the running job and refuses new ones.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    ModelSpec spec;
    // Opened by the first job (set under mu_); used by the running job only.
    std::unique_ptr<diffusion::SdModels> models;
  };
  Entry* find(const std::string& name);
  const Entry* find(const std::string& name) const;

  std::shared_ptr<DeviceRegistry> devices_;
  std::string device_;
  WeightOptions weights_;
  int32_t queue_limit_;
  std::vector<Entry> entries_;  // fixed after construction

  mutable std::mutex mu_;
  std::condition_variable cv_;  // busy_ or stopping_ changed
  bool busy_ = false;           // a job runs
  int32_t waiting_ = 0;         // jobs waiting for their turn
  bool stopping_ = false;
  std::atomic<bool> interrupted_{false};  // the running job is to stop
  Progress progress_;                     // under mu_
  Clock::time_point started_;             // under mu_: the running job's start
};

}  // namespace kiln::serve
