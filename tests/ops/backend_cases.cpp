#include "backend_cases.h"

#include "runtime/graph.h"
#include "runtime/planner.h"

namespace kiln::test {

namespace {

Tensor add_node(Graph& g, const BackendCase& c, const std::vector<Tensor>& in) {
  const DType t = c.dst->type();
  const Shape ne = c.dst->ne();
  switch (in.size()) {
    case 1:
      return g.op(c.kind, {in[0]}, c.params, t, ne, c.name);
    case 2:
      return g.op(c.kind, {in[0], in[1]}, c.params, t, ne, c.name);
    case 3:
      return g.op(c.kind, {in[0], in[1], in[2]}, c.params, t, ne, c.name);
    default:
      return g.op(c.kind, {in[0], in[1], in[2], in[3]}, c.params, t, ne, c.name);
  }
}

}  // namespace

Status run_on(Backend& backend, const BackendCase& c, std::vector<uint8_t>& out) {
  Device& dev = backend.device();
  Graph g;
  std::vector<Tensor> in;
  for (size_t i = 0; i < c.srcs.size(); ++i) {
    in.push_back(g.input("src" + std::to_string(i), c.srcs[i]->type(), c.srcs[i]->ne()));
  }
  const Tensor y = add_node(g, c, in);
  g.mark_output(y);
  KILN_TRY(g.status());
  ComputeArena arena(dev, "ops-test");
  KILN_TRY(arena.reserve(g));
  KILN_TRY(arena.allocate());
  KILN_ASSIGN_OR_RETURN(ExecPlan plan, arena.plan(g));
  KILN_TRY(backend.prepare(plan));
  std::vector<std::unique_ptr<Buffer>> buffers;
  for (size_t i = 0; i < c.srcs.size(); ++i) {
    const TensorView& hv = c.srcs[i]->view();
    const size_t bytes = hv.span_bytes();
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> buf,
                          dev.allocate(BufferDesc{bytes, MemoryKind::Compute, "ops-test"}));
    KILN_ASSIGN_OR_RETURN(TensorView dv, buf->view(hv.type, hv.ne));
    KILN_TRY(dev.upload(dv, hv.data, bytes));
    KILN_TRY(plan.bind(in[i], dv));
    buffers.push_back(std::move(buf));
  }
  KILN_TRY(backend.execute(plan));
  backend.synchronize();
  const TensorView yv = plan.view(y);
  out.resize(yv.span_bytes());
  return dev.download(yv, out.data(), out.size());
}

std::shared_ptr<HostTensor> random_tensor(DType t, Shape4 ne, std::mt19937& rng, double lo, double hi) {
  auto h = std::make_shared<HostTensor>(t, ne);
  if (info(t).quantized) {
    std::vector<float> v(static_cast<size_t>(h->view().nelements()));
    std::uniform_real_distribution<float> dist(static_cast<float>(lo), static_cast<float>(hi));
    for (float& x : v) x = dist(rng);
    h->set_quantized(v);
  } else {
    h->fill_uniform(rng, lo, hi);
  }
  return h;
}

std::vector<BackendCase> make_cases() {
  std::mt19937 rng(40);
  std::vector<BackendCase> cs;
  auto f32 = [&](Shape4 ne) { return random_tensor(DType::F32, ne, rng); };
  auto out = [](DType t, Shape4 ne) { return std::make_shared<HostTensor>(t, ne); };
  OpParams none;
  cs.push_back({"add broadcast",
                OpKind::Add,
                {f32({33, 5, 2, 1}), f32({33, 1, 1, 1})},
                none,
                out(DType::F32, {33, 5, 2, 1})});
  cs.push_back(
      {"mul", OpKind::Mul, {f32({7, 3, 1, 1}), f32({7, 3, 1, 1})}, none, out(DType::F32, {7, 3, 1, 1})});
  OpParams sc;
  sc.scale = 0.7f;
  cs.push_back({"scale", OpKind::Scale, {f32({9, 4, 1, 1})}, sc, out(DType::F32, {9, 4, 1, 1})});
  OpParams eps;
  eps.eps = 1e-6f;
  cs.push_back({"rms_norm", OpKind::RmsNorm, {f32({257, 3, 1, 1})}, eps, out(DType::F32, {257, 3, 1, 1})});
  cs.push_back({"layer_norm", OpKind::LayerNorm, {f32({65, 3, 1, 1})}, eps, out(DType::F32, {65, 3, 1, 1})});
  cs.push_back({"rms_norm_mul",
                OpKind::RmsNormMul,
                {f32({257, 3, 2, 1}), f32({257, 1, 2, 1})},
                eps,
                out(DType::F32, {257, 3, 2, 1})});
  OpParams sm;
  sm.scale = 0.125f;
  cs.push_back({"soft_max mask",
                OpKind::SoftMax,
                {f32({40, 6, 4, 1}), random_tensor(DType::F16, {40, 6, 1, 1}, rng)},
                sm,
                out(DType::F32, {40, 6, 4, 1})});
  auto pos = std::make_shared<HostTensor>(DType::I32, Shape4{5, 1, 1, 1});
  for (int64_t i = 0; i < 5; ++i) pos->set(i, 0, 0, 0, 3 * i + 1);
  OpParams rp;
  rp.rope.n_dims = 64;
  rp.rope.mode = RopeMode::Neox;
  rp.rope.freq_base = 500000.0f;
  cs.push_back({"rope neox ff",
                OpKind::Rope,
                {f32({64, 4, 5, 1}), pos, random_tensor(DType::F32, {32, 1, 1, 1}, rng, 1, 4)},
                rp,
                out(DType::F32, {64, 4, 5, 1})});
  cs.push_back({"silu", OpKind::Silu, {f32({100, 2, 1, 1})}, none, out(DType::F32, {100, 2, 1, 1})});
  cs.push_back({"gelu", OpKind::Gelu, {f32({100, 2, 1, 1})}, none, out(DType::F32, {100, 2, 1, 1})});
  cs.push_back({"swiglu",
                OpKind::SwiGlu,
                {f32({50, 2, 1, 1}), f32({50, 2, 1, 1})},
                none,
                out(DType::F32, {50, 2, 1, 1})});
  cs.push_back({"cpy f32->f16", OpKind::Cpy, {f32({31, 3, 1, 1})}, none, out(DType::F16, {31, 3, 1, 1})});
  cs.push_back({"cpy f32->q8_0", OpKind::Cpy, {f32({64, 3, 1, 1})}, none, out(DType::Q8_0, {64, 3, 1, 1})});
  OpParams ax;
  ax.axis = 1;
  cs.push_back(
      {"concat", OpKind::Concat, {f32({8, 2, 3, 1}), f32({8, 5, 3, 1})}, ax, out(DType::F32, {8, 7, 3, 1})});
  OpParams pool;
  pool.pool = 2;
  cs.push_back({"avg_pool2d", OpKind::AvgPool2d, {f32({6, 8, 4, 2})}, pool, out(DType::F32, {6, 4, 2, 2})});
  cs.push_back({"argmax", OpKind::ArgMax, {f32({77, 6, 1, 1})}, none, out(DType::I32, {6, 1, 1, 1})});
  auto ids = std::make_shared<HostTensor>(DType::I32, Shape4{4, 1, 1, 1});
  for (int64_t i = 0; i < 4; ++i) ids->set(i, 0, 0, 0, (5 * i + 2) % 9);
  // Every dst row is written (a permutation), so the result does not depend on the arena's bytes.
  auto cells = std::make_shared<HostTensor>(DType::I32, Shape4{5, 1, 1, 1});
  for (int64_t i = 0; i < 5; ++i) cells->set(i, 0, 0, 0, (3 * i + 1) % 5);
  cs.push_back(
      {"set_rows f16", OpKind::SetRows, {f32({40, 5, 1, 1}), cells}, none, out(DType::F16, {40, 5, 1, 1})});
  cs.push_back({"get_rows q4_K",
                OpKind::GetRows,
                {random_tensor(DType::Q4_K, {256, 9, 1, 1}, rng), ids},
                none,
                out(DType::F32, {256, 4, 1, 1})});
  for (DType wt : {DType::F16, DType::Q4_0, DType::Q6_K, DType::Q5_1}) {
    const int64_t k = block_size(wt) == 256 ? 512 : 96;
    cs.push_back({"mul_mat " + std::string(dtype_name(wt)),
                  OpKind::MulMat,
                  {random_tensor(wt, {k, 37, 1, 1}, rng), f32({k, 21, 1, 1})},
                  none,
                  out(DType::F32, {37, 21, 1, 1})});
  }
  for (AttentionPath path : {AttentionPath::Plain, AttentionPath::Flash}) {
    OpParams ap;
    ap.scale = 0.125f;
    ap.attn_path = path;
    ap.q_pos0 = 3;
    cs.push_back(
        {path == AttentionPath::Plain ? "attention plain" : "attention flash",
         OpKind::Attention,
         {f32({64, 4, 8, 1}), random_tensor(DType::F16, {64, 7, 2, 1}, rng), random_tensor(DType::F16, {64, 7, 2, 1}, rng)},
         ap,
         out(DType::F32, {64, 4, 8, 1})});
  }
  return cs;
}

void run_direct(const BackendCase& c) {
  std::vector<const HostTensor*> srcs;
  for (const auto& s : c.srcs) srcs.push_back(s.get());
  run_checked(make_call(c.kind, *c.dst, srcs, c.params), *c.dst);
}

}  // namespace kiln::test
