#include "speculative_flags.h"

#include <cstdio>

namespace kiln::cli {

void SpeculativeFlags::declare(OptionParser& p) {
  p.custom(
      {"--spec-type"},
      [this](const std::string& v) -> std::string {
        auto sources = parse_draft_sources(v);
        if (!sources.ok()) return sources.error().message;
        options.sources = std::move(*sources);
        types_given = true;
        return "";
      },
      "TYPES",
      "speculative decoding draft sources, comma-separated: none, draft-simple, ngram-simple, ngram-map-k, "
      "ngram-map-k4v, ngram-mod, ngram-cache (default: none; draft-simple with -md)");
  p.value({"-md", "--spec-draft-model", "--model-draft"}, &draft_model_path, "FILE",
          "draft model of the same vocabulary for draft-simple");
  p.custom(
      {"-devd", "--device-draft", "--spec-draft-device"},
      [this](const std::string& v) {
        std::string main;
        return parse_device_list(v, &main, &placement.devices);
      },
      "NAME[,NAME...]", "devices of the draft model, as --device (none: the CPU; default: the model's --device)");
  p.custom(
      {"-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft", "--spec-draft-ngl"},
      [this](const std::string& v) { return parse_gpu_layers(v, &placement.n_gpu_layers); }, "N|auto|all",
      "layers of the draft model on its devices, as -ngl (default auto: --fit decides)");
  p.custom(
      {"-otd", "--override-tensor-draft", "--spec-draft-override-tensor"},
      [this](const std::string& v) { return parse_overrides(v, &placement.overrides); }, "PATTERN=DEVICE,...",
      "tensor overrides of the draft model, as -ot (the model's -ot is not inherited)");
  p.value({"--spec-draft-n-max"}, &options.draft.n_max, "N",
          "most tokens the draft model drafts per step (default 3)");
  p.value({"--spec-draft-n-min"}, &options.draft.n_min, "N",
          "drop draft-model drafts shorter than N (default 0)");
  p.value({"--spec-draft-p-min", "--draft-p-min"}, &options.draft.p_min, "P",
          "stop drafting at a token the draft model gives less than P (default 0)");
  struct NgramFlag {
    const char* source;
    NgramMapOptions* o;
    bool min_hits;
  };
  for (const NgramFlag& f : {NgramFlag{"ngram-simple", &options.ngram_simple, false},
                             NgramFlag{"ngram-map-k", &options.ngram_map_k, false},
                             NgramFlag{"ngram-map-k4v", &options.ngram_map_k4v, true}}) {
    const std::string prefix = std::string("--spec-") + f.source;
    p.value({prefix + "-size-n"}, &f.o->size_n, "N",
            std::string("length of the n-gram ") + f.source + " looks up (default 12)");
    p.value({prefix + "-size-m"}, &f.o->size_m, "N",
            std::string("length of the m-gram ") + f.source + " drafts (default 48)");
    if (f.min_hits)
      p.value({prefix + "-min-hits"}, &f.o->min_hits, "N",
              std::string("occurrences of an n-gram before ") + f.source + " drafts from it (default 1)");
  }
  p.value({"-lcs", "--lookup-cache-static"}, &options.lookup_cache_static, "FILE",
          "ngram-cache: n-gram counts of a corpus (kiln lookup-create; llama.cpp's file format), only read");
  p.value({"-lcd", "--lookup-cache-dynamic"}, &options.lookup_cache_dynamic, "FILE",
          "ngram-cache: n-gram counts of earlier generations, read at start; run and chat add theirs and "
          "write it at the end");
  p.value({"--spec-ngram-mod-n-match"}, &options.ngram_mod.n_match, "N",
          "length of the n-gram ngram-mod hashes (default 24)");
  p.value({"--spec-ngram-mod-n-max"}, &options.ngram_mod.n_max, "N",
          "most tokens ngram-mod drafts (default 64)");
  p.value({"--spec-ngram-mod-n-min"}, &options.ngram_mod.n_min, "N",
          "drop ngram-mod drafts shorter than N (default 48)");
}

SpeculativeOptions SpeculativeFlags::resolved() const {
  SpeculativeOptions o = options;
  if (!types_given && !draft_model_path.empty()) o.sources = {DraftSource::DraftSimple};  // -md alone
  return o;
}

std::unique_ptr<Speculator> SpeculativeFlags::make(const Model& target, const ModelFlags& target_flags,
                                                   const ModelContext& mc, const ContextOptions& target_context,
                                                   const char* command, bool* failed) const {
  *failed = false;
  if (!requested()) return nullptr;
  const SpeculativeOptions o = resolved();
  if (o.sources.empty() && draft_model_path.empty()) return nullptr;  // --spec-type none
  std::shared_ptr<const Model> draft;
  if (!draft_model_path.empty()) {
    auto m = Model::load(draft_model_path);
    if (!m.ok()) {
      std::fprintf(stderr, "kiln %s: draft model: %s\n", command, m.error().message.c_str());
      *failed = true;
      return nullptr;
    }
    draft = *m;
  }
  const WeightOptions weights = target_flags.weight_options(command);
  const ContextOptions draft_context = draft_context_options(target_context);
  auto s = Speculator::create(o, target, std::move(draft), [&](std::shared_ptr<const Model> d) {
    return place_draft_context(std::move(d), target_flags.split, target_flags.device, placement, *mc.devices,
                               draft_context, weights, /*backend_of=*/{},
                               [&](const std::string& line) { std::fprintf(stderr, "kiln %s: %s\n", command, line.c_str()); });
  });
  if (!s.ok()) {
    std::fprintf(stderr, "kiln %s: %s\n", command, s.error().message.c_str());
    *failed = true;
    return nullptr;
  }
  return std::move(*s);
}

}  // namespace kiln::cli
