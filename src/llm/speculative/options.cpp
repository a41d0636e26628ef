#include "llm/speculative/options.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <utility>

namespace kiln {
namespace {

// In llama.cpp's order of preference (common_speculative_init).
constexpr std::array<std::pair<DraftSource, std::string_view>, 6> kSources = {{
    {DraftSource::NgramSimple, "ngram-simple"},
    {DraftSource::NgramMapK, "ngram-map-k"},
    {DraftSource::NgramMapK4v, "ngram-map-k4v"},
    {DraftSource::NgramMod, "ngram-mod"},
    {DraftSource::NgramCache, "ngram-cache"},
    {DraftSource::DraftSimple, "draft-simple"},
}};

// llama.cpp's draft length of ngram-cache (fixed there).
constexpr int32_t kNgramCacheDraft = 8;

Status check_range(std::string_view flag, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) return make_error(flag, " ", value, " is outside [", lo, ", ", hi, "]");
  return ok_status();
}

Status check_ngram_map(std::string_view source, const NgramMapOptions& o) {
  const std::string prefix = "--spec-" + std::string(source);
  KILN_TRY(check_range(prefix + "-size-n", o.size_n, 1, 1024));
  KILN_TRY(check_range(prefix + "-size-m", o.size_m, 1, 1024));
  return check_range(prefix + "-min-hits", o.min_hits, 1, 1024);
}

}  // namespace

std::string_view draft_source_name(DraftSource source) {
  for (const auto& [s, name] : kSources) {
    if (s == source) return name;
  }
  return "unknown";
}

Result<std::vector<DraftSource>> parse_draft_sources(std::string_view list) {
  std::vector<bool> wanted(kSources.size(), false);
  bool none = false;
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find(',', begin), list.size());
    const std::string_view name = list.substr(begin, end - begin);
    begin = end + 1;
    if (name == "none") {
      none = true;
      continue;
    }
    const auto it =
        std::find_if(kSources.begin(), kSources.end(), [&](const auto& s) { return s.second == name; });
    if (it == kSources.end()) {
      std::string known = "none";
      for (const auto& s : kSources) known += ", " + std::string(s.second);
      return make_error("unknown speculative type '", name, "' (known: ", known, ")");
    }
    wanted[static_cast<size_t>(it - kSources.begin())] = true;
  }
  std::vector<DraftSource> out;
  if (none) return out;
  for (size_t i = 0; i < kSources.size(); ++i) {
    if (wanted[i]) out.push_back(kSources[i].first);
  }
  return out;
}

bool SpeculativeOptions::uses(DraftSource s) const {
  return std::find(sources.begin(), sources.end(), s) != sources.end();
}

int32_t SpeculativeOptions::n_max() const {
  int32_t n = 0;
  for (DraftSource s : sources) {
    switch (s) {
      case DraftSource::DraftSimple:
        n = std::max(n, draft.n_max);
        break;
      case DraftSource::NgramSimple:
        n = std::max(n, ngram_simple.size_m);
        break;
      case DraftSource::NgramMapK:
        n = std::max(n, ngram_map_k.size_m);
        break;
      case DraftSource::NgramMapK4v:
        n = std::max(n, ngram_map_k4v.size_m);
        break;
      case DraftSource::NgramMod:
        n = std::max(n, ngram_mod.n_max);
        break;
      case DraftSource::NgramCache:
        n = std::max(n, kNgramCacheDraft);
        break;
    }
  }
  return n;
}

Status SpeculativeOptions::validate() const {
  KILN_TRY(check_range("--spec-draft-n-max", draft.n_max, 0, 1024));
  KILN_TRY(check_range("--spec-draft-n-min", draft.n_min, 0, draft.n_max));
  if (!(draft.p_min >= 0.0f && draft.p_min <= 1.0f)) {
    char p_min[32];
    std::snprintf(p_min, sizeof p_min, "%g", static_cast<double>(draft.p_min));
    return make_error("--spec-draft-p-min ", p_min, " is outside [0, 1]");
  }
  KILN_TRY(check_ngram_map("ngram-simple", ngram_simple));
  KILN_TRY(check_ngram_map("ngram-map-k", ngram_map_k));
  KILN_TRY(check_ngram_map("ngram-map-k4v", ngram_map_k4v));
  KILN_TRY(check_range("--spec-ngram-mod-n-match", ngram_mod.n_match, 1, 1024));
  KILN_TRY(check_range("--spec-ngram-mod-n-max", ngram_mod.n_max, 0, 1024));
  KILN_TRY(check_range("--spec-ngram-mod-n-min", ngram_mod.n_min, 0, ngram_mod.n_max));
  if ((!lookup_cache_static.empty() || !lookup_cache_dynamic.empty()) && !uses(DraftSource::NgramCache))
    return make_error(lookup_cache_static.empty() ? "-lcd" : "-lcs",
                      " (a lookup cache) needs --spec-type ngram-cache among the speculative types");
  return ok_status();
}

}  // namespace kiln
