// ModelAdapter: what a model-family plugin knows about its checkpoints (first draft).
//
// An adapter recognises its family from config.json and the tensor names, and describes the
// checkpoint as a ModelPlan: per MoE layer, where each routed expert's gate/up/down weight
// lives (a tensor, or a slice of a fused tensor), its scale tensor if FP8, and the role of
// every other tensor (the GPU path derives its ignore list from these roles, so they must be
// complete). Adapters never read tensor data to plan.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/export.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/model_config.hpp>
#include <moequant/options.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moequant {

// The three projections of a SwiGLU expert: down(act(gate(x)) * up(x)).
enum class Projection : std::uint8_t { gate = 0, up = 1, down = 2 };
MOEQUANT_API std::string_view projection_name(Projection p) noexcept;

// What a tensor is for. Routed-expert weights are what the quantizers work on.
enum class TensorRole : std::uint8_t {
    routed_expert,       // a routed expert's weight (or a fused tensor of several experts)
    routed_expert_scale, // its FP8 block scale (weight_scale_inv)
    router,              // gate logits weight
    router_bias,         // e_score_correction_bias
    shared_expert,       // shared expert weights (and their scales)
    shared_expert_gate,  // Qwen3-Next's scalar gate of the shared expert
    dense_mlp,           // MLP of dense (non-MoE) layers
    attention,           // attention / linear-attention weights and their scales
    norm,                // RMSNorm / LayerNorm weights
    embedding,           // token embeddings
    lm_head,             // output head
    skipped_mtp,         // multi-token-prediction layers: never converted or copied
    skipped_buffer,      // non-parameter buffers such as rotary_emb.inv_freq
    other,               // anything else, copied unchanged
};
MOEQUANT_API std::string_view tensor_role_name(TensorRole role) noexcept;

// Where one expert's [out, in] weight matrix comes from.
struct ExpertWeightSource {
    std::string tensor;        // tensor name in the checkpoint
    std::string scale_tensor;  // FP8 block scale (empty when the weight is not FP8)
    // For fused layouts: the expert's matrix is a slice of a 3-D tensor [E, a, b].
    struct FusedSlice {
        std::int64_t expert = 0;      // index along dimension 0
        std::int64_t offset = 0;      // first row (or column) of the slice
        std::int64_t length = 0;      // rows (or columns) in the slice
        bool along_columns = false;   // slice dimension 2 instead of dimension 1
        bool transposed = false;      // stored as [in, out]: transpose to get [out, in]
    };
    std::optional<FusedSlice> slice;
};

struct ExpertPlan {
    std::int64_t expert = 0;
    std::array<ExpertWeightSource, 3> weights;  // indexed by Projection
};

struct MoeLayerPlan {
    std::int64_t layer = 0;
    std::vector<ExpertPlan> experts;
};

struct ModelPlan {
    std::string family;                   // adapter id
    std::int64_t hidden_size = 0;
    std::int64_t expert_intermediate_size = 0;
    std::int64_t num_experts = 0;         // routed experts per MoE layer
    std::optional<BlockSize> fp8_block;   // from quantization_config.weight_block_size
    std::vector<MoeLayerPlan> moe_layers; // ascending layer index
    std::vector<std::pair<std::string, TensorRole>> roles;  // every tensor of the checkpoint
};

class MOEQUANT_API ModelAdapter {
public:
    virtual ~ModelAdapter();

    // Family id, e.g. "deepseek_v3" ([a-z0-9_-]+).
    virtual std::string_view id() const = 0;
    virtual std::string_view description() const = 0;

    // How well this adapter fits the checkpoint: 0 = not mine; the highest score wins.
    virtual int match(const ModelConfig& config, const Checkpoint& checkpoint) const = 0;

    // The MoE plan. Throws Error(input) naming the tensor or config key when the checkpoint
    // does not follow the family's conventions (never guesses).
    virtual ModelPlan plan(const ModelConfig& config, const Checkpoint& checkpoint,
                           const Options& options) const = 0;
};

}  // namespace moequant
