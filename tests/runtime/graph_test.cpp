#include "runtime/graph.h"

#include <gtest/gtest.h>

#include <vector>

namespace kiln {
namespace {

TEST(Graph, InfersShapesAndKeepsNodesInOrder) {
  std::vector<float> w(64 * 48), table(64 * 10);
  Graph g;
  Tensor ids = g.input("ids", DType::I32, {5, 1, 1, 1});
  Tensor emb =
      g.get_rows(g.external("tok_embd", contiguous_view(DType::F32, {64, 10, 1, 1}, table.data())), ids);
  Tensor h = g.mul_mat(g.external("w", contiguous_view(DType::F32, {64, 48, 1, 1}, w.data())), emb, "ffn_up");
  Tensor am = g.argmax(h);
  ASSERT_TRUE(g.status().ok()) << g.status().error().message;
  EXPECT_EQ(g.tensor(emb).view.ne, (Shape{64, 5, 1, 1}));
  EXPECT_EQ(g.tensor(h).view.ne, (Shape{48, 5, 1, 1}));
  EXPECT_EQ(g.tensor(h).name, "ffn_up");
  EXPECT_EQ(g.tensor(am).view.type, DType::I32);
  EXPECT_EQ(g.tensor(am).view.ne, (Shape{5, 1, 1, 1}));
  EXPECT_EQ(g.op_nodes(), (std::vector<int32_t>{emb.id, h.id, am.id}));
}

// Only externals that mul_mats alone read as weights may be rebound in a prepared layout: not one
// that get_rows reads, one read through a view, or one that is a mul_mat's activations.
TEST(Graph, PreparedLayoutsOnlyForTensorsReadAsMulMatWeights) {
  std::vector<float> w(64 * 48), table(64 * 10), other(64 * 16);
  Graph g;
  Tensor ids = g.input("ids", DType::I32, {5, 1, 1, 1});
  Tensor tok = g.external("tok_embd", contiguous_view(DType::F32, {64, 10, 1, 1}, table.data()));
  Tensor weights = g.external("w", contiguous_view(DType::F32, {64, 48, 1, 1}, w.data()));
  Tensor viewed = g.external("viewed", contiguous_view(DType::F32, {64, 16, 1, 1}, other.data()));
  Tensor emb = g.get_rows(tok, ids);
  g.mul_mat(weights, emb, "ffn_up");
  g.mul_mat(tok, emb, "tied_head");  // tok_embd is also the weights of a mul_mat
  g.mul_mat(g.reshape(viewed, {64, 16, 1, 1}), emb, "through_a_view");
  Tensor as_activations = g.external("acts", contiguous_view(DType::F32, {64, 16, 1, 1}, other.data()));
  g.mul_mat(weights, as_activations, "weights_times_acts");
  ASSERT_TRUE(g.status().ok()) << g.status().error().message;
  EXPECT_TRUE(g.read_only_as_weights(weights));
  EXPECT_FALSE(g.read_only_as_weights(tok));
  EXPECT_FALSE(g.read_only_as_weights(viewed));
  EXPECT_FALSE(g.read_only_as_weights(as_activations));
  std::vector<float> copy(w.size());
  EXPECT_TRUE(g.rebind_external(weights, copy.data(), TensorLayout::Split16).ok());
  EXPECT_EQ(g.tensor(weights).view.layout, TensorLayout::Split16);
  EXPECT_EQ(g.tensor(weights).view.data, copy.data());
  const Status refused = g.rebind_external(tok, copy.data(), TensorLayout::Split16);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("tok_embd"), std::string::npos) << refused.error().message;
  EXPECT_EQ(g.tensor(tok).view.data, table.data());  // unchanged
  EXPECT_EQ(g.tensor(tok).view.layout, TensorLayout::Plain);
}

TEST(Graph, AttentionResultHasValueRowsPerQuery) {
  Graph g;
  Tensor q = g.input("q", DType::F32, {32, 3, 4, 1});
  Tensor k = g.input("k", DType::F32, {32, 7, 2, 1});
  Tensor v = g.input("v", DType::F32, {24, 7, 2, 1});
  OpParams p;
  p.scale = 0.125f;
  Tensor o = g.attention(q, k, v, Tensor{}, p);
  ASSERT_TRUE(g.status().ok()) << g.status().error().message;
  EXPECT_EQ(g.tensor(o).view.ne, (Shape{24, 3, 4, 1}));
}

TEST(Graph, UnsupportedOpNamesTheNodeAndSticks) {
  Graph g;
  Tensor a = g.input("a", DType::F32, {16, 8, 1, 1});
  Tensor b = g.input("b", DType::F32, {5, 3, 1, 1});
  Tensor c = g.add(a, b, "blk.0.bad_add");
  EXPECT_FALSE(c.valid());
  ASSERT_FALSE(g.status().ok());
  const std::string& msg = g.status().error().message;
  EXPECT_NE(msg.find("'blk.0.bad_add' (#2 add)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[5, 3, 1, 1]"), std::string::npos) << msg;
  // Later calls change nothing and keep the first error.
  EXPECT_FALSE(g.silu(a).valid());
  EXPECT_EQ(g.size(), 2u);
  EXPECT_EQ(g.status().error().message, msg);
}

TEST(Graph, ViewsAreCheckedAgainstTheirStorage) {
  {
    Graph g;
    Tensor a = g.input("a", DType::F32, {16, 8, 1, 1});
    Tensor v = g.view(a, {16, 2, 1, 1}, {4, 64, 128, 256}, 64 * 6, "last_rows");
    ASSERT_TRUE(v.valid()) << g.status().error().message;
    EXPECT_EQ(g.tensor(v).storage, a.id);
    EXPECT_EQ(g.tensor(v).offset, 64u * 6);
    EXPECT_FALSE(g.view(a, {16, 2, 1, 1}, {4, 64, 128, 256}, 64 * 7).valid());
    EXPECT_NE(g.status().error().message.find("past the 512 bytes"), std::string::npos)
        << g.status().error().message;
  }
  {
    Graph g;
    Tensor a = g.input("a", DType::F32, {16, 8, 1, 1});
    EXPECT_FALSE(g.reshape(a, {16, 7, 1, 1}).valid());
    EXPECT_NE(g.status().error().message.find("element counts differ"), std::string::npos);
  }
  {
    Graph g;
    Tensor a = g.input("a", DType::F32, {16, 8, 1, 1});
    Tensor t = g.transpose(a);
    ASSERT_TRUE(t.valid());
    EXPECT_EQ(g.tensor(t).view.ne, (Shape{8, 16, 1, 1}));
    EXPECT_EQ(g.tensor(t).view.nb[0], 64u);
    EXPECT_EQ(g.tensor(t).view.nb[1], 4u);
    EXPECT_FALSE(g.reshape(t, {128, 1, 1, 1}).valid());  // not contiguous
    EXPECT_NE(g.status().error().message.find("not contiguous"), std::string::npos);
  }
  {
    Graph g;
    Tensor a = g.input("a", DType::F32, {16, 8, 1, 1});
    EXPECT_FALSE(g.permute(a, {0, 0, 1, 2}).valid());
    EXPECT_NE(g.status().error().message.find("not a permutation"), std::string::npos);
  }
  {
    Graph g;
    Tensor a = g.input("a", DType::F32, {16, 8, 1, 1});
    Tensor b = g.input("b", DType::F32, {16, 8, 1, 1});
    EXPECT_FALSE(g.cpy_into(a, b).valid());
    EXPECT_NE(g.status().error().message.find("inputs are read-only"), std::string::npos);
  }
  {
    Graph g;
    Tensor a = g.input("a", DType::F32, {16, 2, 1, 1});
    Tensor ids = g.input("ids", DType::I32, {2, 1, 1, 1});
    Tensor b = g.input("b", DType::F32, {16, 8, 1, 1});
    EXPECT_FALSE(g.set_rows(b, a, ids).valid());
    EXPECT_NE(g.status().error().message.find("inputs are read-only"), std::string::npos);
  }
}

TEST(Graph, CpyIntoWritesIntoTheDestinationStorage) {
  std::vector<float> cache(16 * 8);
  Graph g;
  Tensor kv = g.external("cache_k", contiguous_view(DType::F16, {16, 8, 1, 1}, cache.data()));
  Tensor x = g.input("x", DType::F32, {16, 2, 1, 1});
  Tensor slot = g.view(kv, {16, 2, 1, 1}, {2, 32, 64, 64}, 32 * 3);
  Tensor w = g.cpy_into(x, slot);
  ASSERT_TRUE(g.status().ok()) << g.status().error().message;
  EXPECT_EQ(g.tensor(w).storage, kv.id);
  EXPECT_EQ(g.tensor(w).offset, 96u);
  EXPECT_EQ(g.tensor(w).view.type, DType::F16);
}

TEST(Graph, SetRowsWritesIntoTheWholeDestination) {
  std::vector<float> cache(16 * 8);
  Graph g;
  Tensor kv = g.external("cache_k", contiguous_view(DType::F16, {16, 8, 1, 1}, cache.data()));
  Tensor x = g.input("x", DType::F32, {16, 2, 1, 1});
  Tensor cells = g.input("cells", DType::I32, {2, 1, 1, 1});
  Tensor w = g.set_rows(kv, x, cells);
  ASSERT_TRUE(g.status().ok()) << g.status().error().message;
  EXPECT_EQ(g.tensor(w).storage, kv.id);  // no arena memory: the rows land in the cache
  EXPECT_EQ(g.tensor(w).offset, 0u);
  EXPECT_EQ(g.tensor(w).view.ne, (Shape{16, 8, 1, 1}));
  EXPECT_EQ(g.tensor(w).view.type, DType::F16);
  EXPECT_FALSE(g.set_rows(kv, g.input("y", DType::F32, {8, 2, 1, 1}), cells).valid());  // row widths differ
}

}  // namespace
}  // namespace kiln
