// The A1111 emphasis syntax as stable-diffusion.cpp parses it (parse_prompt_attention):
//   (text) weight x1.1    [text] weight / 1.1    (text:1.3) weight x1.3    \( a literal "("
//   BREAK (a whole word) ends the current 75-token chunk
// Brackets nest by multiplying; unclosed ones apply from where they opened to the end; a
// closing bracket with nothing open is literal text. Of the escapes only "\(" loses its backslash
// ("\)", "\[", "\]" and "\\" stay as written, as in stable-diffusion.cpp). Adjacent pieces of equal
// weight are merged. BREAK comes out as the piece "BREAK" with weight -1 (a BREAK inside brackets
// gets its weight multiplied too and is then plain text, as in stable-diffusion.cpp).
// Thread-safety: pure function.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::diffusion {

struct WeightedText {
  std::string text;
  float weight;
};

inline constexpr float kBreakWeight = -1.0f;

// At least one piece ({"", 1} for an empty prompt). An Error for a "(text:w)" whose w is no number
// or out of float's range (stable-diffusion.cpp's std::stof throws there).
Result<std::vector<WeightedText>> parse_prompt_attention(std::string_view prompt);

}  // namespace kiln::diffusion
