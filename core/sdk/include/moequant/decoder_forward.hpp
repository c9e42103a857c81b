// A family's decoder forward pass on the CPU, for built-in calibration: the sequential
// pipeline embeds tokenized samples, then per layer runs the attention half, records the MLP
// block's input (what a MoE layer's experts see), and runs the MLP half with the layer's experts
// as quantized so far, which gives the next layer's input (gptq-compressed-tensors.md §5.2).
// Activations are float32, row-major [tokens, hidden], the samples back to back; no token
// attends to another sample. The checkpoint must outlive the objects made from it.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/export.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/router.hpp>
#include <moequant/tensor.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace moequant {

// A routed expert's projection as a [out, in] matrix (BF16 or F32) to use in place of the
// checkpoint's, e.g. its dequantized quantization.
using ExpertMatrices = std::function<Tensor(std::int64_t expert, Projection projection)>;

class MOEQUANT_API DecoderLayerForward {
public:
    virtual ~DecoderLayerForward();

    // x <- x + attention(input_norm(x)); returns the MLP block's input, post_attention_norm(x).
    virtual std::vector<float> attention(std::vector<float>& x, std::span<const std::int64_t> sample_lengths) const = 0;

    // x <- x + mlp(mlp_input): the dense MLP, or the MoE block (router, routed experts from
    // `experts` when set, else the checkpoint's, shared experts). The router's choices go to
    // `routing` when it is given (MoE layers).
    virtual void mlp(const std::vector<float>& mlp_input, std::vector<float>& x, const ExpertMatrices& experts,
                     Routing* routing) const = 0;
};

class MOEQUANT_API DecoderForward {
public:
    virtual ~DecoderForward();
    // The token embeddings of `ids`, [ids.size(), hidden].
    virtual std::vector<float> embed(std::span<const std::int32_t> ids) const = 0;
    // Decoder layer `index` (< num_hidden_layers), its weights read when it runs.
    virtual std::unique_ptr<DecoderLayerForward> layer(std::int64_t index) const = 0;
    // The model's output for the last layer's hidden states [rows, hidden]: final norm, then
    // the head (the embedding table when tied), float32 logits [rows, vocab]. Memory grows with
    // rows x vocab: callers pass a few rows at a time. The default refuses:
    // Error(plugin, "NoForward"), so adapters written before it still build.
    virtual std::vector<float> logits(std::span<const float> hidden) const;
};

}  // namespace moequant
