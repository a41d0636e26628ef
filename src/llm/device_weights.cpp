#include "llm/device_weights.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>

#include "core/index_threads.h"

namespace kiln {
namespace {

// Offsets of copied tensors are multiples of this and of the device's alignment (kernels load
// prepared weights with aligned vector loads).
constexpr size_t kWeightAlign = 64;

// Whether a placement reads tensor `info` in place from the mapped file.
bool read_in_place(const std::vector<DeviceWeights::Placement>& placements, const GgufTensorInfo* info) {
  return std::any_of(placements.begin(), placements.end(), [&](const DeviceWeights::Placement& q) {
    return q.info == info && q.offset == DeviceWeights::kMapped;
  });
}

}  // namespace

DeviceWeights::~DeviceWeights() { lock_pages(false); }  // the mapping outlives these weights

Result<std::shared_ptr<DeviceWeights>> DeviceWeights::create(std::shared_ptr<const Model> model,
                                                             Device& device, WeightOptions options) {
  std::shared_ptr<DeviceWeights> dw(new DeviceWeights());
  dw->model_ = std::move(model);
  dw->file_ = &dw->model_->file();
  dw->name_ = dw->model_->name() + (options.name_suffix.empty() ? "" : " " + options.name_suffix);
  dw->options_ = std::move(options);
  dw->weights_ = dw->model_->weights();
  if (dw->options_.holds) {
    for_each_weight_slot(dw->weights_, [&](Weight& w, WeightUse, int64_t layer) {
      if (w && !dw->options_.holds(layer, *w.info)) w = Weight{};
    });
    dw->options_.holds = nullptr;  // used here only: what it refers to need not outlive create()
  }
  return place(std::move(dw), device);
}

Result<std::shared_ptr<DeviceWeights>> DeviceWeights::create(std::shared_ptr<const GgufFile> mmproj,
                                                             std::string name, Device& device,
                                                             const std::vector<std::string>& matmul,
                                                             WeightOptions options) {
  std::shared_ptr<DeviceWeights> dw(new DeviceWeights());
  dw->mmproj_ = std::move(mmproj);
  dw->file_ = dw->mmproj_.get();
  dw->name_ = std::move(name);
  dw->options_ = std::move(options);
  for (const GgufTensorInfo& t : dw->file_->tensors()) {
    const bool held = !dw->options_.holds || dw->options_.holds(-1, t);
    dw->tensors_.push_back(held ? Weight{&t, dw->file_->tensor_view(t)} : Weight{});
    dw->tensor_is_matmul_.push_back(std::find(matmul.begin(), matmul.end(), t.name) != matmul.end());
  }
  dw->options_.holds = nullptr;  // used here only, as for a text model
  return place(std::move(dw), device);
}

const Weight* DeviceWeights::tensor(std::string_view name) const {
  const GgufTensorInfo* info = tensors_.empty() ? nullptr : file_->find_tensor(name);
  if (info == nullptr) return nullptr;
  const Weight& w = tensors_[static_cast<size_t>(info - file_->tensors().data())];
  return w ? &w : nullptr;
}

DeviceWeights::Layout DeviceWeights::lay_out(std::span<const std::pair<const Weight*, WeightUse>> visits,
                                             std::span<const WeightPlacement> chosen, const Device& device,
                                             const WeightOptions& options) {
  Layout l;
  const size_t align = std::max(kWeightAlign, device.alignment());
  const bool host = device.is_host();
  // Whether the device's kernels multiply tensor `info` (some visit's use is MatMul).
  auto multiplied = [&](const GgufTensorInfo* info) {
    return device.reads_host_weight_layouts() &&
           std::any_of(visits.begin(), visits.end(), [&](const auto& visit) {
             return visit.first->info == info && visit.second == WeightUse::MatMul;
           });
  };
  size_t end = 0;
  for (size_t v = 0; v < visits.size(); ++v) {
    const GgufTensorInfo* info = visits[v].first->info;
    const WeightPlacement& p = chosen[v];
    auto same = std::find_if(l.placements.begin(), l.placements.end(), [&](const Placement& q) {
      return q.info == info && q.prepared.layout == p.layout;
    });
    if (same == l.placements.end()) {
      Placement q{info, p, kMapped};
      if (host && p.layout == TensorLayout::Plain && !options.copy_all && !multiplied(info)) {
        l.mapped_bytes += p.bytes;
      } else {
        q.offset = (end + align - 1) / align * align;
        end = q.offset + p.bytes;
      }
      l.placements.push_back(q);
      same = l.placements.end() - 1;
    }
    l.placement_of.push_back(static_cast<size_t>(same - l.placements.begin()));
  }
  l.buffer_bytes = end;
  return l;
}

std::vector<WeightPlacement> DeviceWeights::choose(std::span<const std::pair<const Weight*, WeightUse>> visits,
                                                   const Device& device, int threads, LayoutCache* cache) {
  std::vector<const GgufTensorInfo*> read_plain;  // tensors some use reads in their plain layout
  for (const auto& [w, use] : visits) {
    if (use != WeightUse::MatMul) read_plain.push_back(w->info);
  }
  // Every visit's placement, chosen on the prepare threads (choosing a Q8_0 matrix's layout reads it
  // whole: q8_0_has_level_min), or taken from the cache.
  std::vector<WeightPlacement> chosen(visits.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < visits.size(); ++i) {
    const auto [w, use] = visits[i];
    const bool plain = std::find(read_plain.begin(), read_plain.end(), w->info) != read_plain.end();
    const bool kernel_layout = use == WeightUse::MatMul && !plain && device.reads_host_weight_layouts();
    if (!kernel_layout) {
      chosen[i] = {TensorLayout::Plain, w->view.span_bytes()};
    } else if (cache != nullptr && cache->count(w->info) != 0) {
      chosen[i] = cache->at(w->info);
    } else {
      todo.push_back(i);
    }
  }
  for_each_index_on_threads(static_cast<int64_t>(todo.size()), threads, [&](int64_t k) {
    const size_t i = todo[static_cast<size_t>(k)];
    chosen[i] = choose_weight_layout(visits[i].first->view);
  });
  if (cache != nullptr) {
    for (size_t i : todo) (*cache)[visits[i].first->info] = chosen[i];
  }
  return chosen;
}

DeviceWeights::Footprint DeviceWeights::footprint(const DecoderWeights& weights, const Device& device,
                                                  const WeightOptions& options, LayoutCache* cache) {
  std::vector<std::pair<const Weight*, WeightUse>> visits;
  for_each_weight(weights, [&](const Weight& w, WeightUse use) { visits.emplace_back(&w, use); });
  const std::vector<WeightPlacement> chosen = choose(visits, device, options.prepare_threads, cache);
  const Layout l = lay_out(visits, chosen, device, options);
  return {l.buffer_bytes, l.mapped_bytes};
}

Result<std::shared_ptr<DeviceWeights>> DeviceWeights::place(std::shared_ptr<DeviceWeights> dw,
                                                            Device& device) {
  dw->device_ = &device;
  dw->owner_ = new_owner_id();
  const bool host = device.is_host();
  std::vector<std::pair<const Weight*, WeightUse>> visits;
  dw->visit_weights([&](const Weight& w, WeightUse use) { visits.emplace_back(&w, use); });
  const std::vector<WeightPlacement> chosen = choose(visits, device, dw->options_.prepare_threads, nullptr);
  Layout l = lay_out(visits, chosen, device, dw->options_);
  dw->placements_ = std::move(l.placements);
  dw->placement_of_ = std::move(l.placement_of);
  dw->buffer_bytes_ = l.buffer_bytes;
  dw->mapped_bytes_ = l.mapped_bytes;
  dw->residency_.attach(
      device, dw->owner_, dw->name_, MemoryKind::Weights,
      host && !dw->options_.copy_all ? "re-read from the mapped file" : "re-prepared from the mapped file",
      dw.get());
  // Pinned while they are made: another thread's allocation must not evict a buffer being filled.
  ResidencyManager::Pin pin;
  if (ResidencyManager* m = device.residency()) {
    KILN_ASSIGN_OR_RETURN(pin, m->pin(dw->owner_));
  }
  if (const Status st = dw->residency_.set_external_bytes(dw->mapped_bytes_); !st.ok())
    return make_error("the weights of '", dw->name_, "' do not fit: ", st.error().message);
  if (dw->buffer_bytes_ == 0) {
    dw->resident_ = true;  // every tensor is read from the mapping
  } else {
    KILN_TRY(dw->rebuild());
  }
  dw->lock_pages(true);
  return dw;
}

void DeviceWeights::release() {
  if (!resident_ || buffer_bytes_ == 0) return;
  buffer_.reset();
  resident_ = false;
  bind_views();
}

Status DeviceWeights::rebuild() {
  if (resident_) return ok_status();
  const BufferDesc desc{buffer_bytes_, MemoryKind::Weights, name_};
  auto buf = residency_.allocate(desc);
  if (!buf.ok()) return make_error("the weights of '", name_, "' do not fit: ", buf.error().message);
  std::unique_ptr<Buffer> buffer = std::move(*buf);
  std::vector<const Placement*> copied;
  for (const Placement& p : placements_) {
    if (p.offset != kMapped) copied.push_back(&p);
  }
  // Writes one tensor's prepared bytes at dst, then drops its mapped pages at once, so that the
  // peak holds the sources being read beside the copy, not the whole file (the pages a tensor
  // shares with its neighbours go with drop_file_pages below).
  auto prepare_one = [&](const Placement& p, void* dst) -> Status {
    if (const Status st = prepare_weight(file_->tensor_view(*p.info), p.prepared, dst); !st.ok())
      return make_error("the weights of '", name_, "': tensor '", p.info->name, "': ", st.error().message);
    if (!read_in_place(placements_, p.info)) file_->drop_tensor_pages({&p.info, 1});
    return ok_status();
  };
  if (buffer->host_visible()) {
    // Largest first: the threads' shares even out when the small tensors come last.
    std::stable_sort(copied.begin(), copied.end(), [](const Placement* a, const Placement* b) {
      return a->prepared.bytes > b->prepared.bytes;
    });
    std::vector<Status> done(copied.size());
    char* base = static_cast<char*>(buffer->base());
    for_each_index_on_threads(static_cast<int64_t>(copied.size()), options_.prepare_threads, [&](int64_t i) {
      const Placement& p = *copied[static_cast<size_t>(i)];
      done[static_cast<size_t>(i)] = prepare_one(p, base + p.offset);
    });
    for (const Status& st : done) KILN_TRY(st);
  } else {
    std::vector<uint8_t> staging;  // one prepared tensor at a time
    for (const Placement* p : copied) {
      staging.resize(p->prepared.bytes);
      KILN_TRY(prepare_one(*p, staging.data()));
      KILN_ASSIGN_OR_RETURN(
          TensorView bytes,
          buffer->view(DType::I8, {static_cast<int64_t>(p->prepared.bytes), 1, 1, 1}, p->offset));
      KILN_TRY(device_->upload(bytes, staging.data(), staging.size()));
    }
  }
  buffer_ = std::move(buffer);
  resident_ = true;
  bind_views();
  drop_file_pages(/*also_read_in_place=*/false);
  return ok_status();
}

Status DeviceWeights::evict() {
  lock_pages(false);
  release();
  drop_file_pages(/*also_read_in_place=*/true);
  return ok_status();
}

Status DeviceWeights::restore() {
  KILN_TRY(rebuild());
  lock_pages(true);
  return ok_status();
}

void DeviceWeights::lock_pages(bool lock) {
  if (!options_.lock || !device_->is_host() || locked_ == lock) return;
  std::vector<std::span<const uint8_t>> ranges;
  if (buffer_) ranges.emplace_back(static_cast<const uint8_t*>(buffer_->base()), buffer_->size());
  for (const Placement& p : placements_) {
    if (p.offset == kMapped) ranges.push_back(file_->tensor_data(*p.info));
  }
  size_t done = 0;
  for (std::span<const uint8_t> r : ranges) {
    if (r.empty()) continue;
    if (!lock) {
      ::munlock(r.data(), r.size());
    } else if (::mlock(r.data(), r.size()) == 0) {
      done += r.size();
    } else if (!lock_failed_) {  // once, as llama.cpp: the weights stay usable, not locked
      const int err = errno;
      lock_failed_ = true;
      rlimit limit{};
      std::string limit_text = "unknown";
      if (::getrlimit(RLIMIT_MEMLOCK, &limit) == 0)
        limit_text =
            limit.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(limit.rlim_cur) + " bytes";
      if (options_.on_lock_failure)
        options_.on_lock_failure(
            "--mlock: cannot lock " + std::to_string(r.size()) + " bytes of the weights of '" + name_ +
            "' in RAM" + (done > 0 ? " (after locking " + std::to_string(done) + " bytes)" : std::string()) +
            ": " + std::strerror(err) + "; RLIMIT_MEMLOCK is " + limit_text +
            ": raise it with 'ulimit -l' (as root); going on without locking them");
    }
  }
  locked_ = lock;
}

void DeviceWeights::drop_file_pages(bool also_read_in_place) const {
  std::vector<const GgufTensorInfo*> drop;
  for (const Placement& p : placements_) {
    if (std::find(drop.begin(), drop.end(), p.info) != drop.end()) continue;
    if (also_read_in_place || !read_in_place(placements_, p.info)) drop.push_back(p.info);
  }
  file_->drop_tensor_pages(drop);
}

void DeviceWeights::bind_views() {
  ++generation_;
  size_t visit = 0;
  visit_weights([&](Weight& w, WeightUse) {
    const Placement& p = placements_[placement_of_[visit++]];
    const TensorView source = file_->tensor_view(*p.info);
    if (p.offset == kMapped) {
      w.view = source;
    } else {
      void* data = buffer_ ? static_cast<char*>(buffer_->base()) + p.offset : nullptr;
      w.view = prepared_view(source, p.prepared, data);
    }
  });
}

}  // namespace kiln
