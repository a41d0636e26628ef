// AVX2 kernels of the Q6_K, Q5_K, Q3_K and Q2_K families (k_quant_tiles_simd.h). Compiled for AVX2
// + FMA + F16C.
#include "ops/gemm/k_quant_tiles_simd.h"

namespace kiln::gemm {

KILN_DEFINE_K_QUANT_TILES(avx2)

}  // namespace kiln::gemm
