// The projector registry: clip.projector_type -> factory. Adding a projector is one file and one
// line here.
#include <string>

#include "models/clip/projector.h"

namespace kiln {
namespace {

struct ProjectorEntry {
  std::string_view type;
  Result<std::unique_ptr<Projector>> (*make)(const GgufFile&, const ClipHParams&);
};

constexpr ProjectorEntry kProjectors[] = {
    {"gemma3", make_gemma3_projector},
    {"mlp", make_mlp_projector},
};

}  // namespace

Result<std::unique_ptr<Projector>> make_projector(const GgufFile& file, const ClipHParams& hp) {
  std::string known;
  for (const ProjectorEntry& e : kProjectors) {
    if (e.type == hp.projector) return e.make(file, hp);
    known += (known.empty() ? "" : ", ") + std::string(e.type);
  }
  return make_error("mmproj: projector type '", hp.projector, "' is not supported (kiln supports: ", known, ")");
}

}  // namespace kiln
