// The layers Stable Diffusion's convolutional networks (UNet, TAESD) are built of, bound by
// stable-diffusion.cpp's tensor names and added to a graph. Activations are grids of channel
// vectors, F32 [c, w, h, b] (channels innermost: a pixel's channels are one row, so the
// transformer's tokens are the grid's cells without a permute); stable-diffusion.cpp's ggml
// tensors are [w, h, c, b], the same numbers in another memory order.
// Thread-safety: binding reads the file only; graph building is pure.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "models/modules.h"
#include "models/weight_binder.h"
#include "runtime/graph.h"

namespace kiln::sd {

struct Conv2d {
  Weight w;  // ggml [k, k, c_in, c_out] (PyTorch [c_out, c_in, k, k])
  Weight b;  // [c_out], optional
  int32_t k = 0;
  int32_t stride = 1;
  int32_t padding = 0;
};

struct Norm {   // GroupNorm or LayerNorm with gain and offset
  Weight w, b;  // [c]
};

struct Linear {
  Weight w;  // [n_in, n_out]
  Weight b;  // [n_out], optional
};

// `name`.weight [c_out, c_in, k, k] and `name`.bias [c_out]; padding k / 2 unless given.
Result<Conv2d> bind_conv2d(const WeightBinder& b, const std::string& name, int64_t c_in, int64_t c_out,
                           int32_t k, int32_t stride = 1, int32_t padding = -1);
Result<Norm> bind_norm(const WeightBinder& b, const std::string& name, int64_t c);
Result<Linear> bind_linear(const WeightBinder& b, const std::string& name, int64_t n_in, int64_t n_out,
                           bool bias = true);

// x [c_in, w, h, b] -> [c_out, w', h', b]. ref: ggml_conv_2d: im2col then the matrix product; the
// weight in F16 as stable-diffusion.cpp holds every conv weight (an F32 or BF16 weight is cast in
// the graph), so the columns are rounded to F16 as its F16 im2col rounds them; a 1x1 kernel at stride 1
// without padding multiplies x directly (its columns are x). Then the bias. An x the im2col cannot take
// leaves its error in the graph (Graph::status) and returns an invalid Tensor, as the graph's own ops do.
// Memory: a product whose F32 columns would exceed max_column_bytes (x one item) is computed in
// strips of output rows, each with its own columns, joined by concat: the columns (and mul_mat's
// converted copy of them, 1.5 times their bytes for F16) exist one strip at a time. The bits are the
// whole product's (every strip has at least two columns, so tinyBLAS's order for each, as for all).
inline constexpr int64_t kConvColumnBytes = int64_t{64} << 20;
Tensor conv2d(Graph& g, const Conv2d& c, Tensor x, const std::string& name,
              int64_t max_column_bytes = kConvColumnBytes);
// GroupNorm32 (stable-diffusion.cpp's: 32 groups, eps 1e-6) times w plus b, x [c, w, h, b].
Tensor group_norm32(Graph& g, const Norm& n, Tensor x, const std::string& name);
// LayerNorm (eps 1e-5) over dim 0 times w plus b.
Tensor layer_norm(Graph& g, const Norm& n, Tensor x, const std::string& name);
// w x (+ b) over dim 0 of x.
Tensor linear(Graph& g, const Linear& l, Tensor x, const std::string& name);
// Attention of the rows of q [c, n_q, b, 1] over k, v [c, n_kv, b, 1], each split into n_head heads
// of c / n_head -> F32 [c, n_q, b, 1]. ref: ggml_ext_attention_ext without a mask or flash
// attention: kq in F32, scaled by 1 / sqrt(c / n_head), softmax, times v.
Tensor multi_head_attention(Graph& g, Tensor q, Tensor k, Tensor v, int64_t n_head, const std::string& name);

}  // namespace kiln::sd
