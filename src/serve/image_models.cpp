#include "serve/image_models.h"

#include <algorithm>
#include <thread>

namespace kiln::serve {

ImageModels::ImageModels(std::vector<ModelSpec> specs, std::shared_ptr<DeviceRegistry> devices,
                         std::string device, WeightOptions weights, int32_t queue_limit)
    : devices_(std::move(devices)), device_(std::move(device)), weights_(std::move(weights)),
      queue_limit_(queue_limit) {
  for (ModelSpec& spec : specs) entries_.push_back({std::move(spec), nullptr});
}

ImageModels::~ImageModels() {
  stop();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !busy_ && waiting_ == 0; });
  lock.unlock();
  entries_.clear();  // the networks go before devices_
}

std::vector<ImageModels::Listing> ImageModels::list() const {
  std::lock_guard lock(mu_);
  std::vector<Listing> out;
  for (const Entry& e : entries_)
    out.push_back({e.spec.name, e.spec.path.empty() ? e.spec.diffusion_model : e.spec.path, e.models != nullptr});
  return out;
}

bool ImageModels::has(const std::string& name) const { return find(name) != nullptr; }

diffusion::ParameterFiles ImageModels::parameter_files(const std::string& name) const {
  const Entry* e = find(name);
  if (e == nullptr) return {};
  return {e->spec.path, e->spec.clip_l, e->spec.diffusion_model};
}

ImageModels::Entry* ImageModels::find(const std::string& name) {
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.spec.name == name; });
  return it == entries_.end() ? nullptr : &*it;
}

const ImageModels::Entry* ImageModels::find(const std::string& name) const {
  return const_cast<ImageModels*>(this)->find(name);
}

std::optional<HttpError> ImageModels::run(const std::string& name, diffusion::ImageJob& job, int clip_skip,
                                          const diffusion::ImageHooks& hooks) {
  Entry* e = find(name);
  if (e == nullptr) return HttpError{404, "model '" + name + "' is not one of the server's image models"};
  {
    std::unique_lock lock(mu_);
    if (stopping_) return HttpError{503, "the server is stopping"};
    if (busy_ && waiting_ >= queue_limit_)
      return HttpError{503, "the image queue is full (" + std::to_string(queue_limit_) +
                                " jobs wait; --queue): retry later"};
    ++waiting_;
    cv_.wait(lock, [this] { return !busy_ || stopping_; });
    --waiting_;
    if (stopping_) {
      cv_.notify_all();
      return HttpError{503, "the server is stopping"};
    }
    busy_ = true;
    interrupted_ = false;
    progress_ = {.active = true, .model = name, .image = 0, .images = job.batch};
    started_ = Clock::now();
  }
  // The turn ends however the job ends.
  struct EndTurn {
    ImageModels* self;
    ~EndTurn() {
      std::lock_guard lock(self->mu_);
      self->busy_ = false;
      self->progress_ = {};
      self->cv_.notify_all();
    }
  } end_turn{this};

  diffusion::ImageHooks own = hooks;
  own.step = [this, &hooks](int image, int step, int steps) {
    {
      std::lock_guard lock(mu_);
      progress_.image = image;
      progress_.step = step;
      progress_.steps = steps;
    }
    if (hooks.step) hooks.step(image, step, steps);
  };
  own.cancelled = [this, &hooks] { return interrupted_.load() || (hooks.cancelled && hooks.cancelled()); };
  // The arena's turn is a plain mutex: a job that asked for it again at once would win it back
  // before a text engine woken by its release. A pause between passes hands the turn over, so a
  // chat stream gets a token in per UNet evaluation rather than waiting out the whole image.
  own.between_passes = [] { std::this_thread::sleep_for(kTurnHandover); };

  if (e->models == nullptr) {
    auto device = devices_->find(device_);
    if (!device.ok()) return HttpError{500, device.error().message};
    const diffusion::NetworkPlacement where{&devices_->backend(**device), &devices_->arena(**device), weights_};
    diffusion::SdModelPaths paths;
    paths.model = e->spec.path;
    paths.diffusion_model = e->spec.diffusion_model;
    paths.clip_l = e->spec.clip_l;
    paths.taesd = e->spec.taesd;
    paths.vae = e->spec.vae;
    auto opened = diffusion::SdModels::open(paths, where);
    if (!opened.ok()) return HttpError{500, "image model '" + name + "': " + opened.error().message};
    std::lock_guard lock(mu_);  // list() reads it
    e->models = std::move(*opened);
  }
  if (Status st = diffusion::resolve_for_model(*e->models, job.params, clip_skip, std::nullopt); !st.ok())
    return HttpError{500, "image model '" + name + "': " + st.error().message};
  if (job.decode_compute_limit == 0) {
    if (auto device = devices_->find(device_); device.ok())
      job.decode_compute_limit = (*device)->largest_free_block().value_or(0);
  }
  const Status s = diffusion::generate_images(*e->models, job, own);
  if (s.ok()) return std::nullopt;
  if (s.error().message == diffusion::kImagesCancelled)
    return HttpError{503, std::string(diffusion::kImagesCancelled) +
                              (interrupted_.load() ? " (POST /sdapi/v1/interrupt, or the server stops)" : "")};
  return HttpError{500, "image model '" + name + "': " + s.error().message};
}

ImageModels::Progress ImageModels::progress() const {
  std::lock_guard lock(mu_);
  Progress p = progress_;
  if (p.active) p.elapsed_seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  return p;
}

bool ImageModels::interrupt() {
  std::lock_guard lock(mu_);
  if (!busy_) return false;
  interrupted_ = true;
  return true;
}

void ImageModels::stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  if (busy_) interrupted_ = true;
  cv_.notify_all();
}

}  // namespace kiln::serve
