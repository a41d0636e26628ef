#include "models/clip/whisper_encoder.h"

#include <string>

#include "models/weight_binder.h"

namespace kiln {
namespace {

// The output width of tensor `name` (its ne[1]), or 0 when absent.
int64_t out_width(const GgufFile& file, const std::string& name) {
  const GgufTensorInfo* t = file.find_tensor(name);
  return t != nullptr && t->n_dims >= 2 ? t->ne[1] : 0;
}

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

// ref: clip_graph::build_stack: consecutive positions side by side, [D, T] -> [D * s, T / s] (a
// partial last stack dropped, see the header).
Tensor stack(Graph& g, Tensor x, int64_t s) {
  const TensorView& v = g.tensor(x).view;
  const int64_t D = v.ne[0], n = v.ne[1] / s;
  const size_t row = v.nb[1] * static_cast<size_t>(s);
  return g.view(x, {D * s, n, 1, 1}, {v.nb[0], row, row * static_cast<size_t>(n), row * static_cast<size_t>(n)}, 0,
                "stack");
}

}  // namespace

Result<AudioWeights> bind_audio_weights(const GgufFile& file, const AudioHParams& hp, int64_t n_embd_out) {
  const WeightBinder b(file, "mmproj");
  const int64_t D = hp.n_embd, S = hp.stack_factor;
  AudioWeights w;
  KILN_ASSIGN_OR_RETURN(w.conv1_w, b.required("a.conv1d.1.weight", {3, hp.n_mel, D}));
  KILN_ASSIGN_OR_RETURN(w.conv1_b, b.required("a.conv1d.1.bias", {1, D}));
  KILN_ASSIGN_OR_RETURN(w.conv2_w, b.required("a.conv1d.2.weight", {3, D, D}));
  KILN_ASSIGN_OR_RETURN(w.conv2_b, b.required("a.conv1d.2.bias", {1, D}));
  const int64_t n_pos = out_width(file, "a.position_embd.weight");
  KILN_ASSIGN_OR_RETURN(w.pos_embd, b.required("a.position_embd.weight", {D, n_pos > 0 ? n_pos : 1}));
  KILN_ASSIGN_OR_RETURN(w.post_ln_w, b.optional("a.post_ln.weight", {D}));
  KILN_ASSIGN_OR_RETURN(w.post_ln_b, b.optional("a.post_ln.bias", {D}));
  KILN_ASSIGN_OR_RETURN(w.layers, bind_vit_layers(file, "a", hp.n_layer, D, hp.n_ff, D, D));
  switch (hp.projector) {
    case AudioProjector::Ultravox: {
      const int64_t h2 = out_width(file, "mm.a.mlp.1.weight");
      if (h2 % 2 != 0) return make_error("mmproj: mm.a.mlp.1.weight's output width ", h2, " is odd (SwiGLU halves it)");
      KILN_ASSIGN_OR_RETURN(w.norm_pre, b.required("mm.a.norm_pre.weight", {D * S}));
      KILN_ASSIGN_OR_RETURN(w.mlp1_w, b.required("mm.a.mlp.1.weight", {D * S, h2 > 0 ? h2 : 2}));
      KILN_ASSIGN_OR_RETURN(w.norm_mid, b.required("mm.a.norm_mid.weight", {h2 / 2}));
      KILN_ASSIGN_OR_RETURN(w.mlp2_w, b.required("mm.a.mlp.2.weight", {h2 / 2, n_embd_out}));
      break;
    }
    case AudioProjector::Qwen2a: {
      KILN_ASSIGN_OR_RETURN(w.fc_w, b.required("mm.a.fc.weight", {D, n_embd_out}));
      KILN_ASSIGN_OR_RETURN(w.fc_b, b.required("mm.a.fc.bias", {n_embd_out}));
      break;
    }
    case AudioProjector::Voxtral: {
      const int64_t h = out_width(file, "mm.a.mlp.1.weight");
      // ref: clip.cpp's load_tensors reads only the two weights for voxtral (Voxtral's projector has
      // no biases); biases a file carries are ignored, as llama.cpp ignores them.
      KILN_ASSIGN_OR_RETURN(w.mlp1_w, b.required("mm.a.mlp.1.weight", {D * S, h > 0 ? h : 1}));
      KILN_ASSIGN_OR_RETURN(w.mlp2_w, b.required("mm.a.mlp.2.weight", {h, n_embd_out}));
      break;
    }
  }
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
  if (hp.projector != AudioProjector::Ultravox) x = pool_pairs(g, x);
  if (w.post_ln_w || w.post_ln_b) x = vit_norm(g, x, w.post_ln_w, w.post_ln_b, hp.eps, "post_ln");
  switch (hp.projector) {
    case AudioProjector::Ultravox: {
      x = g.rms_norm(stack(g, x, hp.stack_factor), 1e-6f, "norm_pre");
      x = g.mul(x, weight_tensor(g, w.norm_pre), "norm_pre*w");
      x = g.mul_mat(weight_tensor(g, w.mlp1_w), x, "mlp1");  // [2 h, n]
      const TensorView& v = g.tensor(x).view;
      const int64_t h = v.ne[0] / 2;
      const Tensor first = g.view(x, {h, v.ne[1], 1, 1}, v.nb, 0, "mlp1.first");
      const Tensor second = g.view(x, {h, v.ne[1], 1, 1}, v.nb, static_cast<size_t>(h) * v.nb[0], "mlp1.second");
      x = g.swiglu(second, first, "swiglu_swapped");
      x = g.mul(g.rms_norm(x, 1e-6f, "norm_mid"), weight_tensor(g, w.norm_mid), "norm_mid*w");
      x = g.mul_mat(weight_tensor(g, w.mlp2_w), x, "mlp2");
      break;
    }
    case AudioProjector::Qwen2a:
      x = vit_linear(g, w.fc_w, w.fc_b, x, "fc");
      break;
    case AudioProjector::Voxtral:
      x = g.mul_mat(weight_tensor(g, w.mlp1_w), stack(g, x, hp.stack_factor), "mlp1");
      x = g.mul_mat(weight_tensor(g, w.mlp2_w), g.gelu_erf(x, "mlp1.gelu"), "mlp2");
      break;
  }
  g.mark_output(x);
  KILN_TRY(g.status());
  eg.embeddings = x;
  return eg;
}

}  // namespace kiln
