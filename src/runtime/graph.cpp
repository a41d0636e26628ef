#include "runtime/graph.h"

#include <algorithm>

#include "runtime/shape.h"

namespace kiln {
namespace {

// Kernel checks refuse views without data; build-time validation only looks at shapes, so views
// get this address, which nothing dereferences.
alignas(64) unsigned char g_shape_only_placeholder[64];

std::string describe_view(const TensorView& v) { return describe_shape(v.type, v.ne); }

}  // namespace

const GraphTensor& Graph::tensor(Tensor t) const {
  KILN_ASSERT(t.id >= 0 && static_cast<size_t>(t.id) < tensors_.size(),
              "Graph::tensor: handle not of this graph");
  return tensors_[static_cast<size_t>(t.id)];
}

OpCall Graph::shape_call(int32_t id) const {
  const GraphTensor& t = tensors_[static_cast<size_t>(id)];
  KILN_ASSERT(t.role == TensorRole::Op, "Graph::shape_call: not an op node");
  OpCall call;
  call.kind = t.op;
  call.params = t.params;
  call.dst = t.view;
  call.dst.data = g_shape_only_placeholder;
  call.n_src = t.n_src;
  for (int i = 0; i < t.n_src; ++i) {
    call.src[i] = tensors_[static_cast<size_t>(t.src[static_cast<size_t>(i)])].view;
    call.src[i].data = g_shape_only_placeholder;
  }
  return call;
}

std::string Graph::describe(int32_t id) const {
  const GraphTensor& t = tensors_[static_cast<size_t>(id)];
  const char* what = t.role == TensorRole::Op         ? op_name(t.op)
                     : t.role == TensorRole::Input    ? "input"
                     : t.role == TensorRole::External ? "external"
                                                      : "view";
  return "'" + t.name + "' (#" + std::to_string(id) + " " + what + ")";
}

bool Graph::usable(std::initializer_list<Tensor> ts) const {
  if (!status_.ok()) return false;
  for (Tensor t : ts) {
    if (!t.valid()) return false;
    KILN_ASSERT(static_cast<size_t>(t.id) < tensors_.size(), "Graph: tensor handle not of this graph");
  }
  return true;
}

Tensor Graph::fail(Error error) {
  if (status_.ok()) status_ = std::move(error);
  return Tensor{};
}

size_t Graph::storage_bytes(int32_t storage) const {
  const GraphTensor& s = tensors_[static_cast<size_t>(storage)];
  return s.role == TensorRole::External ? s.view.span_bytes() : *contiguous_bytes(s.view.type, s.view.ne);
}

Tensor Graph::input(std::string name, DType type, Shape ne) {
  if (!status_.ok()) return Tensor{};
  if (!contiguous_bytes(type, ne)) {
    return fail(
        make_error("graph: input '", name, "': invalid shape ", dtype_name(type), " ", shape_text(ne)));
  }
  GraphTensor t;
  t.role = TensorRole::Input;
  t.name = std::move(name);
  t.view = contiguous_view(type, ne, nullptr);
  t.storage = static_cast<int32_t>(tensors_.size());
  tensors_.push_back(std::move(t));
  return Tensor{tensors_.back().storage};
}

Tensor Graph::external(std::string name, const TensorView& memory) {
  if (!status_.ok()) return Tensor{};
  if (!contiguous_bytes(memory.type, memory.ne) || !memory.is_contiguous() || memory.data == nullptr) {
    return fail(make_error("graph: external '", name, "': ", describe_view(memory),
                           memory.data == nullptr ? " has no data" : " is not a valid contiguous view"));
  }
  GraphTensor t;
  t.role = TensorRole::External;
  t.name = std::move(name);
  t.view = memory;
  t.storage = static_cast<int32_t>(tensors_.size());
  tensors_.push_back(std::move(t));
  return Tensor{tensors_.back().storage};
}

Status Graph::rebind_external(Tensor t, void* data, TensorLayout layout) {
  if (t.id < 0 || static_cast<size_t>(t.id) >= tensors_.size() ||
      tensors_[static_cast<size_t>(t.id)].role != TensorRole::External)
    return make_error("graph: rebind_external: tensor #", t.id, " is not an external leaf");
  GraphTensor& leaf = tensors_[static_cast<size_t>(t.id)];
  if (data == nullptr) return make_error("graph: external '", leaf.name, "': rebound to no data");
  if (layout != TensorLayout::Plain && !read_only_as_weights(t))
    return make_error("graph: external '", leaf.name,
                      "': a prepared layout for a tensor read other than as mul_mat weights");
  leaf.view.data = data;
  leaf.view.layout = layout;
  return ok_status();
}

bool Graph::read_only_as_weights(Tensor t) const {
  for (const GraphTensor& u : tensors_) {
    if (u.role == TensorRole::View && u.storage == t.id) return false;
    if (u.role != TensorRole::Op) continue;
    for (int i = 0; i < u.n_src; ++i) {
      if (u.src[static_cast<size_t>(i)] == t.id && (u.op != OpKind::MulMat || i != 0)) return false;
    }
  }
  return true;
}

Tensor Graph::add_op(OpKind kind, std::initializer_list<Tensor> srcs, const OpParams& params, DType type,
                     Shape ne, std::string_view name, int32_t into) {
  const int32_t id = static_cast<int32_t>(tensors_.size());
  GraphTensor t;
  t.role = TensorRole::Op;
  t.name = name.empty() ? std::string(op_name(kind)) + "#" + std::to_string(id) : std::string(name);
  t.op = kind;
  t.params = params;
  KILN_ASSERT(srcs.size() <= 4, "Graph: more than 4 sources");
  for (Tensor s : srcs) t.src[static_cast<size_t>(t.n_src++)] = s.id;
  if (into >= 0) {
    const GraphTensor& dst = tensors_[static_cast<size_t>(into)];
    t.view = dst.view;
    t.view.data = nullptr;
    t.storage = dst.storage;
    t.offset = dst.offset;
  } else {
    if (!contiguous_bytes(type, ne)) {
      return fail(make_error("graph: node '", t.name, "' (#", id, " ", op_name(kind),
                             "): invalid result shape ", dtype_name(type), " ", shape_text(ne)));
    }
    t.view = contiguous_view(type, ne, nullptr);
    t.storage = id;
  }
  tensors_.push_back(std::move(t));
  // Shape and type validation by the kernels themselves.
  const Status supported = check_kernel(shape_call(id));
  if (!supported.ok()) {
    std::string msg = "graph: node " + describe(id) + ": " + supported.error().message;
    tensors_.pop_back();
    return fail(Error{std::move(msg)});
  }
  op_nodes_.push_back(id);
  return Tensor{id};
}

Tensor Graph::get_rows(Tensor table, Tensor ids, std::string_view name) {
  if (!usable({table, ids})) return Tensor{};
  const TensorView& a = tensor(table).view;
  const TensorView& b = tensor(ids).view;
  return add_op(OpKind::GetRows, {table, ids}, {}, DType::F32, {a.ne[0], b.ne[0], b.ne[1], b.ne[2]}, name);
}

Tensor Graph::mul_mat(Tensor w, Tensor x, std::string_view name) { return mul_mat(w, x, OpParams{}, name); }

Tensor Graph::mul_mat(Tensor w, Tensor x, const OpParams& params, std::string_view name) {
  if (!usable({w, x})) return Tensor{};
  const TensorView& a = tensor(w).view;
  const TensorView& b = tensor(x).view;
  return add_op(OpKind::MulMat, {w, x}, params, DType::F32, {a.ne[1], b.ne[1], b.ne[2], b.ne[3]}, name);
}

Tensor Graph::add(Tensor a, Tensor b, std::string_view name) {
  if (!usable({a, b})) return Tensor{};
  return add_op(OpKind::Add, {a, b}, {}, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::mul(Tensor a, Tensor b, std::string_view name) {
  if (!usable({a, b})) return Tensor{};
  return add_op(OpKind::Mul, {a, b}, {}, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::scale(Tensor a, float s, std::string_view name) {
  if (!usable({a})) return Tensor{};
  OpParams p;
  p.scale = s;
  return add_op(OpKind::Scale, {a}, p, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::rms_norm(Tensor a, float eps, std::string_view name) {
  if (!usable({a})) return Tensor{};
  OpParams p;
  p.eps = eps;
  return add_op(OpKind::RmsNorm, {a}, p, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::rms_norm_mul(Tensor a, Tensor weight, float eps, std::string_view name) {
  if (!usable({a, weight})) return Tensor{};
  OpParams p;
  p.eps = eps;
  return add_op(OpKind::RmsNormMul, {a, weight}, p, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::layer_norm(Tensor a, float eps, std::string_view name) {
  if (!usable({a})) return Tensor{};
  OpParams p;
  p.eps = eps;
  return add_op(OpKind::LayerNorm, {a}, p, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::rope(Tensor a, Tensor positions, const RopeParams& rope, std::string_view name) {
  if (!usable({a, positions})) return Tensor{};
  OpParams p;
  p.rope = rope;
  return add_op(OpKind::Rope, {a, positions}, p, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::rope(Tensor a, Tensor positions, Tensor freq_factors, const RopeParams& rope,
                   std::string_view name) {
  if (!usable({a, positions, freq_factors})) return Tensor{};
  OpParams p;
  p.rope = rope;
  return add_op(OpKind::Rope, {a, positions, freq_factors}, p, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::soft_max(Tensor a, float scale, std::string_view name) {
  if (!usable({a})) return Tensor{};
  OpParams p;
  p.scale = scale;
  return add_op(OpKind::SoftMax, {a}, p, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::soft_max(Tensor a, Tensor mask, float scale, float max_bias, std::string_view name) {
  if (!usable({a, mask})) return Tensor{};
  OpParams p;
  p.scale = scale;
  p.max_bias = max_bias;
  return add_op(OpKind::SoftMax, {a, mask}, p, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::silu(Tensor a, std::string_view name) {
  if (!usable({a})) return Tensor{};
  return add_op(OpKind::Silu, {a}, {}, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::gelu(Tensor a, std::string_view name) {
  if (!usable({a})) return Tensor{};
  return add_op(OpKind::Gelu, {a}, {}, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::gelu_quick(Tensor a, std::string_view name) {
  if (!usable({a})) return Tensor{};
  return add_op(OpKind::GeluQuick, {a}, {}, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::gelu_erf(Tensor a, std::string_view name) {
  if (!usable({a})) return Tensor{};
  return add_op(OpKind::GeluErf, {a}, {}, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::tanh(Tensor a, std::string_view name) {
  if (!usable({a})) return Tensor{};
  return add_op(OpKind::Tanh, {a}, {}, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::relu(Tensor a, std::string_view name) {
  if (!usable({a})) return Tensor{};
  return add_op(OpKind::Relu, {a}, {}, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::im2col_1d(Tensor a, const Conv1dParams& conv, std::string_view name) {
  if (!usable({a})) return Tensor{};
  const Shape& an = tensor(a).view.ne;
  OpParams p;
  p.conv = conv;
  const int64_t out_len = std::max<int64_t>(conv.out_len(an[0]), 1);  // the kernel's check names a bad window
  return add_op(OpKind::Im2Col1d, {a}, p, DType::F16, {an[1] * conv.kernel, out_len, an[2], an[3]}, name);
}

Tensor Graph::im2col_2d(Tensor a, const Conv2dParams& conv, std::string_view name) {
  if (!usable({a})) return Tensor{};
  const Shape& an = tensor(a).view.ne;
  OpParams p;
  p.conv2d = conv;
  // Sizes of at least 1 keep the node valid: the kernel's check names a window that does not fit.
  const int64_t out_w = std::max<int64_t>(conv.out_size(0, an[1]), 1);
  const int64_t out_h = std::max<int64_t>(conv.out_size(1, an[2]), 1);
  const int64_t cols = an[0] * std::max(conv.kernel[0], 1) * std::max(conv.kernel[1], 1);
  return add_op(OpKind::Im2Col2d, {a}, p, DType::F32, {cols, out_w, out_h, an[3]}, name);
}

Tensor Graph::group_norm(Tensor a, int groups, float eps, std::string_view name) {
  if (!usable({a})) return Tensor{};
  OpParams p;
  p.groups = groups;
  p.eps = eps;
  return add_op(OpKind::GroupNorm, {a}, p, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::upscale(Tensor a, int f, std::string_view name) {
  if (!usable({a})) return Tensor{};
  if (f < 1) return fail(make_error("graph: upscale factor ", f, " is not positive"));
  const Shape& an = tensor(a).view.ne;
  OpParams p;
  p.scale_factor = f;
  return add_op(OpKind::Upscale, {a}, p, DType::F32, {an[0], an[1] * f, an[2] * f, an[3]}, name);
}

Tensor Graph::swiglu(Tensor a, Tensor b, std::string_view name) {
  if (!usable({a, b})) return Tensor{};
  return add_op(OpKind::SwiGlu, {a, b}, {}, DType::F32, tensor(a).view.ne, name);
}

Tensor Graph::concat(Tensor a, Tensor b, int axis, std::string_view name) {
  if (!usable({a, b})) return Tensor{};
  if (axis < 0 || axis >= kMaxDims)
    return fail(make_error("graph: concat axis ", axis, " is outside [0, 3]"));
  Shape ne = tensor(a).view.ne;
  ne[static_cast<size_t>(axis)] += tensor(b).view.ne[static_cast<size_t>(axis)];
  OpParams p;
  p.axis = axis;
  return add_op(OpKind::Concat, {a, b}, p, DType::F32, ne, name);
}

Tensor Graph::argmax(Tensor a, std::string_view name) {
  if (!usable({a})) return Tensor{};
  return add_op(OpKind::ArgMax, {a}, {}, DType::I32, {tensor(a).view.nrows(), 1, 1, 1}, name);
}

Tensor Graph::avg_pool_2d(Tensor a, int k, std::string_view name) {
  if (!usable({a})) return Tensor{};
  const Shape& an = tensor(a).view.ne;
  if (k < 1) return fail(make_error("graph: avg_pool_2d window ", k, " is not positive"));
  OpParams p;
  p.pool = k;
  return add_op(OpKind::AvgPool2d, {a}, p, DType::F32, {an[0], an[1] / k, an[2] / k, an[3]}, name);
}

Tensor Graph::attention(Tensor q, Tensor k, Tensor v, Tensor mask, const OpParams& params,
                        std::string_view name) {
  const Shape qn = q.valid() ? tensor(q).view.ne : Shape{};
  const int64_t d_v = v.valid() ? tensor(v).view.ne[0] : 0;
  if (mask.valid()) {
    if (!usable({q, k, v, mask})) return Tensor{};
    return add_op(OpKind::Attention, {q, k, v, mask}, params, DType::F32, {d_v, qn[1], qn[2], qn[3]}, name);
  }
  if (!usable({q, k, v})) return Tensor{};
  return add_op(OpKind::Attention, {q, k, v}, params, DType::F32, {d_v, qn[1], qn[2], qn[3]}, name);
}

Tensor Graph::cast(Tensor a, DType type, std::string_view name) {
  if (!usable({a})) return Tensor{};
  return add_op(OpKind::Cpy, {a}, {}, type, tensor(a).view.ne, name);
}

Tensor Graph::cpy_into(Tensor src, Tensor dst, std::string_view name) {
  if (!usable({src, dst})) return Tensor{};
  const GraphTensor& d = tensor(dst);
  if (tensors_[static_cast<size_t>(d.storage)].role == TensorRole::Input) {
    return fail(make_error("graph: cpy_into ", describe(dst.id), ": inputs are read-only"));
  }
  return add_op(OpKind::Cpy, {src}, {}, d.view.type, d.view.ne, name, dst.id);
}

Tensor Graph::set_rows(Tensor dst, Tensor src, Tensor ids, std::string_view name) {
  if (!usable({dst, src, ids})) return Tensor{};
  const GraphTensor& d = tensor(dst);
  if (tensors_[static_cast<size_t>(d.storage)].role == TensorRole::Input) {
    return fail(make_error("graph: set_rows ", describe(dst.id), ": inputs are read-only"));
  }
  return add_op(OpKind::SetRows, {src, ids}, {}, d.view.type, d.view.ne, name, dst.id);
}

Tensor Graph::op(OpKind kind, std::initializer_list<Tensor> srcs, const OpParams& params, DType type,
                 Shape ne, std::string_view name) {
  if (!usable(srcs)) return Tensor{};
  if (srcs.size() > 4)
    return fail(make_error("graph: ", op_name(kind), " with ", srcs.size(), " sources (max 4)"));
  return add_op(kind, srcs, params, type, ne, name);
}

Tensor Graph::add_view(Tensor a, const TensorView& v, size_t offset, std::string_view name) {
  const GraphTensor& src = tensor(a);
  const int32_t id = static_cast<int32_t>(tensors_.size());
  const std::string nm = name.empty() ? "view#" + std::to_string(id) : std::string(name);
  for (int i = 0; i < kMaxDims; ++i) {
    if (v.ne[static_cast<size_t>(i)] < 1) {
      return fail(make_error("graph: view '", nm, "' of ", describe(a.id), ": size ne[", i,
                             "] = ", v.ne[static_cast<size_t>(i)], " is not positive"));
    }
  }
  if (v.ne[0] % block_size(v.type) != 0) {
    return fail(make_error("graph: view '", nm, "' of ", describe(a.id), ": row of ", v.ne[0],
                           " is not whole blocks of ", dtype_name(v.type)));
  }
  // Largest byte addressed, computed without overflow: every extent is checked against the storage.
  const size_t storage_size = storage_bytes(src.storage);
  size_t end = src.offset;
  bool overflow = __builtin_add_overflow(end, offset, &end);
  size_t extent = v.row_bytes();
  for (int i = 1; i < kMaxDims && !overflow; ++i) {
    size_t step = 0;
    overflow = __builtin_mul_overflow(static_cast<size_t>(v.ne[static_cast<size_t>(i)] - 1),
                                      v.nb[static_cast<size_t>(i)], &step) ||
               __builtin_add_overflow(extent, step, &extent);
  }
  if (!overflow) overflow = __builtin_add_overflow(end, extent, &end);
  if (overflow || end > storage_size) {
    return fail(make_error("graph: view '", nm, "' of ", describe(a.id), " at offset ", offset,
                           " reaches past the ", storage_size, " bytes of its storage ",
                           describe(src.storage)));
  }
  GraphTensor t;
  t.role = TensorRole::View;
  t.name = nm;
  t.view = v;
  t.view.data = nullptr;
  t.storage = src.storage;
  t.offset = src.offset + offset;
  t.src[0] = a.id;
  t.n_src = 1;
  tensors_.push_back(std::move(t));
  return Tensor{id};
}

Tensor Graph::view(Tensor a, Shape ne, std::array<size_t, kMaxDims> nb, size_t offset,
                   std::string_view name) {
  if (!usable({a})) return Tensor{};
  TensorView v;
  v.type = tensor(a).view.type;
  v.ne = ne;
  v.nb = nb;
  return add_view(a, v, offset, name);
}

Tensor Graph::reshape(Tensor a, Shape ne, std::string_view name) {
  if (!usable({a})) return Tensor{};
  const TensorView& src = tensor(a).view;
  const std::optional<size_t> bytes = contiguous_bytes(src.type, ne);
  if (!src.is_contiguous() || !bytes || ne[0] * ne[1] * ne[2] * ne[3] != src.nelements()) {
    return fail(make_error("graph: reshape of ", describe(a.id), " ", describe_view(src), " to ",
                           shape_text(ne),
                           src.is_contiguous() ? ": element counts differ" : ": source is not contiguous"));
  }
  return add_view(a, contiguous_view(src.type, ne, nullptr), 0, name);
}

Tensor Graph::permute(Tensor a, std::array<int, kMaxDims> axes, std::string_view name) {
  if (!usable({a})) return Tensor{};
  std::array<bool, kMaxDims> seen{};
  for (int ax : axes) {
    if (ax < 0 || ax >= kMaxDims || seen[static_cast<size_t>(ax)]) {
      return fail(make_error("graph: permute of ", describe(a.id), ": axes ", axes[0], ",", axes[1], ",",
                             axes[2], ",", axes[3], " are not a permutation of 0..3"));
    }
    seen[static_cast<size_t>(ax)] = true;
  }
  const TensorView& src = tensor(a).view;
  if (info(src.type).quantized && axes[0] != 0) {
    return fail(make_error("graph: permute of quantized ", describe(a.id), " must keep dimension 0"));
  }
  TensorView v = src;
  for (size_t i = 0; i < kMaxDims; ++i) {
    v.ne[static_cast<size_t>(axes[i])] = src.ne[i];
    v.nb[static_cast<size_t>(axes[i])] = src.nb[i];
  }
  return add_view(a, v, 0, name);
}

Tensor Graph::transpose(Tensor a, std::string_view name) { return permute(a, {1, 0, 2, 3}, name); }

void Graph::mark_output(Tensor t) {
  if (!usable({t})) return;
  tensors_[static_cast<size_t>(t.id)].output = true;
}

}  // namespace kiln
