#include "diffusion/model_family.h"

namespace kiln::diffusion {

std::string_view model_family_name(ModelFamily family) {
  switch (family) {
    case ModelFamily::Sd1:
      return "SD 1.x";
    case ModelFamily::Sd2:
      return "SD 2.x";
    case ModelFamily::Sdxl:
      return "SDXL";
  }
  return "?";
}

}  // namespace kiln::diffusion
