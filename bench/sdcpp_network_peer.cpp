// stable-diffusion.cpp's side of bench/compare_sd_cpp.py: the evaluation bench/sd_network_speed.cpp
// times in kiln, timed the same way in stable-diffusion.cpp (UNetModelRunner::compute on ggml's CPU
// backend, the runner's defaults: flash attention off, im2col convolutions), and the conversion of
// a file to a GGUF of one weight type through its `convert` (so that both programs read the same
// F16 or Q8_0 bytes). Built by compare_sd_cpp.py against a stable-diffusion.cpp build; never in CI.
//
//   sdcpp_network_peer unet FILE SIDE THREADS EVALS [OUT]  (prints load_ms, eval_ms per evaluation,
//                                                          mean_abs; OUT: the last output's floats)
//   sdcpp_network_peer convert IN OUT TYPE            (TYPE: f16 or q8_0; stable-diffusion.cpp's
//                                                      rules for which tensors keep a wider type)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "ggml-cpu.h"
#include "model/diffusion/unet.hpp"
#include "model_loader.h"
#include "model_manager.h"
#include "stable-diffusion.h"

#include "diffusion/oracle_inputs.h"  // kiln's tests/: the inputs sd_network_speed.cpp evaluates

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s unet FILE SIDE THREADS EVALS [OUT] | convert IN OUT f16|q8_0\n", argv0);
  return 2;
}

int convert_file(const char* in, const char* out, const std::string& type) {
  const sd_type_t t = type == "f16" ? SD_TYPE_F16 : type == "q8_0" ? SD_TYPE_Q8_0 : SD_TYPE_COUNT;
  if (t == SD_TYPE_COUNT) return 2;
  return convert(in, "", out, t, "", false) ? 0 : 1;
}

int time_unet(const char* path, int side, int threads, int evals, const char* out_path) {
  const auto t_load = Clock::now();
  auto manager = std::make_shared<ModelManager>();
  manager->set_n_threads(threads);
  ModelLoader& loader = manager->loader();
  if (!loader.init_from_file(path)) return 1;
  loader.convert_tensors_name();
  ggml_backend_t cpu = ggml_backend_cpu_init();
  const std::string prefix = "model.diffusion_model";
  auto unet = std::make_shared<UNetModelRunner>(cpu, loader.get_tensor_storage_map(), prefix, VERSION_SD1, manager);
  std::map<std::string, ggml_tensor*> tensors;
  unet->get_param_tensors(tensors, prefix);
  if (!manager->register_param_tensors("unet", tensors, ModelManager::ResidencyMode::ParamBackend, cpu, cpu) ||
      !manager->validate_registered_tensors() || !manager->load_all_params_eagerly()) {
    std::fprintf(stderr, "loading the UNet failed\n");
    return 1;
  }
  std::printf("load_ms %.1f\n", ms_since(t_load));

  const int w = side / 8;
  sd::Tensor<float> x({w, w, 4, 1});
  for (size_t i = 0; i < x.values().size(); ++i) x.values()[i] = oracle_inputs::hashed_input(i, 1) * 1.5f;
  sd::Tensor<float> context({768, 77, 1});
  for (size_t i = 0; i < context.values().size(); ++i) context.values()[i] = oracle_inputs::hashed_input(i, 101);
  const auto t = sd::Tensor<float>::from_vector({500.0f});
  double mean_abs = 0;
  sd::Tensor<float> out;
  for (int e = 0; e < evals; ++e) {
    const auto t0 = Clock::now();
    out = unet->compute(threads, x, t, context);
    std::printf("eval_ms %.1f\n", ms_since(t0));
    mean_abs = 0;
    for (float v : out.values()) mean_abs += std::fabs(v);
    mean_abs /= static_cast<double>(out.values().size());
  }
  std::printf("mean_abs %.9f\n", mean_abs);
  std::fflush(stdout);
  if (out_path) {
    FILE* f = std::fopen(out_path, "wb");
    if (!f || std::fwrite(out.values().data(), sizeof(float), out.values().size(), f) != out.values().size() ||
        std::fclose(f) != 0) {
      std::fprintf(stderr, "cannot write %s\n", out_path);
      return 1;
    }
  }
  std::_Exit(0);  // as the oracles: this version's teardown crashes after the work is done
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::strcmp(argv[1], "convert") == 0) return convert_file(argv[2], argv[3], argv[4]);
  if ((argc == 6 || argc == 7) && std::strcmp(argv[1], "unet") == 0) {
    const int side = std::atoi(argv[3]), threads = std::atoi(argv[4]), evals = std::atoi(argv[5]);
    if (side <= 0 || side % 64 != 0 || threads <= 0 || evals <= 0) return usage(argv[0]);
    return time_unet(argv[2], side, threads, evals, argc == 7 ? argv[6] : nullptr);
  }
  return usage(argv[0]);
}
