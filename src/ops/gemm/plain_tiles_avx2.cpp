// AVX2 kernels of the plain legacy families (plain_tiles_simd.h). Compiled for AVX2 + FMA + F16C.
#include "ops/gemm/plain_tiles_simd.h"

namespace kiln::gemm {

KILN_DEFINE_PLAIN_TILES(avx2)

}  // namespace kiln::gemm
