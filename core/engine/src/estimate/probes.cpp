#include "estimate/probes.hpp"

#include "calibration/calibrated_layer.hpp"
#include "calibration/expert_tokens.hpp"

#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/hessian.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/freed_heap.hpp>
#include <moequant/parallel.hpp>
#include <moequant/safetensors_writer.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace moequant::detail {

namespace fs = std::filesystem;

namespace {

// The probes' smaller size is a quarter of the larger one.
std::int64_t smaller(std::int64_t tokens) { return std::max<std::int64_t>(1, tokens / 4); }

const MoeLayerPlan& first_moe_layer(const ModelPlan& plan) {
    if (plan.moe_layers.empty() || plan.moe_layers.front().experts.empty())
        throw Error(ErrorKind::internal, "the estimate needs a MoE layer with experts");
    return plan.moe_layers.front();
}

// The probes run on one thread: their peaks are then the same from run to run (threads
// allocating at once make them vary by a fifth), and the caller scales them to the run's
// threads.
class OneThread {
public:
    OneThread() : threads_(max_threads()) { set_max_threads(1); }
    ~OneThread() { set_max_threads(threads_); }
    OneThread(const OneThread&) = delete;
    OneThread& operator=(const OneThread&) = delete;
    std::size_t run_threads() const noexcept { return threads_; }

private:
    std::size_t threads_;
};

// The run's threads again for a while inside a OneThread scope. The steps that grow with the
// tokens are timed as the run does them, on all its threads at once, so that what the cores
// share (memory bandwidth, caches, the clock under load) is in the figure, not assumed away:
// their costs are then thread-seconds (elapsed x threads), as the one-thread figures are.
class RunThreads {
public:
    explicit RunThreads(const OneThread& outer) { set_max_threads(outer.run_threads()); }
    ~RunThreads() { set_max_threads(1); }
    RunThreads(const RunThreads&) = delete;
    RunThreads& operator=(const RunThreads&) = delete;
};

// A part the probe quantized is dropped, as the format would once written.
class DiscardingSink final : public LayerSink {
public:
    void write(const QuantizedExpert&) override {}
    std::vector<WrittenFile> commit() override { return {}; }
};

// A scratch folder of this process, removed with everything in it.
struct ScratchFolder {
    fs::path path = fs::temp_directory_path() / ("moequant-estimate-" + std::to_string(::getpid()));
    ScratchFolder() { fs::create_directories(path); }
    ~ScratchFolder() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

// The first `tokens` rows of `inputs` as the recorded MoE inputs of `layer`, one sample.
fs::path write_inputs(const fs::path& folder, std::int64_t layer, std::span<const float> inputs, std::int64_t hidden,
                      std::int64_t tokens) {
    const fs::path file = folder / ("inputs-" + std::to_string(tokens) + ".safetensors");
    const std::string name = CalibrationActivations::tensor_name(layer);
    const std::int64_t lengths[] = {tokens};
    SafetensorsWriter writer(file, {{"sample_lengths", DType::I64, {1}}, {name, DType::F32, {tokens, hidden}}});
    writer.write("sample_lengths", std::as_bytes(std::span(lengths)));
    writer.write(name, std::as_bytes(inputs.first(static_cast<std::size_t>(tokens * hidden))));
    writer.finish();
    return file;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// A cost `total` at `tokens` tokens of which the steps timed as `per_token_part` grow with the
// tokens and the rest does not. Fitting a line through two totals instead loses the per-token
// part when the fixed one (decoding a full-size layer's experts, about 10 s) is larger than the
// difference and noisier: the slope came out negative and was clamped to 0.
LinearCost split_cost(double total, double per_token_part, std::int64_t tokens) {
    LinearCost c;
    c.per_token = per_token_part / static_cast<double>(tokens);
    c.fixed = std::max(0.0, total - per_token_part);
    return c;
}

// Thread-seconds per token of the two calibration steps that grow with the tokens, in their
// steady state: each step's cost of one more chunk as the engine takes them (the Hessian 2048
// tokens at a time, a sample's; the down_proj step 1024; the probe's rows repeated to fill
// them), timed inside the step once its buffers are in place. What a call costs
// once (the Hessians' sums and finish, the float32 copies of gate and up, the first touch of
// fresh memory: 0.1-0.3 s, varying from call to call) is then left out rather than subtracted:
// a difference of two whole calls came out negative at full size. The shared gate/up Hessian
// is timed on one thread (its tiles scale 1.9-2x from 1 to 2 threads, docs/speed.md); the
// down_proj calibration on the run's threads, one expert each, all at once, as the run's experts
// go: 95% of a full-size projection, so what the cores share (memory bandwidth, caches, the
// clock under load) is in the figure. `hessian`: the gate/up Hessian, for the preparation's probe.
struct SteadyRates {
    double input_hessian = 0, down_calibration = 0;
    Tensor hessian;
};
SteadyRates steady_rates(const ConversionJob& job, const ExpertPlan& expert, std::int64_t layer, std::span<const float> inputs,
                         std::int64_t hidden, const fs::path& folder, const OneThread& outer) {
    const std::int64_t chunk = calibration_chunk_tokens, chunks = 4, rows = static_cast<std::int64_t>(inputs.size()) / hidden;
    std::vector<float> repeated(static_cast<std::size_t>(chunks * chunk * hidden));
    for (std::int64_t r = 0; r < chunks * chunk; ++r)
        std::copy_n(inputs.data() + (r % rows) * hidden, hidden, repeated.data() + r * hidden);
    SteadyRates steady;
    {  // the first add sets the sums up; the others are the steady cost, the fastest counts
        HessianAccumulator h(hidden);
        double best = 1e30;
        for (int c = 0; c < 3; ++c) {  // in the engine's Hessian chunks: a sample's 2048 tokens at a time
            const auto start = std::chrono::steady_clock::now();
            h.add(repeated.data() + (c % 2) * 2 * chunk * hidden, 2 * chunk);
            if (c > 0) best = std::min(best, seconds_since(start));
        }
        steady.input_hessian = best / static_cast<double>(2 * chunk);
        steady.hessian = h.finish(1);
    }
    const Tensor gate = load_expert_matrix(*job.source, expert.weights[static_cast<int>(Projection::gate)]);
    const Tensor up = load_expert_matrix(*job.source, expert.weights[static_cast<int>(Projection::up)]);
    const CalibrationActivations recorded =
        CalibrationActivations::open(write_inputs(folder, layer, repeated, hidden, chunks * chunk));
    const RunThreads run_threads(outer);
    const std::size_t threads = outer.run_threads();
    std::vector<double> per_chunk(threads, 1e30);
    parallel_for(0, threads, 1, [&](std::size_t first, std::size_t last) {
        for (std::size_t e = first; e < last; ++e) {
            HessianAccumulator h(gate.shape()[0]);
            auto last_chunk = std::chrono::steady_clock::now();
            std::int64_t seen = 0;
            for_each_down_input_chunk(recorded, layer, ExpertTokens{}, gate, up, job.plan->expert_activation, [&](const InputRows& x) {
                h.add(x.data(), x.rows());
                if (seen++ > 0) per_chunk[e] = std::min(per_chunk[e], seconds_since(last_chunk));
                last_chunk = std::chrono::steady_clock::now();
            });
        }
    });
    // Each thread's expert at once: the slowest sets the pace.
    steady.down_calibration = *std::max_element(per_chunk.begin(), per_chunk.end()) / static_cast<double>(chunk);
    return steady;
}

// Runs `run` (one measured probe at a number of tokens) at both sizes and fits its costs.
template <class Probe, class Run>
void fit_two_sizes(Probe& probe, std::int64_t small, std::int64_t large, const Run& run) {
    const MeasuredWork a = run(small), b = run(large);
    probe.exact = a.exact && b.exact;
    probe.seconds = LinearCost::through(static_cast<double>(small), a.seconds, static_cast<double>(large), b.seconds);
    probe.bytes = LinearCost::through(static_cast<double>(small), static_cast<double>(a.bytes), static_cast<double>(large),
                                      static_cast<double>(b.bytes));
}

}  // namespace

LinearCost LinearCost::through(double tokens_a, double cost_a, double tokens_b, double cost_b) {
    LinearCost c;
    if (tokens_b > tokens_a) c.per_token = std::max(0.0, (cost_b - cost_a) / (tokens_b - tokens_a));
    c.fixed = std::max(0.0, cost_b - c.per_token * tokens_b);
    return c;
}

ForwardProbe probe_forward(const DecoderForward& forward, const Checkpoint& source, const ModelPlan& plan,
                           std::span<const float> rows, std::span<const float> batch_rows) {
    const std::int64_t h = plan.hidden_size, large = static_cast<std::int64_t>(rows.size()) / h, small = smaller(large);
    if (batch_rows.empty()) batch_rows = rows;
    const std::int64_t batch = static_cast<std::int64_t>(batch_rows.size()) / h;
    const MoeLayerPlan& moe = first_moe_layer(plan);
    ForwardProbe probe;
    probe.layer = moe.layer;
    map_large_buffers();
    const OneThread one_thread;
    // The larger size run again through the same layer, without its decoding: on one thread (what
    // the first pass spent beyond it is the decoding) and on the run's threads (the per-token cost).
    double warm = 0, warm_thread_seconds = 0;
    auto run = [&](std::int64_t tokens) {
        // A new layer object decodes its weights at its first call: they are part of the cost.
        auto layer = forward.layer(moe.layer);
        auto pass = [&](std::span<const float> from, std::int64_t n) {
            const std::int64_t lengths[] = {n};
            std::vector<float> x(from.begin(), from.begin() + n * h);
            std::vector<float> u = layer->attention(x, lengths);
            layer->mlp(u, x, {}, nullptr);
            return u;
        };
        std::vector<float> u;
        const MeasuredWork m = measure_work([&] { u = pass(rows, tokens); });
        if (tokens == large) {  // again, outside the measured peak: on one thread, then the batch on the run's
            probe.mlp_inputs = std::move(u);
            auto start = std::chrono::steady_clock::now();
            (void)pass(rows, tokens);
            warm = seconds_since(start);
            // As a run's batches: its threads and heap, the heap trimmed before each (the
            // run hands a batch's buffers back), the faster of two (the first compiles oneDNN's
            // primitives for the batch's shapes).
            const RunThreads run_threads(one_thread);
            const RunHeap run_heap;
            warm_thread_seconds = 1e30;
            for (int repeat = 0; repeat < 2; ++repeat) {
                return_freed_heap();
                start = std::chrono::steady_clock::now();
                (void)pass(batch_rows, batch);
                warm_thread_seconds = std::min(warm_thread_seconds, seconds_since(start) * static_cast<double>(one_thread.run_threads()));
            }
        }
        layer.reset();
        release_layer_pages(source, moe);
        return m;
    };
    fit_two_sizes(probe, small, large, run);
    // The larger run's first pass decoded the layer (fixed); the warm passes are the work that
    // grows with the tokens (the routed experts are decoded on every call: per batch, as in a run).
    probe.seconds = split_cost(probe.seconds.at(static_cast<double>(large)), warm, large);
    probe.seconds.per_token = warm_thread_seconds / static_cast<double>(batch);
    return probe;
}

QuantizerProbe probe_quantizer(const ConversionJob& job, const Quantizer* quantizer, std::span<const float> inputs) {
    const MoeLayerPlan& layer = first_moe_layer(*job.plan);
    MoeLayerPlan one = layer;
    one.experts.resize(1);
    QuantizerProbe probe;
    for (const auto& s : one.experts.front().weights) probe.elements += s.rows * s.cols;
    const std::size_t threads = max_threads();
    const QuantizerCalibration* calibration = quantizer ? quantizer->calibration() : nullptr;
    const bool calibrated = calibration && (job.sequential || job.calibration);
    if (!calibrated) {
        // The matrices of two experts per thread loaded, split into their parts and quantized
        // (or only loaded: an export) on the run's threads and with its heap, as the run does
        // them: what each thread's heap keeps from one matrix to the next shows then too.
        const std::size_t experts = std::min(layer.experts.size(), 2 * threads), tasks = experts * expert_projections.size();
        const MeasuredWork m = measure_work([&] {
            parallel_for(0, tasks, 1, [&](std::size_t first, std::size_t last) {
                for (std::size_t t = first; t < last; ++t) {
                    const Projection p = expert_projections[t % expert_projections.size()];
                    const ExpertWeightSource& s = layer.experts[t / expert_projections.size()].weights[static_cast<int>(p)];
                    const bool float32 = quantizer && quantizer->quantizer_for({layer.layer, p}).takes_float32_source();
                    const Tensor matrix = load_expert_matrix(*job.source, s, float32 ? DecodeTarget::f32 : DecodeTarget::bf16);
                    if (!quantizer) continue;
                    const Quantizer& packing = quantizer->quantizer_for({layer.layer, p});
                    if (const StoredCodeCarrier* carrier = packing.carrier()) {  // re-laid, not quantized
                        const QuantizedTensor q = carrier->carry(*job.source, s);
                        continue;
                    }
                    for (int part = 0; part < job.parts; ++part) {
                        const Tensor piece = split_expert_part(matrix, p, part, job.parts);
                        const QuantizedTensor q = packing.quantize(piece.view());
                    }
                }
            });
        });
        release_layer_pages(*job.source, layer);
        probe.threads = static_cast<std::int64_t>(std::min(threads, tasks));
        probe.seconds.fixed = m.seconds / static_cast<double>(experts);
        // At least one decoded matrix (BF16, the smallest target) per thread: with threads
        // allocating at once the measured growth varies, under load down to a quarter of it.
        std::int64_t largest = 0;
        for (const auto& w : layer.experts.front().weights) largest = std::max(largest, w.rows * w.cols * 2);
        probe.bytes.fixed = std::max(static_cast<double>(m.bytes), static_cast<double>(probe.threads * largest));
        probe.exact = m.exact;
        return probe;
    }
    const std::int64_t h = job.plan->hidden_size, large = static_cast<std::int64_t>(inputs.size()) / h, small = smaller(large);
    map_large_buffers();
    const OneThread one_thread;
    const ScratchFolder scratch;
    // The steps that grow with the tokens timed apart: the layer's gate/up Hessian (shared), the
    // expert's down_proj calibration; and the gate/up preparation (shared, fixed), on one thread.
    SteadyRates steady = steady_rates(job, one.experts.front(), layer.layer, inputs, h, scratch.path, one_thread);
    const auto prepared_at = std::chrono::steady_clock::now();
    (void)calibration->prepare_calibration(steady.hessian);
    const double preparation = seconds_since(prepared_at);
    steady.hessian = Tensor();  // not held through the measured runs
    const double input_hessian = steady.input_hessian * static_cast<double>(large);
    const double down_calibration = steady.down_calibration * static_cast<double>(large);
    auto run = [&](std::int64_t tokens) {
        const CalibrationActivations recorded = CalibrationActivations::open(write_inputs(scratch.path, layer.layer, inputs, h, tokens));
        CalibratedLayerJob calibrated;
        calibrated.quantizer = quantizer;
        calibrated.calibration = &recorded;
        calibrated.plan = job.plan;
        calibrated.source = job.source;
        calibrated.parts = job.parts;
        calibrated.load = [&](const ExpertWeightSource& s) { return load_expert_matrix(*job.source, s); };
        DiscardingSink sink;
        const MeasuredWork m = measure_work([&] { quantize_calibrated_layer(calibrated, one, sink); });
        release_layer_pages(*job.source, layer);
        return m;
    };
    fit_two_sizes(probe, small, large, run);
    probe.seconds = split_cost(probe.seconds.at(static_cast<double>(large)), input_hessian + down_calibration, large);
    probe.shared_seconds = split_cost(input_hessian + preparation, input_hessian, large);
    return probe;
}

HeadProbe probe_head(const DecoderForward& forward, std::span<const float> rows) {
    const OneThread one_thread;
    const MeasuredWork m = measure_work([&] { forward.logits(rows); });
    return {m.seconds, m.bytes, m.file_bytes};
}

}  // namespace moequant::detail
