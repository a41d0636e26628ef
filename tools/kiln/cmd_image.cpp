// `kiln image`: text to image, or image to image from -i/--init-img, with an SD 1.x or 2.x model, as
// stable-diffusion.cpp's sd-cli makes it (its flags and, for a flag left out, its defaults), written as PNG
// with A1111's `parameters` text or, by the output's name, as JPEG with them in its EXIF UserComment.
//   kiln image -m MODEL.safetensors [--vae VAE | --taesd TAESD] -p PROMPT [options]
// An init image sets the size unless both -W and -H are given, as sd-cli takes it; one of another
// size than -W x -H is cropped and resized to it, as sd-cli does.
// The networks are placed by kiln's placement flags (--device, --max-mem, --sim-capacity, ...:
// model_flags.h), each a resident of its own owner on that device. Flags for what is not built yet
// (other model families) are refused with "not supported yet" rather than ignored.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "command.h"
#include "diffusion/a1111_parameters.h"
#include "diffusion/init_image.h"
#include "diffusion/image_generation.h"
#include "diffusion/plane_graph.h"
#include "diffusion/sampling_defaults.h"
#include "diffusion/sd_models.h"
#include "diffusion/text_to_image.h"
#include "image/decode.h"
#include "image/jpeg_encode.h"
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
    {{"--clip_g"}, "FILE", "SDXL (--clip_g) is not supported yet"},
};

// The progress of the denoising steps: a line redrawn in place on a terminal, nothing otherwise.
class StepProgress {
 public:
  StepProgress(bool tty, int images) : tty_(tty), images_(images) {}
  void step(int image, int step, int steps) {
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    const double seconds = step > 1 ? std::chrono::duration<double>(now - last_).count() : 0.0;
    last_ = now;
    std::fprintf(stderr, "\rkiln image: image %d/%d, step %d/%d (%.2f s)   ", image + 1, images_, step, steps,
                 seconds);
    std::fflush(stderr);
  }
  void end() {
    if (tty_) std::fputc('\n', stderr);
  }

 private:
  bool tty_;
  int images_;
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

// The output's format by its name, as sd-cli picks it: .png, or .jpg / .jpeg; nullopt for others.
enum class OutputFormat { Png, Jpeg };
std::optional<OutputFormat> output_format(const std::string& path) {
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  std::string ext = path.substr(dot);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".png") return OutputFormat::Png;
  if (ext == ".jpg" || ext == ".jpeg") return OutputFormat::Jpeg;
  return std::nullopt;
}

// sd-cli's JPEG quality.
constexpr int kJpegQuality = 90;

Status write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return make_error("cannot write '", path, "'");
  return ok_status();
}

// sd-cli's --strength default, and the flag left out.
constexpr float kDefaultStrength = 0.75f;
constexpr float kStrengthNotGiven = -1.0f;

// -W / -H left out.
constexpr int64_t kNotGiven = -1;

// The init image of -i at `path`, decoded (PNG or JPEG). Errors: a file that cannot be read or decoded.
Result<RgbImage> load_init_image(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(const std::string bytes, read_text_file(path));
  auto image = decode_image(std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!image.ok()) return make_error("-i ", path, ": ", image.error().message);
  return image;
}

// --vae-tile-size N or XxY (latent cells, as sd-cli's): the sizes into `tiling`, or the error.
std::string parse_tile_size(const std::string& text, TilingParams& tiling) {
  const size_t x = text.find('x');
  int64_t w = 0, h = 0;
  const IntRange range = IntRange::between(1, kMaxPlaneSide);
  std::string e = parse_integer(text.substr(0, x), range, &w);
  h = w;
  if (e.empty() && x != std::string::npos) e = parse_integer(text.substr(x + 1), range, &h);
  if (!e.empty()) return e + " (a size N or XxY in latent cells)";
  tiling.tile_size_x = static_cast<int>(w);
  tiling.tile_size_y = static_cast<int>(h);
  return "";
}

int run_image(int argc, char** argv) {
  SdModelPaths paths;
  TextToImageParams params;
  std::string sampler_arg, scheduler_arg, rng_arg, prediction_arg, out = "output.png";
  int64_t width = kNotGiven, height = kNotGiven;
  int32_t steps = kDefaultSteps, batch = 1, clip_skip = -1;
  bool verbose = false;
  ModelFlags placement;  // --device, --max-mem, ... and -t
  int64_t seed = 42;
  float cfg_scale = kDefaultCfgScale;
  std::string init_img;
  float strength = kStrengthNotGiven;
  std::string unsupported;  // the first not-yet-supported flag's message
  bool vae_tiling = false;
  TilingParams tiling;

  OptionParser p(
      "image",
      "kiln image (-m MODEL | --diffusion-model UNET --clip_l CLIP) [--vae VAE | --taesd TAESD] -p PROMPT "
      "[options]");
  p.description(
      "Text to image, or image to image from -i, with a Stable Diffusion 1.x or 2.x model, as "
      "stable-diffusion.cpp's sd-cli makes it (the same "
      "flags "
      "and defaults, the same pixels for the same seed), decoded by the VAE or TAESD and written as PNG or "
      "JPEG with A1111's parameters.");
  p.path({"-m", "--model"}, &paths.model, "FILE", "single-file checkpoint (.safetensors or GGUF)");
  p.path({"--diffusion-model"}, &paths.diffusion_model, "FILE", "the UNet alone");
  p.path({"--clip_l"}, &paths.clip_l, "FILE", "the text encoder alone (CLIP-L; SD 2.x: OpenCLIP-H)");
  p.path({"--taesd"}, &paths.taesd, "FILE", "TAESD, the tiny autoencoder that decodes the latent");
  p.path({"--vae"}, &paths.vae, "FILE",
         "the VAE (AutoencoderKL) that decodes the latent (default: the checkpoint's; --taesd wins)");
  p.flag({"--vae-tiling"}, &vae_tiling,
         "decode the latent in overlapping tiles, blended (less memory; a whole decode that does not fit "
         "goes tiled by itself)");
  p.custom(
      {"--vae-tile-size"}, [&tiling](const std::string& v) { return parse_tile_size(v, tiling); }, "N|XxY",
      "tile size in latent cells (default: 32)");
  p.value({"--vae-tile-overlap"}, &tiling.target_overlap, "X",
          "tile overlap, a fraction of a tile (default: 0.5)", FloatRange::between(0.0, 0.5));
  p.value({"-p", "--prompt"}, &params.prompt, "TEXT",
          "the prompt, with A1111's (word:1.2) and [word] emphasis");
  p.value({"-n", "--negative-prompt"}, &params.negative_prompt, "TEXT",
          "the negative prompt (default: none)");
  p.value({"-W", "--width"}, &width, "N",
          "image width in pixels, a multiple of 64 (default: the init image's, else 512)");
  p.value({"-H", "--height"}, &height, "N",
          "image height in pixels, a multiple of 64 (default: the init image's, else 512)");
  p.path({"-i", "--init-img"}, &init_img, "FILE",
         "image to image: start from this PNG or JPEG (cropped and resized to -W x -H when both are given, "
         "as sd-cli does)");
  p.value({"--strength"}, &strength, "X",
          "image to image: how much of the init image is re-noised, 0 to 1 (default: 0.75)",
          FloatRange::between(0.0, 1.0));
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
          "CLIP layer to condition on, from the last (default: 1 for SD 1.x, 2 for SD 2.x)");
  p.value({"--prediction"}, &prediction_arg, "NAME",
          "what the UNet predicts: eps or v (default: eps for SD 1.x; for SD 2.x the UNet is asked, as "
          "sd-cli does)");
  declare_threads(p, &placement.threads);
  p.value({"-o", "--output"}, &out, "FILE",
          "the image to write, PNG or JPEG (.jpg, .jpeg) by its name (default: output.png; a batch adds _1, "
          "_2, ...)");
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
  const std::optional<OutputFormat> format = output_format(out);
  if (!format)
    return fail(kCommand, "-o " + out + ": only PNG (.png) and JPEG (.jpg, .jpeg) output are supported", 2);
  if (init_img.empty() && strength != kStrengthNotGiven)
    return fail(kCommand, "--strength is for image to image: give the init image with -i", 2);
  std::optional<RgbImage> init_image;
  if (!init_img.empty()) {
    auto loaded = load_init_image(init_img);
    if (!loaded.ok()) return fail(kCommand, loaded.error().message, 2);
    init_image = std::move(*loaded);
    if (strength == kStrengthNotGiven) strength = kDefaultStrength;
    if (width == kNotGiven || height == kNotGiven) {  // sd-cli takes the image's size unless both are given
      width = init_image->width;
      height = init_image->height;
    }
  }
  std::optional<Sampler> sampler;
  if (!sampler_arg.empty()) {
    sampler = parse_sampler(sampler_arg);
    if (!sampler) return fail(kCommand, "--sampling-method: unknown sampler '" + sampler_arg + "'", 2);
  }
  std::optional<Scheduler> scheduler;
  if (!scheduler_arg.empty()) {
    scheduler = parse_scheduler(scheduler_arg);
    if (!scheduler) return fail(kCommand, "--scheduler: unknown scheduler '" + scheduler_arg + "'", 2);
  }
  const bool clip_skip_given = clip_skip > 0;
  {
    TextToImageParams settings = sd_settings(sampler, scheduler);
    settings.prompt = std::move(params.prompt);
    settings.negative_prompt = std::move(params.negative_prompt);
    params = std::move(settings);
  }
  if (width != kNotGiven) params.width = width;
  if (height != kNotGiven) params.height = height;
  params.steps = steps;
  params.cfg_scale = cfg_scale;
  if (!rng_arg.empty()) {
    auto r = parse_rng_kind(rng_arg);
    if (!r) return fail(kCommand, "--rng: unknown generator '" + rng_arg + "' (cuda or cpu)", 2);
    params.rng = *r;
  }
  std::optional<Prediction> prediction;  // left out: the model's (resolve_for_model)
  if (!prediction_arg.empty()) {
    prediction = parse_prediction(prediction_arg);
    if (!prediction)
      return fail(kCommand, "--prediction '" + prediction_arg + "' is not supported (eps or v)", 2);
  }
  params.seed = seed >= 0 ? seed : static_cast<int64_t>(std::random_device{}() & 0x7fffffff);
  if (Status s = validate(params); !s.ok()) return fail(kCommand, s.error().message, 2);
  if (init_image)  // cropped and resized as sd-cli does when -W x -H differs from its size
    *init_image =
        fit_init_image(*init_image, static_cast<int32_t>(params.width), static_cast<int32_t>(params.height));
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
  auto models = SdModels::open(paths, where);
  if (!models.ok()) return fail(kCommand, models.error().message);
  if (Status st = resolve_for_model(**models, params, clip_skip, prediction); !st.ok())
    return fail(kCommand, st.error().message);
  std::fprintf(
      stderr,
      "kiln image: %s model (%s prediction), %s decoder, %s sampler, %s scheduler, %d steps, %lldx%lld\n",
      describe((*models)->version()).c_str(), params.prediction == Prediction::V ? "v" : "eps",
      (*models)->decoder_name(), std::string(sampler_name(params.sampler)).c_str(),
      std::string(scheduler_name(params.scheduler)).c_str(), params.steps,
      static_cast<long long>(params.width), static_cast<long long>(params.height));

  ImageJob job;
  job.params = params;
  job.batch = batch;
  if (init_image) {
    job.init_pixels = init_image->pixels;
    job.strength = strength;
  }
  job.tiling = vae_tiling ? &tiling : nullptr;
  job.decode_compute_limit = (*device)->largest_free_block().value_or(0);
  StepProgress progress(isatty(STDERR_FILENO) == 1, batch);
  const ParameterFiles files{paths.model, paths.clip_l, paths.diffusion_model};
  const LatentDecoder& decoder = (*models)->decoder();
  ImageHooks hooks;
  hooks.step = [&progress](int image, int step, int steps) { progress.step(image, step, steps); };
  hooks.image = [&](int b, std::vector<uint8_t> pixels) -> Status {
    progress.end();
    if (decoder.auto_tile_size() > 0)
      std::fprintf(stderr,
                   "kiln image: the whole-image decode does not fit the memory; decoded in %d-cell tiles\n",
                   decoder.auto_tile_size());
    RgbImage image;
    image.width = static_cast<int32_t>(params.width);
    image.height = static_cast<int32_t>(params.height);
    image.pixels = std::move(pixels);
    // A1111's parameters: a PNG's `parameters` text, a JPEG's EXIF UserComment.
    const std::string text = a1111_parameters(params, params.seed + b, files, clip_skip_given,
                                              init_image ? std::optional<float>(strength) : std::nullopt);
    KILN_ASSIGN_OR_RETURN(const std::vector<uint8_t> bytes,
                          *format == OutputFormat::Png ? encode_png(image, {{"parameters", text}})
                                                       : encode_jpeg(image, kJpegQuality, text));
    const std::string path = output_path(out, b, batch);
    KILN_TRY(write_bytes(path, bytes));
    std::fprintf(stderr, "kiln image: wrote %s (seed %lld)\n", path.c_str(), static_cast<long long>(params.seed + b));
    return ok_status();
  };
  if (Status s = generate_images(**models, job, hooks); !s.ok()) {
    progress.end();
    return fail(kCommand, s.error().message);
  }
  if (verbose) std::fputs(format_memory_breakdown((*devices)->memory_breakdown()).c_str(), stderr);
  return 0;
}

}  // namespace
}  // namespace kiln::cli

KILN_COMMAND(image, "text or image to image with a Stable Diffusion 1.x or 2.x model (sd-cli's flags)",
             kiln::cli::run_image);
