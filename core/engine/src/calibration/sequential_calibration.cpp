#include "hidden_states.hpp"
#include "sample_batches.hpp"

#include <moequant/compute_dtype.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/engine/calibration_dataset.hpp>
#include <moequant/engine/profiler.hpp>
#include <moequant/engine/sequential_calibration.hpp>
#include <moequant/error.hpp>
#include <moequant/freed_heap.hpp>
#include <moequant/safetensors_writer.hpp>


#include <algorithm>
#include <cstring>
#include <numeric>

namespace moequant {

namespace fs = std::filesystem;

namespace {

// Every rank's MoE inputs of a layer (`own`: this rank's blocks, F32 [tokens, hidden]) passed
// to `keep` in rank order. With BF16 products they are BF16 values, so half the bytes travel:
// the widened values are the same floats.
template <class Keep>
void share_layer_inputs(Cluster& cluster, const std::vector<float>& own, const Keep& keep) {
    const bool halve = compute_dtype() == ComputeDtype::bf16;
    std::vector<std::uint16_t> narrow;
    std::string_view mine(reinterpret_cast<const char*>(own.data()), own.size() * sizeof(float));
    if (halve) {
        narrow.resize(own.size());
        convert_f32_to_bf16(own.data(), narrow.data(), narrow.size());
        mine = {reinterpret_cast<const char*>(narrow.data()), narrow.size() * sizeof(std::uint16_t)};
    }
    std::vector<float> wide;
    cluster.share(mine, [&](int, std::string_view bytes) {
        if (!halve) {
            wide.resize(bytes.size() / sizeof(float));
            std::memcpy(wide.data(), bytes.data(), wide.size() * sizeof(float));
        } else {
            wide.resize(bytes.size() / sizeof(std::uint16_t));
            convert_bf16_to_f32(bytes.data(), wide.data(), wide.size());
        }
        keep(std::span<const float>(wide));
    });
}

}  // namespace

struct SequentialCalibration::State {
    const DecoderForward& forward;
    const ModelPlan& plan;
    std::vector<std::int64_t> lengths, starts;
    std::vector<std::pair<std::size_t, std::size_t>> batches;  // [first sample, last sample)
    // The ranks, and this rank's blocks [first_batch, last_batch): its samples' hidden states
    // are the only ones it keeps, from token `first_token` on.
    Cluster* cluster = nullptr;
    std::size_t first_batch = 0, last_batch = 0;
    std::int64_t first_token = 0, local_tokens = 0;
    std::int64_t batch_limit = 0;
    std::unique_ptr<detail::HiddenStates> x;  // entering layer `next` (after its attention half: the residual)
    std::int64_t tokens = 0;
    std::int64_t next = 0;                    // the next layer not finished
    std::unique_ptr<DecoderLayerForward> layer;  // layer `next` once its attention half ran
    fs::path scratch;
    std::optional<CalibrationActivations> current;  // layer `next`'s MLP inputs, when attended
    fs::path current_file;
    std::optional<SafetensorsWriter> saved;
    bool routed_only = false;
    bool estimate_only = false;  // x holds the leading batches only
    std::int64_t held_tokens = 0;  // the rows x holds
    bool states_mapped = false;  // where the run keeps x: a mapped scratch file
    std::string digest;

    void check_runnable() const {
        if (estimate_only) throw Error(ErrorKind::internal, "a calibration planned for an estimate cannot run layers");
    }

    State(const DecoderForward& f, const ModelPlan& p) : forward(f), plan(p) {}

    bool is_moe(std::int64_t layer) const { return plan.moe_layer(layer) != nullptr; }
    std::int64_t batch_tokens(std::size_t b) const {
        const auto [first, last] = batches[b];
        return starts[last - 1] + lengths[last - 1] - starts[first];
    }
    std::span<const std::int64_t> batch_lengths(std::size_t b) const {
        return std::span(lengths).subspan(batches[b].first, batches[b].second - batches[b].first);
    }
    std::span<float> batch_rows(std::size_t b) { return x->rows(starts[batches[b].first] - first_token, batch_tokens(b)); }

    // Runs layer `next` whole (no calibration wanted): attention and MLP batch by batch.
    void run_whole_layer() {
        const ProfileSpan span("forward", "layer " + std::to_string(next));
        const auto l = forward.layer(next);
        for (std::size_t b = first_batch; b < last_batch; ++b) {
            const std::span<float> rows = batch_rows(b);
            std::vector<float> xb(rows.begin(), rows.end());
            const std::vector<float> mlp_input = l->attention(xb, batch_lengths(b));
            l->mlp(mlp_input, xb, {}, nullptr);
            std::copy(xb.begin(), xb.end(), rows.begin());
            return_freed_heap();  // a block's buffers back to the kernel, not kept in the threads' arenas
        }
        ++next;
    }
    void drop_current() {
        current.reset();
        if (!current_file.empty()) {
            std::error_code ec;
            fs::remove(current_file, ec);
            current_file.clear();
        }
    }
};

SequentialCalibration::SequentialCalibration(const DecoderForward& forward, const ModelPlan& plan,
                                             std::vector<std::vector<std::int32_t>> samples, fs::path scratch,
                                             std::optional<fs::path> save_activations, bool routed_only,
                                             std::uint64_t max_memory, Cluster* cluster, bool estimate_only)
    : state_(std::make_unique<State>(forward, plan)) {
    State& s = *state_;
    if (samples.empty()) throw Error(ErrorKind::input, "no calibration samples", {.code = "BadDataset"});
    for (const auto& sample : samples) {
        s.starts.push_back(s.tokens);
        s.lengths.push_back(static_cast<std::int64_t>(sample.size()));
        s.tokens += static_cast<std::int64_t>(sample.size());
    }
    s.digest = token_ids_digest(samples);
    s.scratch = std::move(scratch);
    s.routed_only = routed_only;
    fs::create_directories(s.scratch);
    const std::int64_t h = plan.hidden_size;
    // The samples run in fixed blocks of whole samples (at most calibration_block_tokens, fewer
    // under a budget): the same blocks for any number of ranks, which take contiguous runs of
    // them, so every forward call sees the same rows however the run is spread.
    s.batch_limit = detail::block_token_limit(max_memory / 2, h, s.tokens);
    s.cluster = cluster ? cluster : &Cluster::alone();
    detail::RankBlocks blocks = detail::rank_blocks(s.lengths, s.batch_limit, s.cluster->rank(), s.cluster->size());
    s.batches = std::move(blocks.blocks);
    s.first_batch = blocks.first, s.last_batch = blocks.last;
    s.first_token = blocks.first_token, s.local_tokens = blocks.tokens;
    const std::uint64_t state_bytes = static_cast<std::uint64_t>(s.local_tokens * h) * sizeof(float);
    // Under a budget: the hidden states go to a mapped scratch file once they would take more
    // than half of it, and the blocks are small enough for their working memory to fit the rest.
    s.states_mapped = max_memory > 0 && state_bytes > max_memory / 2;
    s.estimate_only = estimate_only;
    if (estimate_only) {  // the leading batches, at least a block's worth of tokens: what the probes embed
        std::size_t last = s.first_batch;
        s.held_tokens = 0;
        while (last < s.last_batch && s.held_tokens < detail::calibration_block_tokens) s.held_tokens += s.batch_tokens(last++);
        s.last_batch = last;
        s.x = std::make_unique<detail::HiddenStates>(s.held_tokens, h, fs::path());
    } else {
        s.held_tokens = s.local_tokens;
        s.x = std::make_unique<detail::HiddenStates>(s.local_tokens, h, s.states_mapped ? s.scratch / "hidden-states.f32" : fs::path());
    }
    for (std::size_t b = s.first_batch; b < s.last_batch; ++b) {
        std::vector<std::int32_t> ids;
        for (std::size_t i = s.batches[b].first; i < s.batches[b].second; ++i) ids.insert(ids.end(), samples[i].begin(), samples[i].end());
        const std::vector<float> embedded = forward.embed(ids);
        std::copy(embedded.begin(), embedded.end(), s.batch_rows(b).begin());
    }
    if (save_activations && s.cluster->root() && !estimate_only) {  // rank 0 receives every block's inputs
        std::vector<TensorSpec> specs{{"sample_lengths", DType::I64, {static_cast<std::int64_t>(s.lengths.size())}}};
        for (const auto& l : plan.moe_layers)
            specs.push_back({CalibrationActivations::tensor_name(l.layer), DType::BF16, {s.tokens, h}});
        s.saved.emplace(*save_activations, std::move(specs));
        s.saved->write("sample_lengths", std::as_bytes(std::span(s.lengths)));
    }
}

SequentialCalibration::~SequentialCalibration() {
    if (state_) state_->drop_current();
}

bool SequentialCalibration::routed_only() const noexcept { return state_->routed_only; }
const std::string& SequentialCalibration::digest() const noexcept { return state_->digest; }
std::int64_t SequentialCalibration::samples() const noexcept { return static_cast<std::int64_t>(state_->lengths.size()); }
std::int64_t SequentialCalibration::tokens() const noexcept { return state_->tokens; }
std::size_t SequentialCalibration::batches() const noexcept { return state_->batches.size(); }
bool SequentialCalibration::hidden_states_on_disk() const noexcept { return state_->states_mapped; }
std::int64_t SequentialCalibration::local_tokens() const noexcept { return state_->local_tokens; }
const DecoderForward& SequentialCalibration::forward() const noexcept { return state_->forward; }

std::int64_t SequentialCalibration::largest_batch_tokens() const noexcept {
    std::int64_t most = 0;
    for (std::size_t b = 0; b < state_->batches.size(); ++b) most = std::max(most, state_->batch_tokens(b));
    return most;
}

std::int64_t SequentialCalibration::batch_token_limit() const noexcept { return state_->batch_limit; }

std::vector<float> SequentialCalibration::embedded_rows(std::int64_t n) const {
    State& s = *state_;
    if (s.next != 0 || s.layer) throw Error(ErrorKind::internal, "the embedded rows are gone once a layer ran");
    const std::span<const float> rows = s.x->rows(0, std::min(n, s.held_tokens));
    return {rows.begin(), rows.end()};
}

const CalibrationActivations& SequentialCalibration::layer_inputs(std::int64_t layer) {
    State& s = *state_;
    s.check_runnable();
    if (layer < s.next || (s.layer && layer != s.next))
        throw Error(ErrorKind::internal, "sequential calibration asked for layer " + std::to_string(layer) + " out of order");
    if (s.layer) return *s.current;
    while (s.next < layer) {  // the layers before it: dense, or MoE layers without experts to quantize
        if (s.is_moe(s.next))
            throw Error(ErrorKind::internal, "MoE layer " + std::to_string(s.next) + " was not finished");
        s.run_whole_layer();
    }
    // Attention half batch by batch: the residual back into the hidden states, the MLP inputs
    // into a recorded-activation file the calibrated layer reads as usual.
    s.layer = s.forward.layer(layer);
    const std::int64_t h = s.plan.hidden_size;
    const std::string name = CalibrationActivations::tensor_name(layer);
    s.current_file = s.scratch / ("layer-" + std::to_string(layer) + ".safetensors");
    SafetensorsWriter writer(s.current_file, {{"sample_lengths", DType::I64, {static_cast<std::int64_t>(s.lengths.size())}},
                                              {name, DType::F32, {s.tokens, h}}});
    writer.write("sample_lengths", std::as_bytes(std::span(s.lengths)));
    auto keep = [&](std::span<const float> mlp_input) {
        writer.write_chunk(name, std::as_bytes(mlp_input));
        if (s.saved) {
            std::vector<std::uint16_t> bf16(mlp_input.size());
            convert_f32_to_bf16(mlp_input.data(), bf16.data(), bf16.size());
            s.saved->write_chunk(name, std::as_bytes(std::span(bf16)));
        }
    };
    // Across ranks every rank needs every token's inputs (its experts see them all): its own
    // blocks' go to the others, in rank order, which is block order.
    const bool shared = s.cluster->size() > 1;
    std::vector<float> own;
    for (std::size_t b = s.first_batch; b < s.last_batch; ++b) {
        const ProfileSpan span("forward (attention)");
        const std::span<float> rows = s.batch_rows(b);
        std::vector<float> xb(rows.begin(), rows.end());
        std::vector<float> mlp_input = s.layer->attention(xb, s.batch_lengths(b));
        // With BF16 products the MoE block's inputs are BF16 values, as in a BF16 model: its
        // products round them anyway, and the Hessians then take them exactly (hessian.hpp).
        if (compute_dtype() == ComputeDtype::bf16)
            for (float& v : mlp_input) v = bf16_to_f32(f32_to_bf16(v));
        std::copy(xb.begin(), xb.end(), rows.begin());
        return_freed_heap();  // a block's buffers back to the kernel, not kept in the threads' arenas
        if (shared) own.insert(own.end(), mlp_input.begin(), mlp_input.end());
        else keep(mlp_input);
    }
    if (shared) share_layer_inputs(*s.cluster, own, keep);
    writer.finish();
    s.current.emplace(CalibrationActivations::open(s.current_file));
    s.current->set_routed_only(s.routed_only);
    return *s.current;
}

void SequentialCalibration::finish_layer(std::int64_t layer, const ExpertMatrices& quantized) {
    State& s = *state_;
    s.check_runnable();
    if (!s.layer || layer != s.next) throw Error(ErrorKind::internal, "finish_layer for a layer that is not current");
    const TensorView inputs = s.current->layer_inputs(layer);
    const std::int64_t h = s.plan.hidden_size;
    for (std::size_t b = s.first_batch; b < s.last_batch; ++b) {
        const std::int64_t first = s.starts[s.batches[b].first], n = s.batch_tokens(b);
        const ProfileSpan span("forward (quantized MoE)");
        std::vector<float> mlp_input(static_cast<std::size_t>(n * h));
        std::memcpy(mlp_input.data(), inputs.data() + first * h * 4, mlp_input.size() * sizeof(float));
        const std::span<float> rows = s.batch_rows(b);
        std::vector<float> xb(rows.begin(), rows.end());
        s.layer->mlp(mlp_input, xb, quantized, nullptr);
        std::copy(xb.begin(), xb.end(), rows.begin());
        return_freed_heap();  // a block's buffers back to the kernel, not kept in the threads' arenas
    }
    s.current->release_layer(layer);
    s.drop_current();
    s.layer.reset();
    ++s.next;
}

void SequentialCalibration::finish() {
    state_->check_runnable();
    if (state_->saved) {
        state_->saved->finish();
        state_->saved.reset();
    }
}

}  // namespace moequant
