#include "runtime/random_graph.h"

#include <cmath>
#include <random>
#include <string>

namespace kiln::test {

DeviceTensor upload_f32(Device& device, const std::vector<float>& values, Shape ne, MemoryKind kind) {
  DeviceTensor t;
  auto buf = device.allocate(BufferDesc{values.size() * sizeof(float), kind, "test"});
  KILN_ASSERT(buf.ok(), buf.ok() ? "" : buf.error().message);
  t.buffer = std::move(buf).value();
  auto view = t.buffer->view(DType::F32, ne);
  KILN_ASSERT(view.ok(), "upload_f32: shape does not match the values");
  t.view = *view;
  Status st = device.upload(t.view, values.data(), values.size() * sizeof(float));
  KILN_ASSERT(st.ok(), st.ok() ? "" : st.error().message);
  return t;
}

std::vector<float> download_f32(const Device& device, const TensorView& view) {
  std::vector<float> out(static_cast<size_t>(view.nelements()));
  Status st = device.download(view, out.data(), out.size() * sizeof(float));
  KILN_ASSERT(st.ok(), st.ok() ? "" : st.error().message);
  return out;
}

Status RandomGraph::bind_inputs(ExecPlan& plan) const {
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_TRY(plan.bind(inputs[i], memory[memory.size() - inputs.size() + i].view));
  }
  return ok_status();
}

namespace {

struct Node {
  Tensor t;
  int64_t rows;
  std::vector<float> values;  // contiguous [ne0, rows]
};

}  // namespace

std::unique_ptr<RandomGraph> make_random_graph(Device& device, const RandomGraphOptions& o) {
  auto rg = std::make_unique<RandomGraph>();
  Graph& g = rg->graph;
  std::mt19937 rng(o.seed);
  std::uniform_real_distribution<float> val(-1.0f, 1.0f);
  auto random_values = [&](int64_t rows) {
    std::vector<float> v(static_cast<size_t>(o.ne0 * rows));
    for (float& x : v) x = val(rng);
    return v;
  };
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };

  std::vector<Node> pool;
  // Externals (e.g. weights), one per row family, bound at build time.
  for (int64_t rows : o.row_counts) {
    std::vector<float> v = random_values(rows);
    rg->memory.push_back(upload_f32(device, v, {o.ne0, rows, 1, 1}, MemoryKind::Weights));
    std::string name = "w";
    name += std::to_string(rows);
    pool.push_back({g.external(std::move(name), rg->memory.back().view), rows, std::move(v)});
  }
  // Inputs, bound per execution: two per row family.
  for (int64_t rows : o.row_counts) {
    for (int k = 0; k < 2; ++k) {
      std::vector<float> v = random_values(rows);
      std::string name = "x";
      name += std::to_string(rows);
      name += '_';
      name += std::to_string(k);
      Tensor t = g.input(std::move(name), DType::F32, {o.ne0, rows, 1, 1});
      rg->inputs.push_back(t);
      rg->input_values.push_back(v);
      pool.push_back({t, rows, std::move(v)});
    }
  }
  for (const auto& v : rg->input_values) {
    rg->memory.push_back(
        upload_f32(device, v, {o.ne0, static_cast<int64_t>(v.size()) / o.ne0, 1, 1}, MemoryKind::Compute));
  }

  const int64_t ne0 = o.ne0;
  for (int i = 0; i < o.n_ops; ++i) {
    const Node& a = pool[pick(pool.size())];
    const int kind = static_cast<int>(pick(7));
    Node out{Tensor{}, a.rows, a.values};
    if (kind <= 1) {  // add / mul with a same-shape or one-row src1
      std::vector<size_t> cands;
      for (size_t j = 0; j < pool.size(); ++j) {
        if (pool[j].rows == a.rows || pool[j].rows == 1) cands.push_back(j);
      }
      const Node& b = pool[cands[pick(cands.size())]];
      for (int64_t r = 0; r < a.rows; ++r) {
        for (int64_t c = 0; c < ne0; ++c) {
          const float x = a.values[static_cast<size_t>(r * ne0 + c)];
          const float y = b.values[static_cast<size_t>((b.rows == 1 ? 0 : r) * ne0 + c)];
          out.values[static_cast<size_t>(r * ne0 + c)] = kind == 0 ? x + y : x * y;
        }
      }
      out.t = kind == 0 ? g.add(a.t, b.t) : g.mul(a.t, b.t);
    } else if (kind == 2) {  // scale
      const float s = val(rng) * 2.0f;
      for (float& x : out.values) x = x * s;
      out.t = g.scale(a.t, s);
    } else if (kind == 3) {  // silu
      for (float& x : out.values) x = x / (1.0f + std::exp(-x));
      out.t = g.silu(a.t);
    } else if (kind == 4) {  // scale through reshaped views: a viewed as [ne0 / 2, 2 rows] and back
      for (float& x : out.values) x = x * 0.5f;
      Tensor v = g.reshape(a.t, {ne0 / 2, a.rows * 2, 1, 1});
      out.t = g.reshape(g.scale(v, 0.5f), {ne0, a.rows, 1, 1});
    } else if (kind == 5) {  // transpose, copy to contiguous, reinterpret as [ne0, rows]
      for (int64_t r = 0; r < a.rows; ++r) {
        for (int64_t c = 0; c < ne0; ++c) {
          out.values[static_cast<size_t>(r + c * a.rows)] = a.values[static_cast<size_t>(c + r * ne0)];
        }
      }
      out.t = g.reshape(g.cast(g.transpose(a.t), DType::F32), {ne0, a.rows, 1, 1});
    } else {  // swiglu of two same-shape tensors
      std::vector<size_t> cands;
      for (size_t j = 0; j < pool.size(); ++j) {
        if (pool[j].rows == a.rows) cands.push_back(j);
      }
      const Node& b = pool[cands[pick(cands.size())]];
      for (size_t j = 0; j < out.values.size(); ++j) {
        const float x = a.values[j];
        out.values[j] = x / (1.0f + std::exp(-x)) * b.values[j];
      }
      out.t = g.swiglu(a.t, b.t);
    }
    pool.push_back(std::move(out));
  }
  KILN_ASSERT(g.status().ok(), g.status().ok() ? "" : g.status().error().message);
  // Outputs: the last node and a few random op results.
  const size_t first_op = o.row_counts.size() * 3;
  std::vector<size_t> chosen{pool.size() - 1};
  for (int k = 0; k < 3; ++k) chosen.push_back(first_op + pick(pool.size() - first_op));
  for (size_t j : chosen) {
    if (g.tensor(pool[j].t).output) continue;
    g.mark_output(pool[j].t);
    rg->outputs.push_back(pool[j].t);
    rg->expected.push_back(pool[j].values);
  }
  return rg;
}

std::vector<std::vector<float>> run_once(Backend& backend, ComputeArena& arena, RandomGraph& rg) {
  auto plan = arena.plan(rg.graph);
  KILN_ASSERT(plan.ok(), plan.ok() ? "" : plan.error().message);
  Status st = arena.allocate();
  KILN_ASSERT(st.ok(), st.ok() ? "" : st.error().message);
  st = backend.prepare(*plan);
  KILN_ASSERT(st.ok(), st.ok() ? "" : st.error().message);
  st = rg.bind_inputs(*plan);
  KILN_ASSERT(st.ok(), st.ok() ? "" : st.error().message);
  st = backend.execute(*plan);
  KILN_ASSERT(st.ok(), st.ok() ? "" : st.error().message);
  std::vector<std::vector<float>> out;
  for (Tensor t : rg.outputs) out.push_back(download_f32(backend.device(), plan->view(t)));
  return out;
}

}  // namespace kiln::test
