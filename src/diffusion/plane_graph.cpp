#include "diffusion/plane_graph.h"

#include "runtime/planner.h"

namespace kiln::diffusion {
namespace {

Status check_sides(const std::string& who, int64_t width, int64_t height) {
  if (width < 1 || height < 1 || width > kMaxPlaneSide || height > kMaxPlaneSide)
    return make_error(who, ": an input of ", width, " x ", height, ": each side must be in [1, ",
                      kMaxPlaneSide, "]");
  return ok_status();
}

struct PlanesGraph {
  Tensor in, out;
};

PlanesGraph build(Graph& g, int64_t width, int64_t height, int64_t channels, const GridBody& body) {
  PlanesGraph p;
  p.in = g.input("planes", DType::F32, {width, height, channels, 1});
  const Tensor grid = g.cast(g.permute(p.in, {1, 2, 0, 3}), DType::F32, "grid");  // [c, w, h, 1]
  const Tensor y = body(g, grid);
  p.out = g.cast(g.permute(y, {2, 0, 1, 3}), DType::F32, "out_planes");  // [w', h', c', 1]
  g.mark_output(p.out);
  return p;
}

}  // namespace

Result<std::vector<float>> run_on_planes(DeviceNetwork& net, std::span<const float> planes, int64_t width,
                                         int64_t height, int64_t channels, const GridBody& body) {
  KILN_TRY(check_sides(net.name(), width, height));
  if (static_cast<int64_t>(planes.size()) != channels * width * height)
    return make_error(net.name(), ": the input holds ", planes.size(), " floats, not ", channels, " x ",
                      width, " x ", height);
  Graph g;
  const PlanesGraph p = build(g, width, height, channels, body);
  std::vector<float> host(planes.begin(), planes.end());
  const PassInput inputs[] = {{p.in, host.data()}};
  return net.run(g, inputs, p.out);
}

Result<size_t> planes_graph_bytes(int64_t width, int64_t height, int64_t channels, const GridBody& body) {
  KILN_TRY(check_sides("planes graph", width, height));
  Graph g;
  build(g, width, height, channels, body);
  KILN_TRY(g.status());
  KILN_ASSIGN_OR_RETURN(const MemoryPlan mp, plan_memory(g));
  return mp.arena_bytes;
}

}  // namespace kiln::diffusion
