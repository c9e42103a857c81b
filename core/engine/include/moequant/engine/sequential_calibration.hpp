// Built-in calibration's sequential pipeline (gptq-compressed-tensors.md §5.2): the tokenized
// samples are embedded and run through the decoder one layer at a time; each MoE layer's inputs
// (the MLP block's input after the attention half) become that layer's calibration data, and
// once its experts are quantized the layer's output is recomputed with them, so that layer L
// sees the outputs of the already-quantized layers before it. Layers without experts to quantize
// run with their own weights. The samples run in fixed blocks of whole samples (the unit ranks
// share); the hidden states of this rank's samples (float32, tokens x hidden_size) stay in
// memory, or under a memory budget in a memory-mapped scratch file, and each layer's inputs go
// to a scratch file.
#pragma once

#include <moequant/decoder_forward.hpp>
#include <moequant/engine/cluster.hpp>
#include <moequant/engine/calibration_activations.hpp>
#include <moequant/model_adapter.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace moequant {

class SequentialCalibration {
public:
    // `samples`: token ids per sample. `scratch`: a folder for the per-layer input files (made if
    // missing, emptied of them as layers finish). `save_activations`: also write every MoE
    // layer's inputs there (BF16, the recorded-activation format of conventions.md §4), committed
    // by finish(). `routed_only` marks the layer inputs for routed-only calibration.
    // `max_memory` (bytes, 0 = no limit) bounds the hidden states kept in memory (beyond half of
    // it they are file-backed) and the batch size (about 32 floats per token and hidden unit).
    // `cluster` (null: this process alone): the ranks the sample blocks are dealt to, each
    // running the forward of its own; every rank then receives every layer's inputs (in block
    // order, so the layer files are the same everywhere) and rank 0 writes save_activations.
    // `estimate_only` (--dry-run): the batches are planned and the first one embedded for the
    // run estimate's probes, but the hidden states are not allocated (a full-size model's take
    // tens of GB) and no file is written; the layers cannot be run.
    SequentialCalibration(const DecoderForward& forward, const ModelPlan& plan, std::vector<std::vector<std::int32_t>> samples,
                          std::filesystem::path scratch, std::optional<std::filesystem::path> save_activations = {},
                          bool routed_only = false, std::uint64_t max_memory = 0, Cluster* cluster = nullptr,
                          bool estimate_only = false);
    ~SequentialCalibration();
    SequentialCalibration(const SequentialCalibration&) = delete;
    SequentialCalibration& operator=(const SequentialCalibration&) = delete;

    std::int64_t samples() const noexcept;
    std::int64_t tokens() const noexcept;
    bool routed_only() const noexcept;
    std::size_t batches() const noexcept;  // the sample batches each layer runs in
    bool hidden_states_on_disk() const noexcept;  // in a mapped scratch file (over the budget)
    std::int64_t local_tokens() const noexcept;    // the tokens of this rank's samples: its hidden states' rows
    std::int64_t largest_batch_tokens() const noexcept;
    // The most tokens a batch may hold (calibration_block_tokens, or less under the memory
    // budget); the blocks are balanced below it. What the run estimate plans a batch's memory by.
    std::int64_t batch_token_limit() const noexcept;
    // What the run estimate probes (run_estimate.hpp): the decoder, and the first `n` rows of the
    // hidden states before any layer ran (the embedded tokens), [n, hidden]; with
    // `estimate_only`, n up to a block of 2048 tokens.
    const DecoderForward& forward() const noexcept;
    std::vector<float> embedded_rows(std::int64_t n) const;
    // A digest of every sample's token ids: which calibration data a run used.
    const std::string& digest() const noexcept;

    // MoE layer `layer`'s inputs: runs the layers before it that are not yet run (with the
    // experts finish_layer() gave for the MoE ones), then its attention half. Layers must come
    // in ascending order.
    const CalibrationActivations& layer_inputs(std::int64_t layer);
    // Completes `layer` with its experts as quantized (`quantized`; empty: the checkpoint's).
    void finish_layer(std::int64_t layer, const ExpertMatrices& quantized);
    // Commits the save_activations file (every MoE layer must have been finished).
    void finish();

private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace moequant
