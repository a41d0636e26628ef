// AVX-512 VNNI kernels of the plain legacy families (plain_tiles_simd.h): the AVX2 kernels'
// bits. Compiled for AVX-512 (CMake's *_avx512.cpp rule); call only when quant::cpu_has_avx512_vnni().
#include "ops/gemm/plain_tiles_simd.h"

namespace kiln::gemm {

KILN_DEFINE_PLAIN_TILES(avx512)

}  // namespace kiln::gemm
