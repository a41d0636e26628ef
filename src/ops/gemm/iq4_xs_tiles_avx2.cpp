// AVX2 kernel of the IQ4_XS family (iq4_xs_tiles_simd.h). Compiled for AVX2 + FMA + F16C.
#include "ops/gemm/iq4_xs_tiles_simd.h"

namespace kiln::gemm {

void gemm_iq4_xs_avx2(const Tile& t) { iq4_xs_tile(t); }

}  // namespace kiln::gemm
