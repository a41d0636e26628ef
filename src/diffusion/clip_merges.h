// CLIP's BPE merges text as stable-diffusion.cpp embeds it: "#version: 0.2", then 48,894 lines
// "first second", rank order, each ending in '\n'. Built into the library (see CMakeLists.txt).
#pragma once

#include <string_view>

namespace kiln::diffusion {

std::string_view clip_merges_text();

}  // namespace kiln::diffusion
