#include "calibration/sample_batches.hpp"
#include "conversion/job_validation.hpp"
#include "estimate/probes.hpp"
#include "estimate/resident_memory.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/engine/run_estimate.hpp>
#include <moequant/engine/sequential_calibration.hpp>
#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/parallel.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace moequant {

namespace {

constexpr std::int64_t probe_tokens = 512;     // the probes' larger size
// An expert's working memory grows with its tokens up to the chunk its down_proj inputs are
// computed in (calibrated_layer.cpp), then stays.
constexpr std::int64_t expert_chunk = 1024;
constexpr std::int64_t logit_rows = 32;        // rows per logits() call (evaluation.cpp)
constexpr std::uint64_t digest_buffer = 1 << 20;  // file_digest()'s read buffer: each written file read back

std::uint64_t f32_rows(std::int64_t tokens, std::int64_t hidden) {
    return static_cast<std::uint64_t>(tokens) * static_cast<std::uint64_t>(hidden) * sizeof(float);
}

std::uint64_t as_bytes(double v) { return v > 0 ? static_cast<std::uint64_t>(v) : 0; }

std::string tokens_text(std::int64_t n) { return std::to_string(n) + " token" + (n == 1 ? "" : "s"); }

std::uint64_t largest_layer_bytes(const Checkpoint& source, const ModelPlan& plan) {
    std::uint64_t most = 0;
    for (const auto& layer : plan.moe_layers) most = std::max(most, layer_input_bytes(source, layer));
    return most;
}

// What a layer's experts take once quantized (the quantizer's layout of each part).
std::uint64_t quantized_layer_bytes(const Quantizer& quantizer, const MoeLayerPlan& layer, int parts) {
    std::uint64_t bytes = 0;
    for (const auto& e : layer.experts)
        for (Projection p : expert_projections) {
            const ExpertWeightSource& s = e.weights[static_cast<int>(p)];
            const Shape part = p == Projection::down ? Shape{s.rows, s.cols / parts} : Shape{s.rows / parts, s.cols};
            for (const TensorSpec& t : quantizer.quantizer_for({layer.layer, p}).output_layout(part))
                bytes += parts * dtype_byte_size(t.dtype, shape_elements(t.shape).value_or(0)).value_or(0);
        }
    return bytes;
}

std::int64_t expert_count(const ModelPlan& plan) {
    std::int64_t n = 0;
    for (const auto& layer : plan.moe_layers) n += static_cast<std::int64_t>(layer.experts.size());
    return n;
}

// The first rows of a layer's recorded inputs, as float32.
std::vector<float> recorded_rows(const CalibrationActivations& recorded, std::int64_t layer, std::int64_t n) {
    const TensorView x = recorded.layer_inputs(layer);
    const std::int64_t h = x.shape[1], rows = std::min(n, x.shape[0]);
    std::vector<float> out(static_cast<std::size_t>(rows * h));
    if (x.dtype == DType::F32)
        std::memcpy(out.data(), x.data(), out.size() * sizeof(float));
    else
        convert_bf16_to_f32(x.data(), out.data(), out.size());
    return out;
}

std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, s < 1 ? "%.0f ms" : "%.2f s", s < 1 ? s * 1000 : s);
    return buf;
}

// The working memory of a layer's quantization: several experts at once, or the forward of a
// batch, whichever is larger (they follow each other).
void add_larger(RunEstimate& e, MemoryTerm a, MemoryTerm b) {
    e.memory.push_back(a.bytes >= b.bytes ? std::move(a) : std::move(b)); }

// The forward of a batch: the probe's cost at its tokens (one thread), and each further thread
// running an expert of the MoE block at the same time (add_routed_experts): its weights in
// float32 (a quantized model's experts come dequantized to F32; decoded BF16 ones take half,
// plus the block of rows an FP32 product widens at a time), and its tokens' input, gate, up
// and output rows, for twice the mean share of tokens (routing is uneven).
std::uint64_t forward_bytes(const detail::ForwardProbe& f, std::int64_t tokens, const ModelPlan& plan, std::int64_t threads) {
    const std::int64_t h = plan.hidden_size, i = plan.expert_intermediate_size, experts = std::max<std::int64_t>(1, plan.num_experts);
    const std::int64_t share = std::min(tokens, 2 * tokens * std::max<std::int64_t>(1, plan.router.top_k) / experts);
    const std::uint64_t expert = 3 * f32_rows(i, h) + f32_rows(share, 2 * h + 2 * i);
    const auto others = static_cast<std::uint64_t>(std::clamp<std::int64_t>(threads - 1, 0, experts - 1));
    return as_bytes(f.bytes.at(static_cast<double>(tokens))) + others * expert;
}

}  // namespace

std::uint64_t RunEstimate::peak_bytes() const noexcept {
    std::uint64_t total = 0;
    for (const auto& t : memory) total += t.bytes;
    return total;
}

namespace {

// estimate_conversion() but for the process's own term, the first.
RunEstimate conversion_estimate(const ConversionJob& job) {
    const CheckedJob checked = validate_job(job);
    const Quantizer* quantizer = checked.quantizer;
    const ModelPlan& plan = *job.plan;
    RunEstimate e;
    if (plan.moe_layers.empty() || plan.moe_layers.front().experts.empty()) return e;
    const std::int64_t threads = static_cast<std::int64_t>(max_threads());
    const std::int64_t experts = static_cast<std::int64_t>(plan.moe_layers.front().experts.size());
    const std::int64_t h = plan.hidden_size;
    e.memory.push_back({job.sequential ? "this process (plugins, headers, the tokenized samples)" : "this process (plugins, headers)", 0});
    // Planned, not allocated, by the dry run (SequentialCalibration's estimate_only).
    if (job.sequential && !job.sequential->hidden_states_on_disk())
        e.memory.push_back({"the samples' hidden states", f32_rows(job.sequential->local_tokens(), h)});
    e.memory.push_back({"one layer's source experts, mapped while it converts", largest_layer_bytes(*job.source, plan)});
    for (const auto& layer : plan.moe_layers) e.bytes_read += layer_input_bytes(*job.source, layer);

    const QuantizerCalibration* calibration = quantizer ? quantizer->calibration() : nullptr;
    const bool calibrated = calibration && (job.sequential || job.calibration);
    if (!calibrated) {
        const detail::QuantizerProbe q = detail::probe_quantizer(job, quantizer, {});
        const std::int64_t at_once = std::min(threads, experts * 3);
        // The probe ran q.threads matrices at once.
        const double share = static_cast<double>(at_once) / static_cast<double>(q.threads);
        add_larger(e, {std::to_string(at_once) + " matrices " + (quantizer ? "quantized" : "read") + " at once", as_bytes(share * q.bytes.fixed)},
                   {"each written file read back for its digest", digest_buffer});
        if (!quantizer) {  // an export writes each encoded tensor decoded to BF16 whole (a fused one: all experts)
            std::uint64_t largest = 0;
            for (const auto& layer : plan.moe_layers)
                for (const auto& expert : layer.experts)
                    for (const auto& w : expert.weights) {
                        const EncodedWeight& stored = job.source->weight(w.tensor);
                        const bool plain = stored.input_type == "bf16" || stored.input_type == "fp16" || stored.input_type == "fp32";
                        if (!plain) largest = std::max(largest, 2 * shape_elements(stored.shape).value_or(0));
                    }
            if (largest > 0) e.memory.push_back({"the largest encoded expert tensor, decoded to BF16 for the export", largest});
        }
        e.seconds = q.seconds.fixed * static_cast<double>(expert_count(plan)) / share;
        e.timed = "one expert " + std::string(quantizer ? "quantized" : "read") + " in " + seconds_text(q.seconds.fixed) + " on " +
                  std::to_string(q.threads) + " thread(s)";
        e.exact = q.exact;
        return e;
    }
    const std::int64_t at_once = std::min(threads, experts);
    const std::int64_t first = plan.moe_layers.front().layer;
    std::int64_t tokens = 0;
    detail::QuantizerProbe q;
    if (job.sequential) {
        const SequentialCalibration& s = *job.sequential;
        tokens = s.tokens();
        // The per-token work timed on a batch as large as the run's (at most a block: what the
        // plan holds embedded), over which its per-call costs spread.
        const std::int64_t run_batch = std::max(s.largest_batch_tokens(), std::min(s.batch_token_limit(), s.tokens()));
        detail::ForwardProbe f = detail::probe_forward(s.forward(), *job.source, plan, s.embedded_rows(probe_tokens),
                                                       run_batch > probe_tokens ? s.embedded_rows(run_batch) : std::vector<float>{});
        q = detail::probe_quantizer(job, quantizer, f.mlp_inputs);
        f.mlp_inputs = {};
        e.memory.push_back({"the layer's MLP inputs, mapped from the scratch file", f32_rows(tokens, h)});
        e.memory.push_back({"the layer's quantized experts, kept for its forward",
                            quantized_layer_bytes(*quantizer, plan.moe_layers.front(), job.parts)});
        // A batch as large as the blocks may be: they are balanced below the limit, and what a
        // forward keeps beyond its batch's rows (pools, arenas) does not shrink with them.
        const std::int64_t batch = std::max(s.largest_batch_tokens(), std::min(s.batch_token_limit(), tokens));
        add_larger(e, {std::to_string(at_once) + " experts quantized at once", as_bytes(at_once * q.bytes.at(std::min(tokens, expert_chunk)))},
                   {"the layer's forward on a batch of " + tokens_text(batch), forward_bytes(f, batch, plan, threads)});
        e.seconds = static_cast<double>(plan.num_hidden_layers) * f.seconds.at(static_cast<double>(tokens)) / static_cast<double>(threads);
        e.timed = "the forward of layer " + std::to_string(f.layer) + " at " + seconds_text(f.seconds.per_token * 1000) +
                  " per 1000 tokens, ";
        e.exact = f.exact;
    } else {
        const CalibrationActivations& recorded = *job.calibration;
        tokens = recorded.tokens();
        const TensorView x = recorded.layer_inputs(first);
        q = detail::probe_quantizer(job, quantizer, recorded_rows(recorded, first, probe_tokens));
        e.memory.push_back({"the layer's recorded inputs, mapped", x.bytes.size()});
        e.memory.push_back({std::to_string(at_once) + " experts quantized at once",
                            as_bytes(at_once * q.bytes.at(std::min(tokens, expert_chunk)))});
    }
    // The gate/up Hessian of all tokens once per layer (on the run's threads), then each expert.
    const double t = static_cast<double>(tokens), shared = std::min(q.shared_seconds.at(t), q.seconds.at(t));
    e.seconds += (static_cast<double>(plan.moe_layers.size()) * shared / static_cast<double>(threads)) +
                 static_cast<double>(expert_count(plan)) * (q.seconds.at(t) - shared) / static_cast<double>(at_once);
    e.timed += "one expert quantized on " + tokens_text(tokens) + " in " + seconds_text(q.seconds.at(t) - shared) + " (and " +
               seconds_text(shared) + " per layer for the Hessian all experts share), in thread-seconds (what grows with the tokens timed on " +
               std::to_string(threads) + " thread(s) at once, as the run does it)";
    e.exact = e.exact && q.exact;
    return e;
}

}  // namespace

RunEstimate estimate_conversion(const ConversionJob& job) {
    RunEstimate e = conversion_estimate(job);
    // Measured after the probes: the code they ran is then resident, as it will be in the run.
    if (!e.memory.empty()) e.memory.front().bytes = detail::resident_bytes_in_use();
    return e;
}

RunEstimate estimate_evaluation(const EvaluationJob& job) {
    if (!job.forward || !job.source || !job.plan) throw Error(ErrorKind::internal, "incomplete evaluation job");
    const ModelPlan& plan = *job.plan;
    RunEstimate e;
    if (plan.moe_layers.empty() || plan.moe_layers.front().experts.empty()) return e;
    const std::int64_t h = plan.hidden_size;
    const bool two = job.quantized != nullptr;
    std::vector<std::int64_t> lengths;
    std::vector<std::int32_t> ids;
    std::int64_t tokens = 0, scored = 0;
    for (const auto& s : job.samples) {
        lengths.push_back(static_cast<std::int64_t>(s.size()));
        tokens += static_cast<std::int64_t>(s.size());
        scored += std::max<std::int64_t>(0, static_cast<std::int64_t>(s.size()) - 1);
        for (std::int32_t id : s)
            if (static_cast<std::int64_t>(ids.size()) < probe_tokens) ids.push_back(id);
    }
    if (ids.empty()) return e;
    // As run_evaluation() sizes them.
    const int models = two ? 2 : 1;
    const bool mapped = job.max_memory > 0 && models * f32_rows(tokens, h) > job.max_memory / 2;
    // A batch as large as the blocks may be (as in sequential calibration's estimate).
    const std::int64_t limit = detail::block_token_limit(job.max_memory / (two ? 4 : 2), h, tokens);
    std::int64_t batch = std::min(limit, tokens);
    for (const auto& [b0, b1] : detail::sample_batches(lengths, limit)) {
        std::int64_t n = 0;
        for (std::size_t i = b0; i < b1; ++i) n += lengths[i];
        batch = std::max(batch, n);
    }
    e.memory.push_back({"this process (plugins, headers, samples, the quantized output checked)", 0});
    if (!mapped) e.memory.push_back({two ? "both models' hidden states" : "the hidden states", models * f32_rows(tokens, h)});
    e.memory.push_back({"one layer's source experts, mapped while it runs", largest_layer_bytes(*job.source, plan)});
    for (const auto& layer : plan.moe_layers) e.bytes_read += layer_input_bytes(*job.source, layer);
    const std::int64_t threads = static_cast<std::int64_t>(max_threads());
    const std::vector<float> rows = job.forward->embed(ids);
    detail::ForwardProbe f = detail::probe_forward(*job.forward, *job.source, plan, rows);
    f.mlp_inputs = {};
    // The quantized model's MoE block runs on both models' rows at once (evaluation.cpp), while
    // the source's block output and the quantized model's input are held.
    const std::uint64_t forward = forward_bytes(f, models * batch, plan, threads) + (two ? 3 : 1) * f32_rows(batch, h);
    e.memory.push_back({"a layer's forward on a batch of " + tokens_text(batch) + (two ? " per model" : ""), forward});
    const std::int64_t head_rows = std::min<std::int64_t>(logit_rows, static_cast<std::int64_t>(ids.size()));
    const detail::HeadProbe head = detail::probe_head(*job.forward, std::span(rows).first(static_cast<std::size_t>(head_rows * h)));
    e.memory.push_back({"the head's weights, mapped, and its logits", head.file_bytes + models * head.bytes});
    const double calls = std::ceil(static_cast<double>(scored) / static_cast<double>(head_rows));
    e.seconds = models * (static_cast<double>(plan.num_hidden_layers) * f.seconds.at(static_cast<double>(tokens)) + calls * head.seconds) /
                static_cast<double>(threads);
    e.timed = "the forward of layer " + std::to_string(f.layer) + " at " + seconds_text(f.seconds.per_token * 1000) +
              " per 1000 tokens in thread-seconds (timed on " + std::to_string(threads) + " thread(s) at once, as the run does it), the head at " +
              seconds_text(head.seconds) + " per " + std::to_string(head_rows) + " rows on one thread";
    e.exact = f.exact;
    e.memory.front().bytes = detail::resident_bytes_in_use();
    return e;
}

}  // namespace moequant
