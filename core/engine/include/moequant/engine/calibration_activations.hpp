// Recorded calibration activations (conventions.md §4): a safetensors file holding, per MoE
// layer L, `layers.{L}.moe_input` BF16 or F32 [total_tokens, hidden] — the hidden states
// entering the layer's MoE block, as any inference engine can dump them — and one
// `sample_lengths` I64 [num_samples] whose sum is total_tokens. GPTQ's n (the Hessian's
// divisor) is num_samples. The file is memory-mapped; layers are read when used.
#pragma once

#include <moequant/model_adapter.hpp>
#include <moequant/safetensors_reader.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace moequant {

class CalibrationActivations {
public:
    // Opens and checks the file: sample_lengths present, I64, 1-D, every length >= 0 and a
    // positive sum; every layers.*.moe_input 2-D BF16/F32 with that many rows. Throws
    // Error(input) naming the file and tensor.
    static CalibrationActivations open(const std::filesystem::path& file);

    const std::filesystem::path& path() const noexcept { return file_.path(); }
    const SafetensorsFile& file() const noexcept { return file_; }

    // Uses only the first `max_samples` samples (--num_calibration_samples) and the first
    // `max_tokens` tokens of each (--max_sequence_length); <= 0 means no limit.
    void select(std::int64_t max_samples, std::int64_t max_tokens);

    // Which tokens an expert sees (gptq-compressed-tensors.md §5.3): all of its layer's
    // (moe_calibrate_all_experts, the default), or only those the layer's router sends it.
    void set_routed_only(bool routed_only) noexcept { routed_only_ = routed_only; }
    bool routed_only() const noexcept { return routed_only_; }

    // Samples and tokens in use (after select()); GPTQ's n is samples().
    std::int64_t samples() const noexcept { return samples_; }
    std::int64_t tokens() const noexcept { return tokens_; }
    // The rows of each layer's inputs in use, as [begin, end) ranges in file order.
    const std::vector<std::pair<std::int64_t, std::int64_t>>& token_ranges() const noexcept { return ranges_; }

    // Checks that every MoE layer of the plan has inputs of width plan.hidden_size (Error(input)
    // naming the missing or misshapen tensor).
    void check_plan(const ModelPlan& plan) const;

    // layers.{layer}.moe_input, [tokens, hidden].
    TensorView layer_inputs(std::int64_t layer) const;
    // Lets the kernel drop the layer's pages once it is used (memory stays about one layer).
    void release_layer(std::int64_t layer) const noexcept;

    static std::string tensor_name(std::int64_t layer);

private:
    explicit CalibrationActivations(SafetensorsFile file) : file_(std::move(file)) {}
    SafetensorsFile file_;
    std::vector<std::int64_t> lengths_;  // every sample's token count, as stored
    std::int64_t stored_tokens_ = 0;
    std::int64_t samples_ = 0, tokens_ = 0;
    bool routed_only_ = false;
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges_;
};

}  // namespace moequant
