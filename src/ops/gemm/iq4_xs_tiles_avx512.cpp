// AVX-512 VNNI kernel of the IQ4_XS family (iq4_xs_tiles_simd.h): the AVX2 kernel's bits. Compiled
// for AVX-512 (CMake's *_avx512.cpp rule); call only when quant::cpu_has_avx512_vnni().
#include "ops/gemm/iq4_xs_tiles_simd.h"

namespace kiln::gemm {

void gemm_iq4_xs_avx512(const Tile& t) { iq4_xs_tile(t); }

}  // namespace kiln::gemm
