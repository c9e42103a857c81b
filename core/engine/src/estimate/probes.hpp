// The short measurements --dry-run scales its estimate from, each on the job's own model and
// data: one layer's forward on a few hundred tokens, one expert quantized (with GPTQ: on
// Hessians of those tokens), one call of the head. Each is timed and its peak memory measured
// (resident_memory.hpp) at two sizes, so what grows with the tokens is told apart from what
// does not.
#pragma once

#include "estimate/resident_memory.hpp"

#include <moequant/decoder_forward.hpp>
#include <moequant/engine/conversion.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace moequant::detail {

// A cost a + b * tokens, fitted through two measurements.
struct LinearCost {
    double fixed = 0, per_token = 0;
    double at(double tokens) const noexcept { return fixed + per_token * tokens; }
    static LinearCost through(double tokens_a, double cost_a, double tokens_b, double cost_b);
};

struct ForwardProbe {
    std::int64_t layer = 0;   // the layer run: the first MoE layer
    LinearCost seconds, bytes;
    bool exact = true;        // peaks measured (see MeasuredWork)
    std::vector<float> mlp_inputs;  // its MLP inputs for the larger run, [tokens, hidden]
};

// Runs the first MoE layer (attention, then the MLP with the source's experts) on the first
// rows of `rows` ([tokens, hidden], one sample) and on all of them, measuring memory and the
// decoding; then times the work that grows with the tokens on `batch_rows` (the run's batch:
// what a call costs per batch, such as decoding the routed experts, is shared by its tokens),
// or on `rows` when empty.
ForwardProbe probe_forward(const DecoderForward& forward, const Checkpoint& source, const ModelPlan& plan,
                           std::span<const float> rows, std::span<const float> batch_rows = {});

struct QuantizerProbe {
    LinearCost seconds, bytes;  // one expert (three matrices), by calibration tokens
    // Of `seconds`, what a layer does once for all its experts (with calibration: the gate/up
    // Hessian of all tokens and its preparation).
    LinearCost shared_seconds;
    std::int64_t threads = 1;   // the matrices that ran at once (without calibration)
    std::int64_t elements = 0;  // weights of that expert
    bool exact = true;
};

// Quantizes experts of the first MoE layer as the job would (its threadpool parts) with the
// job's quantizer: without calibration, two experts per thread on the run's threads (the one
// probe not on one thread; `seconds` per expert, `bytes` for all at once); with it, the first
// expert through GPTQ's layer code on a scratch file of the first rows of `inputs` and of all
// of them ([tokens, hidden]).
QuantizerProbe probe_quantizer(const ConversionJob& job, const Quantizer* quantizer, std::span<const float> inputs);

// One logits() call on `rows` ([n, hidden]); its file pages (the head's) are in `file_bytes`.
struct HeadProbe {
    double seconds = 0;
    std::uint64_t bytes = 0, file_bytes = 0;
};
HeadProbe probe_head(const DecoderForward& forward, std::span<const float> rows);

}  // namespace moequant::detail
