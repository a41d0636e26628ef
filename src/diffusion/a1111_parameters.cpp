#include "diffusion/a1111_parameters.h"

#include <charconv>
#include <filesystem>

namespace kiln::diffusion {
namespace {

std::string base_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

// A number as Python's str(float) prints what the user typed: the shortest text that reads back as
// the same float (so --strength 0.3 is "0.3"), with ".0" on a whole number.
std::string python_float(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace

std::string a1111_parameters(const TextToImageParams& params, int64_t seed, const ParameterFiles& files,
                             bool clip_skip_given, std::optional<float> denoising_strength) {
  std::string s = params.prompt + "\n";
  if (!params.negative_prompt.empty()) s += "Negative prompt: " + params.negative_prompt + "\n";
  s += "Steps: " + std::to_string(params.steps) + ", ";
  s += "CFG scale: " + std::to_string(params.cfg_scale) + ", ";
  s += "Eta: " + std::to_string(params.eta) + ", ";
  s += "Seed: " + std::to_string(seed) + ", ";
  s += "Size: " + std::to_string(params.width) + "x" + std::to_string(params.height) + ", ";
  s += "Model: " + base_name(files.model) + ", ";
  s += "RNG: " + std::string(rng_kind_name(params.rng)) + ", ";
  s += "Sampler: " + std::string(sampler_name(params.sampler)) + " " +
       std::string(scheduler_name(params.scheduler)) + ", ";
  if (denoising_strength) s += "Denoising strength: " + python_float(*denoising_strength) + ", ";
  if (!files.clip_l.empty()) s += "TE: " + base_name(files.clip_l) + ", ";
  if (!files.diffusion_model.empty()) s += "Unet: " + base_name(files.diffusion_model) + ", ";
  if (clip_skip_given) s += "Clip skip: " + std::to_string(params.clip_skip) + ", ";
  s += "Version: kiln";
  return s;
}

}  // namespace kiln::diffusion
