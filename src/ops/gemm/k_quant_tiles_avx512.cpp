// AVX-512 VNNI kernels of the Q6_K, Q5_K, Q3_K and Q2_K families (k_quant_tiles_simd.h): the AVX2
// kernels' bits. Compiled for AVX-512 (CMake's *_avx512.cpp rule); call only when
// quant::cpu_has_avx512_vnni().
#include "ops/gemm/k_quant_tiles_simd.h"

namespace kiln::gemm {

KILN_DEFINE_K_QUANT_TILES(avx512)

}  // namespace kiln::gemm
