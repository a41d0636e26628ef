#include "models/clip/audio_projector.h"

#include <array>
#include <string>

#include "models/clip/vit.h"
#include "models/weight_binder.h"

namespace kiln {
namespace {

// ref: clip_graph::build_stack: consecutive positions side by side, [D, T] -> [D * s, T / s] (a
// partial last stack dropped, see the header).
Tensor stack(Graph& g, Tensor x, int64_t s) {
  const TensorView& v = g.tensor(x).view;
  const int64_t D = v.ne[0], n = v.ne[1] / s;
  const size_t row = v.nb[1] * static_cast<size_t>(s);
  return g.view(x, {D * s, n, 1, 1}, {v.nb[0], row, row * static_cast<size_t>(n), row * static_cast<size_t>(n)}, 0,
                "stack");
}

// A [n] weight as one F32 row [n, 1] (glma's begin and end rows; ggml_concat of the file's tensor).
Tensor row(Graph& g, const Weight& w, const std::string& name) {
  Tensor t = g.reshape(weight_tensor(g, w), {w.view.ne[0], 1, 1, 1});
  return w.view.type == DType::F32 ? t : g.cast(t, DType::F32, name + "_f32");
}

// The hidden width of mm.a.mlp.1 (checked when it is bound; 1 keeps a missing tensor's message).
int64_t mlp1_width(const WeightBinder& b) {
  const int64_t h = b.out_width("mm.a.mlp.1.weight");
  return h > 0 ? h : 1;
}

// mm.a.mlp.1 [in, h] and mm.a.mlp.2 [h, n_out], with their biases when `biases`.
Status bind_mlp(const WeightBinder& b, int64_t in, int64_t n_out, bool biases, AudioProjectorWeights& w) {
  const int64_t h = mlp1_width(b);
  KILN_ASSIGN_OR_RETURN(w.mlp1_w, b.required("mm.a.mlp.1.weight", {in, h}));
  KILN_ASSIGN_OR_RETURN(w.mlp2_w, b.required("mm.a.mlp.2.weight", {h, n_out}));
  if (biases) {
    KILN_ASSIGN_OR_RETURN(w.mlp1_b, b.required("mm.a.mlp.1.bias", {h}));
    KILN_ASSIGN_OR_RETURN(w.mlp2_b, b.required("mm.a.mlp.2.bias", {n_out}));
  }
  return {};
}

}  // namespace

Result<AudioProjectorWeights> bind_audio_projector(const GgufFile& file, const AudioHParams& hp,
                                                   int64_t n_embd_out) {
  const WeightBinder b(file, "mmproj");
  const int64_t D = hp.n_embd, S = hp.stack_factor;
  AudioProjectorWeights w;
  switch (hp.projector) {
    case AudioProjector::Ultravox: {
      const int64_t h2 = mlp1_width(b);
      if (h2 % 2 != 0) return make_error("mmproj: mm.a.mlp.1.weight's output width ", h2, " is odd (SwiGLU halves it)");
      KILN_ASSIGN_OR_RETURN(w.norm_pre_w, b.required("mm.a.norm_pre.weight", {D * S}));
      KILN_ASSIGN_OR_RETURN(w.mlp1_w, b.required("mm.a.mlp.1.weight", {D * S, h2}));
      KILN_ASSIGN_OR_RETURN(w.norm_mid, b.required("mm.a.norm_mid.weight", {h2 / 2}));
      KILN_ASSIGN_OR_RETURN(w.mlp2_w, b.required("mm.a.mlp.2.weight", {h2 / 2, n_embd_out}));
      break;
    }
    case AudioProjector::Qwen2a: {
      KILN_ASSIGN_OR_RETURN(w.fc_w, b.required("mm.a.fc.weight", {D, n_embd_out}));
      KILN_ASSIGN_OR_RETURN(w.fc_b, b.required("mm.a.fc.bias", {n_embd_out}));
      break;
    }
    case AudioProjector::Voxtral:
      // ref: clip.cpp's load_tensors reads only the two weights for voxtral (Voxtral's projector has
      // no biases); biases a file carries are ignored, as llama.cpp ignores them.
      KILN_TRY(bind_mlp(b, D * S, n_embd_out, false, w));
      break;
    case AudioProjector::MusicFlamingo:
      KILN_TRY(bind_mlp(b, D, n_embd_out, true, w));
      break;
    case AudioProjector::Glma: {
      KILN_ASSIGN_OR_RETURN(w.norm_pre_w, b.required("mm.a.norm_pre.weight", {D}));
      KILN_ASSIGN_OR_RETURN(w.norm_pre_b, b.required("mm.a.norm_pre.bias", {D}));
      KILN_TRY(bind_mlp(b, D * S, n_embd_out, true, w));
      KILN_ASSIGN_OR_RETURN(w.boi, b.required("v.boi", {n_embd_out}));
      KILN_ASSIGN_OR_RETURN(w.eoi, b.required("v.eoi", {n_embd_out}));
      break;
    }
  }
  return w;
}

Tensor build_audio_projector(Graph& g, const AudioHParams& hp, const AudioProjectorWeights& w, Tensor x) {
  if (hp.stacks_frames()) x = stack(g, x, hp.stack_factor);
  switch (hp.projector) {
    case AudioProjector::Ultravox: {
      x = g.mul(g.rms_norm(x, 1e-6f, "norm_pre"), weight_tensor(g, w.norm_pre_w), "norm_pre*w");
      x = g.mul_mat(weight_tensor(g, w.mlp1_w), x, "mlp1");  // [2 h, n]
      const TensorView& v = g.tensor(x).view;
      const int64_t h = v.ne[0] / 2;
      const Tensor first = g.view(x, {h, v.ne[1], 1, 1}, v.nb, 0, "mlp1.first");
      const Tensor second = g.view(x, {h, v.ne[1], 1, 1}, v.nb, static_cast<size_t>(h) * v.nb[0], "mlp1.second");
      x = g.swiglu(second, first, "swiglu_swapped");
      x = g.mul(g.rms_norm(x, 1e-6f, "norm_mid"), weight_tensor(g, w.norm_mid), "norm_mid*w");
      return g.mul_mat(weight_tensor(g, w.mlp2_w), x, "mlp2");
    }
    case AudioProjector::Qwen2a:
      return vit_linear(g, w.fc_w, w.fc_b, x, "fc");
    case AudioProjector::Voxtral:
    case AudioProjector::MusicFlamingo:
      return vit_ffn(g, w.mlp1_w, w.mlp1_b, w.mlp2_w, w.mlp2_b, ClipFfnAct::GeluErf, x, "mlp");
    case AudioProjector::Glma:
      x = vit_norm(g, x, w.norm_pre_w, w.norm_pre_b, hp.eps, "norm_pre");
      x = vit_ffn(g, w.mlp1_w, w.mlp1_b, w.mlp2_w, w.mlp2_b, ClipFfnAct::GeluErf, stack(g, x, hp.stack_factor), "mlp");
      x = g.concat(row(g, w.boi, "boi"), x, 1, "boi+x");
      return g.concat(x, row(g, w.eoi, "eoi"), 1, "x+eoi");
  }
  return x;
}

}  // namespace kiln
