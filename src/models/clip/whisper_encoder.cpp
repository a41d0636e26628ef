#include "models/clip/whisper_encoder.h"

#include <array>
#include <string>

#include "models/weight_binder.h"

namespace kiln {
namespace {

// A 1-D convolution with bias over x [len, channels] (any strides), then GELU-erf: [c_out, out_len].
// ref: ggml_conv_1d_ph: im2col to F16, mul_mat with the kernel converted to F16 (every product is
// of two F16 values); the kernel goes first here, which gives the transposed result of ggml's
// mul_mat(im2col, kernel) with the same dot products.
Tensor conv1d_gelu(Graph& g, Tensor x, const Weight& w, const Weight& b, int32_t stride, const std::string& name) {
  const int64_t k = w.view.ne[0], c_in = w.view.ne[1], c_out = w.view.ne[2];
  const Conv1dParams conv{.kernel = static_cast<int32_t>(k), .stride = stride,
                          .padding = static_cast<int32_t>(k / 2), .dilation = 1};
  const Tensor cols = g.cast(g.im2col_1d(x, conv, name + ".im2col"), DType::F32, name + ".cols");
  Tensor kernel = g.reshape(weight_tensor(g, w), {k * c_in, c_out, 1, 1});
  if (w.view.type != DType::F16) kernel = g.cast(kernel, DType::F16, name + ".kernel_f16");
  Tensor y = g.mul_mat(kernel, cols, name);
  y = g.add(y, g.reshape(weight_tensor(g, b), {c_out, 1, 1, 1}), name + "+b");
  return g.gelu_erf(y, name + ".gelu");
}

// ref: ggml_pool_1d(AVG, k = 2, s = 2) over positions: (0 + a + b) / 2 in float, which is
// (a + b) * 0.5 bit for bit. x [D, T] contiguous -> [D, T / 2].
Tensor pool_pairs(Graph& g, Tensor x) {
  const TensorView& v = g.tensor(x).view;
  const int64_t D = v.ne[0], half = v.ne[1] / 2;
  const std::array<size_t, kMaxDims> nb{v.nb[0], 2 * v.nb[1], 2 * v.nb[1] * static_cast<size_t>(half),
                                        2 * v.nb[1] * static_cast<size_t>(half)};
  const Tensor even = g.view(x, {D, half, 1, 1}, nb, 0, "pool.even");
  const Tensor odd = g.view(x, {D, half, 1, 1}, nb, v.nb[1], "pool.odd");
  return g.scale(g.add(even, odd, "pool.sum"), 0.5f, "pool");
}

}  // namespace

Result<AudioWeights> bind_audio_weights(const GgufFile& file, const AudioHParams& hp, int64_t n_embd_out) {
  const WeightBinder b(file, "mmproj");
  const int64_t D = hp.n_embd;
  AudioWeights w;
  KILN_ASSIGN_OR_RETURN(w.conv1_w, b.required("a.conv1d.1.weight", {3, hp.n_mel, D}));
  KILN_ASSIGN_OR_RETURN(w.conv1_b, b.required("a.conv1d.1.bias", {1, D}));
  KILN_ASSIGN_OR_RETURN(w.conv2_w, b.required("a.conv1d.2.weight", {3, D, D}));
  KILN_ASSIGN_OR_RETURN(w.conv2_b, b.required("a.conv1d.2.bias", {1, D}));
  const int64_t n_pos = b.out_width("a.position_embd.weight");
  KILN_ASSIGN_OR_RETURN(w.pos_embd, b.required("a.position_embd.weight", {D, n_pos > 0 ? n_pos : 1}));
  KILN_ASSIGN_OR_RETURN(w.post_ln_w, b.optional("a.post_ln.weight", {D}));
  KILN_ASSIGN_OR_RETURN(w.post_ln_b, b.optional("a.post_ln.bias", {D}));
  KILN_ASSIGN_OR_RETURN(w.layers, bind_vit_layers(file, "a", hp.n_layer, D, hp.n_ff, D, D));
  KILN_ASSIGN_OR_RETURN(w.projector, bind_audio_projector(file, hp, n_embd_out));
  return w;
}

Result<AudioEncoderGraph> build_audio_encoder(Graph& g, const AudioHParams& hp, const AudioWeights& w,
                                              int64_t n_frames, AttentionPath attention) {
  const int64_t D = hp.n_embd, n_pos = n_frames / 2;
  if (n_frames < 2 || n_frames % 2 != 0 || n_pos > w.pos_embd.view.ne[1])
    return make_error("audio encoder: a chunk of ", n_frames, " frames does not fit the encoder's ",
                      w.pos_embd.view.ne[1], " positions (an even number of frames, two per position)");
  AudioEncoderGraph eg;
  eg.mel = g.input("mel", DType::F32, {n_frames, hp.n_mel, 1, 1});
  Tensor x = conv1d_gelu(g, eg.mel, w.conv1_w, w.conv1_b, 1, "conv1");                // [D, n_frames]
  x = conv1d_gelu(g, g.transpose(x), w.conv2_w, w.conv2_b, 2, "conv2");                // [D, n_pos]
  const Tensor pos = weight_tensor(g, w.pos_embd);
  x = g.add(x, g.view(pos, {D, n_pos, 1, 1}, g.tensor(pos).view.nb, 0, "pos_embd"), "pos");
  const VitDims dims{D / hp.n_head, hp.n_head, hp.n_head, hp.eps, ClipFfnAct::GeluErf, false};
  x = vit_blocks(g, dims, w.layers, x, hp.n_layer, attention);
  if (hp.pools_pairs()) x = pool_pairs(g, x);
  if (w.post_ln_w || w.post_ln_b) x = vit_norm(g, x, w.post_ln_w, w.post_ln_b, hp.eps, "post_ln");
  x = build_audio_projector(g, hp, w.projector, x);
  g.mark_output(x);
  KILN_TRY(g.status());
  eg.embeddings = x;
  return eg;
}

}  // namespace kiln
