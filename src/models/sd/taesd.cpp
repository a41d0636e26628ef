#include "models/sd/taesd.h"

namespace kiln::sd {
namespace {

constexpr int64_t kChannels = 64, kLatent = 4;

// ref: TAEBlock::forward: relu(conv4(relu(conv2(relu(conv0(x))))) + x).
Tensor block(Graph& g, const TaesdBlock& b, Tensor x, const std::string& n) {
  Tensor h = g.relu(conv2d(g, b.convs[0], x, n + ".conv0"));
  h = g.relu(conv2d(g, b.convs[1], h, n + ".conv2"));
  h = conv2d(g, b.convs[2], h, n + ".conv4");
  return g.relu(g.add(h, x, n + "+x"));
}

Result<TaesdBlock> bind_block(const WeightBinder& b, const std::string& name) {
  TaesdBlock blk;
  for (int c = 0; c < 3; ++c) {
    KILN_ASSIGN_OR_RETURN(blk.convs[static_cast<size_t>(c)],
                          bind_conv2d(b, name + ".conv." + std::to_string(2 * c), kChannels, kChannels, 3));
  }
  return blk;
}

}  // namespace

Result<TaesdDecoderWeights> bind_taesd_decoder(const GgufFile& file, const std::string& prefix) {
  const WeightBinder b(file, "taesd decoder");
  const std::string p = prefix + ".";
  TaesdDecoderWeights w;
  KILN_ASSIGN_OR_RETURN(w.conv_in, bind_conv2d(b, p + "0", kLatent, kChannels, 3));
  // ref: TinyDecoder's numbering: blocks at 2-4, 7-9, 12-14 and 17, bias-free convs at 6, 11, 16.
  for (int layer : {2, 3, 4, 7, 8, 9, 12, 13, 14, 17}) {
    KILN_ASSIGN_OR_RETURN(TaesdBlock blk, bind_block(b, p + std::to_string(layer)));
    w.blocks.push_back(blk);
  }
  for (size_t i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(w.up_convs[i],
                          bind_conv2d(b, p + std::to_string(6 + 5 * i), kChannels, kChannels, 3));
    if (w.up_convs[i].b)
      return make_error("taesd decoder: '", p, 6 + 5 * i, ".bias' is not in TAESD's decoder");
  }
  KILN_ASSIGN_OR_RETURN(w.conv_out, bind_conv2d(b, p + "18", kChannels, 3, 3));
  return w;
}

Tensor taesd_decoder_graph(Graph& g, const TaesdDecoderWeights& w, Tensor z) {
  // ref: TinyDecoder::forward.
  Tensor h = g.scale(g.tanh(g.scale(z, 1.0f / 3.0f, "z/3"), "tanh"), 3.0f, "*3");
  h = g.relu(conv2d(g, w.conv_in, h, "conv_in"));
  size_t bi = 0;
  for (size_t stage = 0; stage < 3; ++stage) {
    for (int i = 0; i < 3; ++i, ++bi) h = block(g, w.blocks[bi], h, "block" + std::to_string(bi));
    h = conv2d(g, w.up_convs[stage], g.upscale(h, 2), "up" + std::to_string(stage));
  }
  h = block(g, w.blocks[bi], h, "block" + std::to_string(bi));
  return conv2d(g, w.conv_out, h, "conv_out");
}

Result<TaesdEncoderWeights> bind_taesd_encoder(const GgufFile& file, const std::string& prefix) {
  const WeightBinder b(file, "taesd encoder");
  const std::string p = prefix + ".";
  TaesdEncoderWeights w;
  KILN_ASSIGN_OR_RETURN(w.conv_in, bind_conv2d(b, p + "0", 3, kChannels, 3));
  // ref: TinyEncoder's numbering: blocks at 1, 3-5, 7-9 and 11-13, stride-2 convs at 2, 6, 10.
  for (int layer : {1, 3, 4, 5, 7, 8, 9, 11, 12, 13}) {
    KILN_ASSIGN_OR_RETURN(TaesdBlock blk, bind_block(b, p + std::to_string(layer)));
    w.blocks.push_back(blk);
  }
  for (size_t i = 0; i < 3; ++i) {
    KILN_ASSIGN_OR_RETURN(w.down_convs[i],
                          bind_conv2d(b, p + std::to_string(2 + 4 * i), kChannels, kChannels, 3, 2));
    if (w.down_convs[i].b)
      return make_error("taesd encoder: '", p, 2 + 4 * i, ".bias' is not in TAESD's encoder");
  }
  KILN_ASSIGN_OR_RETURN(w.conv_out, bind_conv2d(b, p + "14", kChannels, kLatent, 3));
  return w;
}

Tensor taesd_encoder_graph(Graph& g, const TaesdEncoderWeights& w, Tensor x) {
  // ref: TinyEncoder::forward.
  Tensor h = conv2d(g, w.conv_in, x, "conv_in");
  h = block(g, w.blocks[0], h, "block0");
  size_t bi = 1;
  for (size_t stage = 0; stage < 3; ++stage) {
    h = conv2d(g, w.down_convs[stage], h, "down" + std::to_string(stage));
    for (int i = 0; i < 3; ++i, ++bi) h = block(g, w.blocks[bi], h, "block" + std::to_string(bi));
  }
  return conv2d(g, w.conv_out, h, "conv_out");
}

}  // namespace kiln::sd
