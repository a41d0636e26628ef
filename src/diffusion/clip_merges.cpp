#include "diffusion/clip_merges.h"

// The merges file, assembled in place: KILN_CLIP_MERGES_FILE is the unpacked copy in the build tree.
asm(".pushsection .rodata\n"
    ".balign 16\n"
    "kiln_clip_merges_begin:\n"
    ".incbin \"" KILN_CLIP_MERGES_FILE
    "\"\n"
    "kiln_clip_merges_end:\n"
    ".popsection\n");

extern "C" const char kiln_clip_merges_begin[];
extern "C" const char kiln_clip_merges_end[];

namespace kiln::diffusion {

std::string_view clip_merges_text() {
  return {kiln_clip_merges_begin, static_cast<size_t>(kiln_clip_merges_end - kiln_clip_merges_begin)};
}

}  // namespace kiln::diffusion
