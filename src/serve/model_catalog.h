// The models of a server of many models, from where `kiln serve` names them: `-m NAME=PATH`,
// `--models-dir DIR` (each *.gguf, named by its file stem) and `--models-preset FILE.ini`
// (llama-server's preset format: `[NAME]` sections of `key = value`, `[*]` for every model, `;`
// and `#` comments, a top-level `version = 1`).
//
// Preset keys kiln honours (llama-server's names, long or short, or their LLAMA_ARG_ variables):
// model / m / LLAMA_ARG_MODEL (path; needed for a section that names no model of -m or
// --models-dir), ctx-size / c / LLAMA_ARG_CTX_SIZE, parallel / np / LLAMA_ARG_N_PARALLEL,
// load-on-startup, sleep-idle-seconds, and kiln's pin (true: never evicted while loaded); for an
// image model, sd-cli's diffusion-model, clip_l, vae and taesd (paths). Any other key is refused
// with its file and line. Preset values replace the command line's for that model.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "serve/server.h"

namespace kiln::serve {

// "NAME=PATH" (-m in a server of many models).
Result<ModelSpec> parse_model_flag(const std::string& value);
// One model per *.gguf file in `dir` (not recursive), named by its stem, sorted by name.
Result<std::vector<ModelSpec>> models_in_dir(const std::string& dir);
// Applies the preset `text` (read from `file`, named in errors) to `models`: [*] to every model,
// [NAME] to the model NAME, added at the end when there is none.
Status apply_models_preset(const std::string& text, const std::string& file, std::vector<ModelSpec>& models);
// Marks the image models among `models` (ModelSpec::kind): a spec naming image parts, or whose
// file holds a Stable Diffusion UNet (model.diffusion_model.*: a single-file checkpoint,
// .safetensors or stable-diffusion.cpp's GGUF). A file that does not open stays a text model (its
// load reports the error).
void classify_models(std::vector<ModelSpec>& models);
// An Error when two models share a name or there are none.
Status check_models(const std::vector<ModelSpec>& models);

}  // namespace kiln::serve
