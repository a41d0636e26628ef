// Graph: a static compute graph, built once per batch shape and executed many times.
//
// Tensors are leaves, op nodes or views:
//   - input(): a leaf whose memory is bound per execution (ExecPlan::bind), e.g. token ids;
//   - external(): a leaf over memory owned outside the graph, bound at build time (weights, the
//     KV cache); the view's data is an address on the executing backend's device;
//   - op nodes (add, mul_mat, ...): an OpCall over other tensors; their results live in the
//     compute arena (placed by the planner) unless written into another tensor (cpy_into);
//   - views (view, reshape, permute, transpose): metadata over another tensor's storage.
// Nodes execute in the order they were added, which is topological because an op can only refer
// to tensors that already exist; a write into a leaf (cpy_into the KV cache) therefore happens
// before every op added after it (cpy_into, set_rows).
//
// Every op is validated when added: its shape is derived here and kernel_supported() (ops/op.h)
// must accept it. The first problem is kept as status() with a message naming the node; later
// calls return invalid Tensors and change nothing, so a builder checks status() once at the end.
//
// Thread-safety: none while building; a finished graph is read-only and may be planned by many.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/tensor_view.h"
#include "ops/op.h"

namespace kiln {

// A handle to a tensor of one Graph.
struct Tensor {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
};

enum class TensorRole : uint8_t { Input, External, Op, View };

struct GraphTensor {
  TensorRole role = TensorRole::Op;
  std::string name;
  // type, ne and nb; data is set for External leaves only (the bound memory).
  TensorView view;
  // The tensor whose memory this one lives in (itself for leaves and op results of their own),
  // and the byte offset of this tensor's first element in it.
  int32_t storage = -1;
  size_t offset = 0;
  // Op nodes: the operation and its sources.
  OpKind op = OpKind::Add;
  OpParams params;
  std::array<int32_t, 4> src{-1, -1, -1, -1};
  int n_src = 0;
  bool output = false;
};

using Shape = std::array<int64_t, kMaxDims>;

class Graph {
 public:
  // Leaves.
  Tensor input(std::string name, DType type, Shape ne);
  Tensor external(std::string name, const TensorView& memory);
  // Points external leaf `t` at `data`: the same tensor placed elsewhere (a graph built over a
  // file's mapping, then moved onto a device's copies of its tensors), in `layout` (a prepared
  // kernel layout, ops/weight_prep.h, only for a tensor read_only_as_weights). An Error, and nothing
  // changed, when `t` is not an external leaf, `data` is null or the layout does not apply.
  Status rebind_external(Tensor t, void* data, TensorLayout layout = TensorLayout::Plain);
  // Whether every reader of `t` is a mul_mat that takes it as its weights (source 0) and nothing
  // else reads it (no view, no other source): the tensors whose bytes may be in a kernel layout.
  bool read_only_as_weights(Tensor t) const;

  // Ops (shapes as in ops/op.h; every result is F32 unless stated). `name` is optional and
  // appears in errors; unnamed nodes are called "<op>#<id>".
  Tensor get_rows(Tensor table, Tensor ids,
                  std::string_view name = {});                     // [table.ne0, ids.ne0, ids.ne1, ids.ne2]
  Tensor mul_mat(Tensor w, Tensor x, std::string_view name = {});  // [w.ne1, x.ne1, x.ne2, x.ne3]
  Tensor mul_mat(Tensor w, Tensor x, const OpParams& params,
                 std::string_view name = {});  // e.g. single_row_order
  Tensor add(Tensor a, Tensor b, std::string_view name = {});
  Tensor mul(Tensor a, Tensor b, std::string_view name = {});
  Tensor scale(Tensor a, float s, std::string_view name = {});
  Tensor rms_norm(Tensor a, float eps, std::string_view name = {});
  // mul(rms_norm(a, eps), weight) as one node (OpKind::RmsNormMul): the same bits, one pass over
  // a and one arena block instead of two. weight repeats over a as mul's b does.
  Tensor rms_norm_mul(Tensor a, Tensor weight, float eps, std::string_view name = {});
  Tensor layer_norm(Tensor a, float eps, std::string_view name = {});
  Tensor rope(Tensor a, Tensor positions, const RopeParams& rope, std::string_view name = {});
  Tensor rope(Tensor a, Tensor positions, Tensor freq_factors, const RopeParams& rope,
              std::string_view name = {});
  Tensor soft_max(Tensor a, float scale, std::string_view name = {});
  Tensor soft_max(Tensor a, Tensor mask, float scale, float max_bias, std::string_view name = {});
  Tensor silu(Tensor a, std::string_view name = {});
  Tensor gelu(Tensor a, std::string_view name = {});
  Tensor gelu_quick(Tensor a, std::string_view name = {});
  Tensor gelu_erf(Tensor a, std::string_view name = {});
  Tensor tanh(Tensor a, std::string_view name = {});
  Tensor relu(Tensor a, std::string_view name = {});
  // The columns of a 1-D convolution of a [len, channels, b] (OpKind::Im2Col1d): F16
  // [channels * kernel, out_len, b]; mul_mat(columns, kernel [channels * kernel, c_out]) convolves.
  Tensor im2col_1d(Tensor a, const Conv1dParams& conv, std::string_view name = {});
  // The columns of a 2-D convolution of a [c, w, h, b] grid (OpKind::Im2Col2d): F32
  // [c * kh * kw, out_w, out_h, b]; mul_mat(kernel [c * kh * kw, c_out], columns) convolves.
  Tensor im2col_2d(Tensor a, const Conv2dParams& conv, std::string_view name = {});
  // a [c, w, h, b] normalized per item over each of `groups` groups of channels (OpKind::GroupNorm).
  Tensor group_norm(Tensor a, int groups, float eps, std::string_view name = {});
  // a [c, w, h, b] -> [c, w * f, h * f, b], nearest neighbour (OpKind::Upscale).
  Tensor upscale(Tensor a, int f, std::string_view name = {});
  Tensor swiglu(Tensor a, Tensor b, std::string_view name = {});
  Tensor concat(Tensor a, Tensor b, int axis, std::string_view name = {});
  Tensor argmax(Tensor a, std::string_view name = {});  // I32 [rows of a]
  // a [c, w, h, b] -> [c, w / k, h / k, b]: the mean of each k x k window (ops/op.h AvgPool2d).
  Tensor avg_pool_2d(Tensor a, int k, std::string_view name = {});
  // softmax(q k^T * scale + mask) v -> [v.ne0, q.ne1, q.ne2, q.ne3]; mask may be Tensor{} (then
  // params.causal / q_pos0 apply). k and v are usually views of the KV cache.
  Tensor attention(Tensor q, Tensor k, Tensor v, Tensor mask, const OpParams& params,
                   std::string_view name = {});
  // A contiguous copy of `a` converted to `type`.
  Tensor cast(Tensor a, DType type, std::string_view name = {});
  // Copies `src` into the memory of `dst` (a leaf or a view of one, e.g. a KV-cache slot),
  // converting to dst's type; the result is a tensor over dst's memory, ordered after the write.
  Tensor cpy_into(Tensor src, Tensor dst, std::string_view name = {});
  // Writes row i of `src` (F32 [n, m, a, b]) into row ids[i] of `dst` (a leaf or a view of one,
  // [n, rows, a, b], e.g. a KV cache) converted to dst's type (OpKind::SetRows); ids is I32
  // [m, a, b]. The result is a tensor over dst's memory, ordered after the write. Unlike a
  // cpy_into a view at an offset, the rows written are data: the graph does not depend on them.
  Tensor set_rows(Tensor dst, Tensor src, Tensor ids, std::string_view name = {});
  // Any op with its result's type and sizes stated by the caller; the result is a new contiguous
  // tensor.
  Tensor op(OpKind kind, std::initializer_list<Tensor> srcs, const OpParams& params, DType type, Shape ne,
            std::string_view name = {});

  // Views over a's storage. Sizes, strides (bytes) and offset as in TensorView; the view must lie
  // inside the storage of `a`.
  Tensor view(Tensor a, Shape ne, std::array<size_t, kMaxDims> nb, size_t offset, std::string_view name = {});
  Tensor reshape(Tensor a, Shape ne, std::string_view name = {});  // a contiguous, same element count
  // Dimension i of `a` becomes dimension axes[i] of the result (ggml_permute's convention).
  Tensor permute(Tensor a, std::array<int, kMaxDims> axes, std::string_view name = {});
  Tensor transpose(Tensor a, std::string_view name = {});  // swaps dimensions 0 and 1

  // Outputs keep their memory to the end of an execution, for the caller to read.
  void mark_output(Tensor t);

  // The first build error, or ok.
  const Status& status() const { return status_; }
  size_t size() const { return tensors_.size(); }
  const GraphTensor& tensor(Tensor t) const;
  const std::vector<GraphTensor>& tensors() const { return tensors_; }
  // Op nodes in execution order.
  const std::vector<int32_t>& op_nodes() const { return op_nodes_; }
  // "'name' (#id mul_mat)", for messages.
  std::string describe(int32_t id) const;
  // The OpCall of op node `id` with every view's shape and strides but placeholder data that
  // nothing may dereference: for kernel_supported() and plan_kernel(), which look at shapes only.
  OpCall shape_call(int32_t id) const;

 private:
  friend class GraphPartBuilder;  // runtime/graph_split.cpp: copies nodes into a part's graph
  // Adds an op node; its result is a new contiguous tensor of `type`/`ne` or, when into >= 0, lives
  // in tensor `into`'s memory.
  Tensor add_op(OpKind kind, std::initializer_list<Tensor> srcs, const OpParams& params, DType type, Shape ne,
                std::string_view name, int32_t into = -1);
  Tensor add_view(Tensor a, const TensorView& v, size_t offset, std::string_view name);
  // False (and nothing else) when an earlier error is pending or a handle is invalid.
  bool usable(std::initializer_list<Tensor> ts) const;
  Tensor fail(Error error);
  // Bytes of a tensor's storage tensor.
  size_t storage_bytes(int32_t storage) const;

  std::vector<GraphTensor> tensors_;
  std::vector<int32_t> op_nodes_;
  Status status_;
};

}  // namespace kiln
