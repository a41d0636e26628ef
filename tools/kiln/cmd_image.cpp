// `kiln image`: text to image with an SD 1.x model, as stable-diffusion.cpp's sd-cli makes it (its
// flags and, for a flag left out, its defaults), written as PNG with A1111's `parameters` text.
//   kiln image -m MODEL.safetensors --taesd TAESD.safetensors -p PROMPT [options]
// The networks are placed by kiln's placement flags (--device, --max-mem, --sim-capacity, ...:
// model_flags.h), each a resident of its own owner on that device. Flags for what is not built yet
// (the VAE, img2img, tiling, other model families) are refused with "not supported yet" rather
// than ignored.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "command.h"
#include "diffusion/a1111_parameters.h"
#include "diffusion/sampling_defaults.h"
#include "diffusion/sd1_models.h"
#include "diffusion/text_to_image.h"
#include "image/png_encode.h"
#include "messages.h"
#include "model_flags.h"
#include "options.h"
#include "runtime/memory_breakdown.h"
#include "user_files.h"

namespace kiln::cli {
namespace {

using namespace kiln::diffusion;

constexpr const char* kCommand = "image";

// Flags the command declares but whose feature is not built yet: the flag and why.
struct Unsupported {
  std::vector<std::string> names;
  std::string metavar;  // empty for a flag without a value
  std::string what;
};
const Unsupported kUnsupported[] = {
    {{"--vae"}, "FILE", "the VAE is not supported yet; decode with --taesd"},
    {{"--clip_g"}, "FILE", "SDXL (--clip_g) is not supported yet"},
    {{"-i", "--init-img"}, "FILE", "image to image (-i/--init-img) is not supported yet"},
    {{"--strength"}, "X", "image to image (--strength) is not supported yet"},
    {{"--vae-tiling"}, "", "tiled decoding (--vae-tiling) is not supported yet"},
};

// The progress of the denoising steps: a line redrawn in place on a terminal, nothing otherwise.
class StepProgress {
 public:
  explicit StepProgress(bool tty) : tty_(tty) {}
  void begin(int image, int images) {
    image_ = image;
    images_ = images;
    last_ = std::chrono::steady_clock::now();
  }
  void step(int step, int steps) {
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    last_ = now;
    std::fprintf(stderr, "\rkiln image: image %d/%d, step %d/%d (%.2f s)   ", image_ + 1, images_, step,
                 steps, step > 1 ? seconds : 0.0);
    std::fflush(stderr);
  }
  void end() {
    if (tty_) std::fputc('\n', stderr);
  }

 private:
  bool tty_;
  int image_ = 0, images_ = 1;
  std::chrono::steady_clock::time_point last_;
};

// sd-cli's naming of a batch: OUT.png, or OUT_1.png, OUT_2.png ... for more than one image.
std::string output_path(const std::string& path, int index, int count) {
  if (count == 1) return path;
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  const std::string stem = has_ext ? path.substr(0, dot) : path;
  return stem + "_" + std::to_string(index + 1) + (has_ext ? path.substr(dot) : ".png");
}

bool ends_with_png(const std::string& path) {
  if (path.size() < 4) return false;
  std::string ext = path.substr(path.size() - 4);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext == ".png";
}

Status write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return make_error("cannot write '", path, "'");
  return ok_status();
}

int run_image(int argc, char** argv) {
  Sd1ModelPaths paths;
  TextToImageParams params;
  std::string sampler_arg, scheduler_arg, rng_arg, prediction_arg, out = "output.png";
  int32_t width = 512, height = 512, steps = kDefaultSteps, batch = 1, clip_skip = -1;
  bool verbose = false;
  ModelFlags placement;  // --device, --max-mem, ... and -t
  int64_t seed = 42;
  float cfg_scale = kDefaultCfgScale;
  std::string unsupported;  // the first not-yet-supported flag's message

  OptionParser p(
      "image",
      "kiln image (-m MODEL | --diffusion-model UNET --clip_l CLIP) --taesd TAESD -p PROMPT [options]");
  p.description(
      "Text to image with a Stable Diffusion 1.x model, as stable-diffusion.cpp's sd-cli makes it (the same "
      "flags "
      "and defaults, the same pixels for the same seed), decoded by TAESD and written as PNG with A1111's "
      "`parameters` text.");
  p.path({"-m", "--model"}, &paths.model, "FILE", "single-file checkpoint (.safetensors or GGUF)");
  p.path({"--diffusion-model"}, &paths.diffusion_model, "FILE", "the UNet alone");
  p.path({"--clip_l"}, &paths.clip_l, "FILE", "the CLIP-L text encoder alone");
  p.path({"--taesd"}, &paths.taesd, "FILE", "TAESD, the tiny autoencoder that decodes the latent");
  p.value({"-p", "--prompt"}, &params.prompt, "TEXT",
          "the prompt, with A1111's (word:1.2) and [word] emphasis");
  p.value({"-n", "--negative-prompt"}, &params.negative_prompt, "TEXT",
          "the negative prompt (default: none)");
  p.value({"-W", "--width"}, &width, "N", "image width in pixels, a multiple of 64 (default: 512)");
  p.value({"-H", "--height"}, &height, "N", "image height in pixels, a multiple of 64 (default: 512)");
  p.value({"--steps"}, &steps, "N", "sampling steps (default: 20)");
  p.value({"--cfg-scale"}, &cfg_scale, "X",
          "classifier-free guidance scale (default: 7.0; 1: no negative pass)");
  p.value(
      {"--sampling-method"}, &sampler_arg, "NAME",
      "euler_a (default), euler, heun, dpm2, dpm++2s_a, dpm++2m, dpm++2mv2, ipndm, lcm, ddim_trailing, tcd");
  p.value({"--scheduler"}, &scheduler_arg, "NAME",
          "discrete, karras, exponential, ays, sgm_uniform, simple, lcm (default: the sampler's, as sd-cli)");
  p.value({"-s", "--seed"}, &seed, "N", "random seed (default: 42; below 0: a random one)");
  p.value({"--rng"}, &rng_arg, "NAME", "noise generator: cuda (default, A1111's) or cpu (ComfyUI's)");
  p.value({"-b", "--batch-count"}, &batch, "N", "images to make, seeds SEED, SEED + 1, ... (default: 1)",
          IntRange::between(1, 64));
  p.value({"--clip-skip"}, &clip_skip, "N",
          "CLIP layer to condition on, from the last (default: 1 for SD 1.x)");
  p.value({"--prediction"}, &prediction_arg, "NAME", "what the UNet predicts: eps (SD 1.x's default) or v");
  declare_threads(p, &placement.threads);
  p.value({"-o", "--output"}, &out, "FILE",
          "the PNG to write (default: output.png; a batch adds _1, _2, ...)");
  placement.declare_placement(p);
  p.flag({"-v", "--verbose"}, &verbose,
         "print each device's memory at exit (budget, counted bytes, each network's weights and evicted "
         "residents)");
  for (const Unsupported& u : kUnsupported) {
    const auto refuse = [&unsupported, &u](const std::string&) {
      if (unsupported.empty()) unsupported = u.what;
      return std::string();
    };
    p.custom(u.names, refuse, u.metavar, u.what);
  }
  if (auto code = p.parse(argc, argv)) return *code;
  if (!unsupported.empty()) return fail(kCommand, unsupported, 2);
  if (auto code = placement.list_devices_if_asked(kCommand)) return *code;

  // Every flag checked before a file is opened or anything allocated.
  if (params.prompt.empty()) return fail(kCommand, "give the prompt with -p", 2);
  if (placement.split.devices.size() > 1)
    return fail(kCommand, "--device: the networks run on one device (splitting them is not supported yet)",
                2);
  if (!ends_with_png(out))
    return fail(kCommand, "-o " + out + ": only PNG output (.png) is supported yet", 2);
  params.width = width;
  params.height = height;
  params.steps = steps;
  params.cfg_scale = cfg_scale;
  params.sampler = default_sampler(ModelFamily::Sd1);
  if (!sampler_arg.empty()) {
    auto s = parse_sampler(sampler_arg);
    if (!s) return fail(kCommand, "--sampling-method: unknown sampler '" + sampler_arg + "'", 2);
    params.sampler = *s;
  }
  params.scheduler = default_scheduler(params.sampler);
  if (!scheduler_arg.empty()) {
    auto s = parse_scheduler(scheduler_arg);
    if (!s) return fail(kCommand, "--scheduler: unknown scheduler '" + scheduler_arg + "'", 2);
    params.scheduler = *s;
  }
  params.eta = default_eta(params.sampler);
  params.rng = kDefaultRng;
  if (!rng_arg.empty()) {
    auto r = parse_rng_kind(rng_arg);
    if (!r) return fail(kCommand, "--rng: unknown generator '" + rng_arg + "' (cuda or cpu)", 2);
    params.rng = *r;
  }
  params.prediction = *default_prediction(ModelFamily::Sd1, false);
  if (!prediction_arg.empty()) {
    auto pr = parse_prediction(prediction_arg);
    if (!pr) return fail(kCommand, "--prediction '" + prediction_arg + "' is not supported (eps or v)", 2);
    params.prediction = *pr;
  }
  const bool clip_skip_given = clip_skip > 0;
  params.clip_skip = clip_skip_given ? clip_skip : default_clip_skip(ModelFamily::Sd1);
  params.seed = seed >= 0 ? seed : static_cast<int64_t>(std::random_device{}() & 0x7fffffff);
  if (Status s = validate(params); !s.ok()) return fail(kCommand, s.error().message, 2);
  for (int b = 0; b < batch; ++b) {
    if (Status s = check_output_path(output_path(out, b, batch)); !s.ok())
      return fail(kCommand, s.error().message);
  }

  auto devices = DeviceRegistry::create(placement.device_options());
  if (!devices.ok()) return fail(kCommand, devices.error().message, 2);
  auto device = (*devices)->find(placement.device);
  if (!device.ok()) return fail(kCommand, device.error().message, 2);
  const NetworkPlacement where{&(*devices)->backend(**device), &(*devices)->arena(**device),
                               placement.weight_options(kCommand)};
  auto models = Sd1Models::open(paths, where);
  if (!models.ok()) return fail(kCommand, models.error().message);
  std::fprintf(stderr, "kiln image: %s model, %s sampler, %s scheduler, %d steps, %lldx%lld\n",
               describe((*models)->version()).c_str(), std::string(sampler_name(params.sampler)).c_str(),
               std::string(scheduler_name(params.scheduler)).c_str(), params.steps,
               static_cast<long long>(params.width), static_cast<long long>(params.height));
  auto conditioning = encode_conditioning((*models)->text_encoder(), params);
  if (!conditioning.ok()) return fail(kCommand, conditioning.error().message);

  StepProgress progress(isatty(STDERR_FILENO) == 1);
  const StepObserver observe = [&progress](int step, int n, std::span<const float>) {
    progress.step(step, n);
  };
  const ParameterFiles files{paths.model, paths.clip_l, paths.diffusion_model};
  for (int b = 0; b < batch; ++b) {
    progress.begin(b, batch);
    auto latent = sample_latent((*models)->unet(), (*models)->schedule(), *conditioning, params, b, observe);
    progress.end();
    if (!latent.ok()) return fail(kCommand, latent.error().message);
    auto pixels = decode_to_pixels((*models)->taesd(), *latent, params);
    if (!pixels.ok()) return fail(kCommand, pixels.error().message);
    RgbImage image;
    image.width = static_cast<int32_t>(params.width);
    image.height = static_cast<int32_t>(params.height);
    image.pixels = std::move(*pixels);
    auto png = encode_png(
        image, {{"parameters", a1111_parameters(params, params.seed + b, files, clip_skip_given)}});
    if (!png.ok()) return fail(kCommand, png.error().message);
    const std::string path = output_path(out, b, batch);
    if (Status s = write_bytes(path, *png); !s.ok()) return fail(kCommand, s.error().message);
    std::fprintf(stderr, "kiln image: wrote %s (seed %lld)\n", path.c_str(),
                 static_cast<long long>(params.seed + b));
  }
  if (verbose) std::fputs(format_memory_breakdown((*devices)->memory_breakdown()).c_str(), stderr);
  return 0;
}

}  // namespace
}  // namespace kiln::cli

KILN_COMMAND(image, "text to image with a Stable Diffusion 1.x model (sd-cli's flags)", kiln::cli::run_image);
