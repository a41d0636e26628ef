// Context: decodes batches of a Model on a Backend, with a KV cache shared by many sequences.
//
// decode() validates the whole batch first (token ids or embeddings, positions, sequence ids,
// size), then runs it as micro-batches of at most n_ubatch tokens: each takes KV cells
// (KvCache::place), takes the decoder graph of its shape (models/decoder_graph.h: tokens, outputs, and the
// cells attention reads, KvCache::n_kv_padded()) planned in the compute arena (reserved for the
// worst case at creation: decoding allocates no device memory), uploads its inputs (the cells it
// writes among them) and runs. Graphs and plans are kept for the shapes that repeat
// (llm/decoder_plans.h): a stream decoding token after token builds and plans once per
// KvCache::kPadCells cells. The outputs of tokens marked for output are kept until the next decode():
// logits, or, in a context created with embeddings on, hidden states (see ContextOptions).
//
// The compute arena is the context's own, or one it shares with other owners that take turns on
// the device (ContextOptions::arena; e.g. a vision encoder): the arena then fits the larger of
// their worst cases, and every pass holds the arena's turn.
//
// Memory: the weights are a DeviceWeights on the backend's device (shared with the other
// contexts of the model there); the KV cache, the micro-batch inputs and the compute arena are
// buffers on that device too, and the backend's kernel scratch. Data crosses between host and
// device only through explicit copies (inputs uploaded, outputs downloaded, KV rows read and
// written for compaction and state files), so a device that is not host-visible (sim) runs any
// model.
//
// Residency: on a device with a residency manager the context's memory belongs to the weights'
// owner: the KV cache is one resident, the compute arena and input buffer another ("re-planned":
// plans hold arena offsets, not addresses, and inputs are bound at every step, so nothing keeps
// their old addresses; cached plans hold the weights' and the cache's addresses and are dropped
// when either moves, DeviceWeights::generation() and KvCache::generation()). Every method that
// computes or reads K/V pins the owner for its length, restoring whatever was evicted first (an
// Error with the manager's numbers when there is no room), and rebuilds the KV views it captured
// when the cache came back elsewhere (KvCache::generation()). A shared compute arena
// (ContextOptions::arena; the device's, DeviceRegistry::arena) is not the context's: when it is a
// resident of another owner, the context pins that owner too while it computes (and while it
// plans its worst case at creation), and the arena stays allocated while the context is evicted.
//
// Several devices (a model split over them, llm/layer_split.h): the context has a share on each,
// a stage: the weights placed there (a DeviceWeights holding the layers there), that device's
// backend, arena and inputs buffer, and the K and V of the layers there (KvCache, one cache over
// every device). Each step's graph is built whole and cut by runtime/graph_split.h into parts that
// run on their devices in turn, the hidden state crossing between them through the devices'
// copies; every part computes with its device's kernels, so a split over devices that share the
// CPU's kernels (sim) gives the bits of the one-device run. Pins, admission and eviction are per
// device: each stage is a resident of its weights' owner there.
//
// Segmented execution (weights streamed through a device smaller than them): a device's weights
// may come with segments (DeviceWeights::segments: runs of consecutive layers, each an owner of its
// own). The stage keeps the rest (its own weights, the K and V of its layers, its arena and inputs)
// pinned for a pass as before; each segment is a lane of the split plan of its own (parts cut at its
// layers' boundaries, planned in the stage's arena one after the other) and is made resident only
// for the part that computes with it: before the part runs, its weights are pinned (restored if
// they were evicted) and, while it computes, the next segment's are restored on another thread
// (prefetch). Room is made by evicting the context's own segments that are done, the one used
// last first (the one a cycle of passes needs latest), never the segment computing or the next.
// Step graphs address each segment's weights at a stand-in range of addresses that no memory backs
// (captured once at creation, as the segment's layout is fixed); before a part runs, its plan is
// relocated to where the segment lies now (SplitPlan::relocate), so graphs and plans are built once
// per shape and cached as for resident weights. Segments compute with the device's kernels: the
// bits are those of the same weights held whole.
//
// Ownership: shares the DeviceWeights (and through them the Model); the Backends (and shared
// arenas) must outlive the Context.
// Thread-safety: every public method takes the context's mutex (one pass at a time), and the
// shared arena's turn while it computes.
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "llm/batch.h"
#include "llm/decoder_plans.h"
#include "llm/device_weights.h"
#include "llm/kv_cache.h"
#include "llm/model.h"
#include "models/decoder_graph.h"
#include "runtime/address_reservation.h"
#include "runtime/backend.h"
#include "runtime/graph_split.h"
#include "runtime/planner.h"

namespace kiln {

enum class FlashAttention : uint8_t { Off, On, Auto };  // Auto: on, as llama.cpp on CPU

struct ContextOptions {
  // n_ctx: the model's training context, all of it (llama.cpp's -c 0).
  static constexpr int64_t kTrainingContext = -1;
  int64_t n_ctx = 0;        // KV cells; 0: the model's training context, at most 4096; or kTrainingContext
  int64_t n_batch = 2048;   // most tokens one decode() accepts
  int64_t n_ubatch = 512;   // most tokens one micro-batch computes
  DType type_k = DType::F16;
  DType type_v = DType::F16;
  FlashAttention flash_attention = FlashAttention::Auto;
  // Output the final hidden state [n_embd] of each marked token (after the output norm: the LM
  // head's input, llama.cpp's result_norm) instead of logits; the LM head is not computed.
  bool embeddings = false;
  // Accept batches of embeddings (Batch::embd: images' tokens): reserves room for a micro-batch
  // of n_ubatch x n_embd floats of input.
  bool input_embeddings = false;
  // A compute arena on the backend's device shared with other owners (non-owning; must outlive the
  // context); null: the context makes its own.
  ComputeArena* arena = nullptr;
  // Keep the plans of steps whose shape repeats (llm/decoder_plans.h); false builds and plans
  // every micro-batch (as llama.cpp's LLAMA_GRAPH_REUSE_DISABLE): the same outputs, for checking.
  bool reuse_plans = true;
  // Every layer's K and V in host memory (llama.cpp's -nkvo/--no-kv-offload): on the device of
  // the context that is the host's (an Error when none is), whichever device computes the layer.
  bool kv_on_host = false;
  // Segmented execution: restore the next segment's weights while the current one computes.
  // false: each is restored when its part is about to run (the same bits; for measuring).
  bool prefetch_segments = true;
};

struct DecodeOptions {
  // Every token computed in the float order of a batch of that one token (DecoderGraphSpec's
  // single_row_order): its logits and K/V are then the bits of the token decoded alone, whatever
  // the batch holds. Speculative verification decodes with it; kernels whose order does not
  // depend on the batch size (every weight type but Q4_K today) run at full speed either way.
  bool single_row_order = false;
};

// A sequence's cached cells in host memory (Context::copy_sequence_cells): their positions in cell
// order and their K/V rows in KvCache::read_cells' layout (cell_bytes per cell).
struct SequenceCells {
  std::vector<int32_t> positions;
  std::vector<uint8_t> bytes;
  size_t cell_bytes = 0;
  int64_t size() const { return static_cast<int64_t>(positions.size()); }
};

// One device's share of a context (Context::create over several devices).
struct ContextDevice {
  std::shared_ptr<const DeviceWeights> weights;  // the weights placed there (resident)
  Backend* backend = nullptr;                    // computing on weights->device()
  ComputeArena* arena = nullptr;                 // shared arena there (ContextOptions::arena); null: own
};

// The context size of a context created with `options` for a model with `hparams` (n_ctx
// resolved). Its KV cache has that many cells rounded up to whole blocks (KvCache::cells_for).
int64_t context_size(const ContextOptions& options, const HParams& hparams);

// `options` as a context created with them holds them: n_ctx resolved (context_size()), n_ubatch
// at most n_batch and n_ctx.
ContextOptions resolve_context_options(const ContextOptions& options, const HParams& hparams);

// Bytes of the inputs buffer a context created with `options` (n_ctx resolved) allocates on each
// of its devices, before the crossings of a split graph: a micro-batch's ids, positions, cells,
// output rows, mask (n_ctx x n_ubatch) and, with input_embeddings, embeddings.
size_t context_input_bytes(const ContextOptions& options, const HParams& hparams);

// The worst-case step a context created with `options` (n_ctx resolved, n_ubatch clamped) plans
// at creation: n_ubatch tokens and outputs over every cell.
DecoderGraphSpec worst_case_step(const ContextOptions& options, AttentionPath attention);

class Context final {
 public:
  // A context over `weights`, which must be resident on backend.device(). Errors: weights on
  // another device or released, bad options, no room on the device (nothing stays allocated).
  static Result<std::unique_ptr<Context>> create(std::shared_ptr<const DeviceWeights> weights,
                                                 Backend& backend, const ContextOptions& options);
  // A context with weights of its own: places `model` on backend.device() first (free on the CPU
  // when no tensor is prepared; several contexts of one model on one device share one
  // DeviceWeights through the overload above instead).
  static Result<std::unique_ptr<Context>> create(std::shared_ptr<const Model> model, Backend& backend,
                                                 const ContextOptions& options);
  // A context over a model split over several devices: one entry per device, whose weights
  // together hold every weight of one model (each slot on exactly one device); each layer's K and V
  // go to the device holding its K projection. options.arena is ignored (each entry names its own).
  // One entry is the first overload.
  static Result<std::unique_ptr<Context>> create(std::vector<ContextDevice> devices, const ContextOptions& options);

  // Decodes `batch`. Errors (nothing computed, cache unchanged): an empty or oversized batch, a
  // token id outside the vocabulary, embeddings of the wrong width or in a context without
  // input_embeddings, a negative position, a sequence id outside [0, kMaxSequences), a non-causal
  // batch larger than n_ubatch, weights released (DeviceWeights::release); no room in the cache
  // for a micro-batch ("the context is full": earlier micro-batches of the same call stay in the
  // cache).
  Status decode(const Batch& batch, const DecodeOptions& options = {});
  // Logits [n_vocab] of batch token i of the last decode(); empty when it was not marked (or
  // the context outputs embeddings).
  std::span<const float> logits(size_t i) const;
  // Hidden state [n_embd] of batch token i of the last decode(), after the output norm; empty
  // when it was not marked (or the context outputs logits).
  std::span<const float> embeddings(size_t i) const;
  bool outputs_embeddings() const { return opt_.embeddings; }
  // Decoder graphs built and planned by decode() so far; the other micro-batches reused one.
  uint64_t graphs_built() const;

  const Model& model() const { return stages_[0]->weights->model(); }
  // The weights on the context's first device (all of them unless the model is split).
  const DeviceWeights& weights() const { return *stages_[0]->weights; }
  // Every device's weights, in create()'s order (one entry unless the model is split), each
  // followed by its segments (segmented execution).
  std::vector<std::shared_ptr<const DeviceWeights>> device_weights() const;
  // The context size asked for (context_size()): what one sequence may hold. The KV cache has it
  // rounded up to whole blocks (kv().size()), room that other sequences' blocks may take.
  int64_t n_ctx() const { return opt_.n_ctx; }
  int64_t n_batch() const { return opt_.n_batch; }
  int64_t n_ubatch() const { return opt_.n_ubatch; }
  int64_t n_vocab() const { return model().hparams().n_vocab; }
  int64_t n_embd() const { return model().hparams().n_embd; }
  AttentionPath attention_path() const { return attention_; }

  // Sequence edits (see KvCache); seq_add re-ropes the cached keys before the next decode.
  void seq_rm(int32_t seq, int32_t p0, int32_t p1);
  void seq_cp(int32_t src, int32_t dst, int32_t p0, int32_t p1);
  void seq_keep(int32_t seq);
  Status seq_add(int32_t seq, int32_t p0, int32_t p1, int32_t delta);
  int32_t seq_pos_max(int32_t seq) const;
  void clear();
  // Frees the host memory of the last decode's outputs and of the input staging (they keep the
  // largest batch's size: with a large vocabulary, tens of MB), and the cached step plans; the
  // next decode() allocates and builds them again. The last decode's outputs are gone: call it
  // when nobody will read them (idle sleep).
  void release_host_buffers();
  const KvCache& kv() const { return *kv_; }
  // The compute arena the context plans in on its first device (its own or the shared one).
  const ComputeArena& arena() const { return *stages_[0]->arena; }

  // Copies sequence `seq`'s cells (positions and K/V bytes) to host memory; the cache is
  // unchanged. put_sequence_cells() writes such a copy back into sequence `seq` (cleared first),
  // in free cells that may lie anywhere: the sequence's attention then gives the bits it gave
  // before the copy. An Error when the cache has too few free cells (nothing changed then but the
  // sequence's clearing) or when `cells` comes from a context of another shape or cache type.
  Result<SequenceCells> copy_sequence_cells(int32_t seq);
  Status put_sequence_cells(int32_t seq, const SequenceCells& cells);
  // Saves sequence `seq` (its tokens, given by the caller, and its cached K/V) to a file, and
  // restores it into sequence `seq` (which is cleared first); bit-exact. The file records the
  // model's shape and cache types and is refused by a context that differs.
  Status save_sequence(int32_t seq, std::span<const int32_t> tokens, const std::string& path);
  Result<std::vector<int32_t>> load_sequence(int32_t seq, const std::string& path);

 private:
  Context() = default;
  // One device's share (see the header): an Evictable for its compute memory (the arena when it is
  // the stage's own, and the inputs buffer), a resident of the weights' owner there.
  struct Stage final : Evictable {
    // A segment of weights streamed through the stage's device (see the header).
    struct Segment {
      std::shared_ptr<const DeviceWeights> weights;
      ResidencyManager* manager = nullptr;  // the device's (segments need one)
      size_t lane = 0;                      // its index in the split plans
      uint8_t* built = nullptr;             // where the step graphs address its buffer (stand-in)
      size_t bytes = 0;                     // its buffer's bytes
      DecoderWeights views;                 // its weights' views at `built`
      ResidencyManager::Pin pin;            // held while a part computes with it, or prefetched
      uint64_t last_use = 0;                // segment_clock_ when a part last computed with it
    };
    std::shared_ptr<const DeviceWeights> weights;
    std::vector<Segment> segments;
    size_t lane = 0;  // the lane of `weights` in the split plans
    Backend* backend = nullptr;
    Resident compute;  // before the arena and inputs: outlives their buffers
    std::unique_ptr<ComputeArena> own_arena;  // null when sharing one
    ComputeArena* arena = nullptr;
    std::unique_ptr<Buffer> inputs;  // a micro-batch's inputs, then the crossings of a split graph
    size_t inputs_bytes = 0;
    std::string owner_name;
    Device& device() const { return backend->device(); }
    // (Re)allocates the inputs buffer with `bytes` (through the compute resident).
    Status allocate_inputs(size_t bytes);
    Status evict() override;
    Status restore() override;
  };
  // The pins one pass holds: per stage the weights' owner, and a shared arena's when another owner's.
  using MemoryHold = std::vector<ResidencyManager::Pin>;
  // Pins every stage's memory for one pass (restoring what was evicted), refreshes kv_layers_ when
  // the cache moved and graph_weights_ when weights did; empty pins without residency managers.
  Result<MemoryHold> hold_memory();
  Status decode_ubatch(const Batch& batch, const DecodeOptions& options, size_t begin, size_t end,
                       size_t& out_index);
  Status apply_kv_shift();
  // Every stage's arena turn, taken in address order (so that contexts over several shared arenas
  // never wait on each other in a cycle).
  std::vector<std::unique_lock<std::mutex>> take_turns() const;
  // Splits and plans `g` over the lanes (each stage's, each segment's) in their stages' arenas.
  Result<SplitPlan> plan_graph(const Graph& g);
  // Sets up the segments of every stage: lanes, stand-in addresses and views (each restored once
  // to read its layout), kv_lane_. Called once by create() with the stages' memory held.
  Status set_up_segments();
  // Runs `plan` (prepared, inputs bound): each segment's part with its weights pinned and the
  // next one prefetched; every segment unpinned at the end.
  Status run_plan(SplitPlan& plan, std::span<const SplitDevice> devices);
  // Pins `seg` (taking a prefetch's pin, or restoring it now) and starts restoring `next` (null:
  // none) on the prefetch thread.
  Status acquire_segment(Stage::Segment& seg, Stage::Segment* next);
  // Evicts this context's unpinned segments on `target`'s device, the one used last first, but not
  // `target` or `keep`, until `target` fits (or none is left).
  Status make_segment_room(const Stage::Segment& target, const Stage::Segment* keep);
  // Waits for the prefetch thread; its pin goes to the segment it restored (dropped with `keep`
  // false).
  void finish_prefetch(bool keep);
  // The stages as a split plan executes them (their backends and inputs buffers, crossings after
  // the micro-batch inputs).
  std::vector<SplitDevice> split_devices() const;
  // Uploads `bytes` of input `t` of plan `sp` (type, [ne0, ne1]) to each stage whose part reads
  // it, at `offset` in its inputs buffer, and binds it there.
  Status bind_input(SplitPlan& sp, Tensor t, DType type, int64_t ne0, int64_t ne1, size_t offset,
                    const void* bytes);
  // The plan of a micro-batch step of `spec`'s shape: a cached one (plans_) or one built, planned
  // and kept now.
  Result<DecoderPlan*> step_plan(const DecoderGraphSpec& spec);
  // Sets graph_weights_ (every slot) from the stage whose weights hold it (the first that does).
  Status merge_graph_weights();
  // Sum of the stages' weights generations (rises whenever any moves).
  uint64_t weights_generation() const;
  // copy_sequence_cells / put_sequence_cells under mutex_ with the memory held.
  Result<SequenceCells> read_sequence_cells(int32_t seq) const;
  Status write_sequence_cells(int32_t seq, const SequenceCells& cells);
  // Floats per output row: n_embd with embeddings on, else n_vocab.
  size_t output_width() const;
  std::span<const float> output_row(size_t i) const;  // under mutex_

  std::vector<std::unique_ptr<Stage>> stages_;  // by pointer: residents do not move
  // Lanes of the split plans: per index, its stage and segment (-1: the stage's own weights).
  struct Lane {
    size_t stage = 0;
    int segment = -1;
    std::string name;  // "sim0", "sim0 layers 4-7"
  };
  std::vector<Lane> lanes_;
  std::vector<size_t> kv_lane_;  // per layer: the lane of its K and V
  AddressReservation stand_in_;  // the stand-in addresses of the segments (no memory)
  std::thread prefetch_;         // restoring prefetching_'s weights (joinable while it runs)
  Stage::Segment* prefetching_ = nullptr;
  Result<ResidencyManager::Pin> prefetched_ = ResidencyManager::Pin{};
  uint64_t segment_clock_ = 0;
  DecoderWeights graph_weights_;  // every stage's weights views merged, at graph_weights_gen_
  uint64_t graph_weights_gen_ = 0;
  ContextOptions opt_;
  AttentionPath attention_ = AttentionPath::Flash;
  std::unique_ptr<KvCache> kv_;
  std::vector<KvLayerMemory> kv_layers_;  // views of kv_ at kv_generation_
  DecoderPlans plans_;                    // decode steps' plans, reused while their shape repeats
  uint64_t graphs_built_ = 0;
  uint64_t kv_generation_ = 0;
  std::vector<float> outputs_;      // [n_outputs][output_width()] of the last decode()
  std::vector<int64_t> output_row_; // per batch token: its row in outputs_, or -1
  // Host staging for a micro-batch's inputs.
  std::vector<int32_t> stage_ids_, stage_pos_, stage_rows_, stage_cells_;
  std::vector<float> stage_mask_;
  mutable std::mutex mutex_;
};

}  // namespace kiln
