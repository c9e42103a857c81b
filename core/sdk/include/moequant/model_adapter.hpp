// ModelAdapter: what a model-family plugin knows about its checkpoints.
//
// An adapter recognises its family from config.json and the tensor names, and describes the
// checkpoint as a ModelPlan: per MoE layer, where each routed expert's gate/up/down weight
// lives (a weight, whatever its encoding, or a slice of a fused one), and the role of every
// other tensor (the GPU path derives its ignore list from these roles, so they must be
// complete). Adapters never read tensor data to plan.
#pragma once

#include <moequant/chat_template.hpp>
#include <moequant/checkpoint.hpp>
#include <moequant/export.hpp>
#include <moequant/gated_activation.hpp>
#include <moequant/model_config.hpp>
#include <moequant/options.hpp>
#include <moequant/projection.hpp>
#include <moequant/router.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moequant {

class DecoderForward;

// What a tensor is for. Routed-expert weights are what the quantizers work on.
enum class TensorRole : std::uint8_t {
    routed_expert,       // a routed expert's weight (or a fused tensor of several experts)
    routed_expert_scale, // another tensor of its encoding (a scale, packed zeros, g_idx, ...)
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

// How a checkpoint stores its routed experts (model-families.md §2.5).
enum class ExpertLayout : std::uint8_t {
    per_expert,   // one [out, in] tensor per expert and projection
    fused_linear, // layout A: experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I]
    fused_bmm,    // layout B: experts.gate_up_proj [E, H, 2I], experts.down_proj [E, I, H]
};
MOEQUANT_API std::string_view expert_layout_name(ExpertLayout layout) noexcept;

// Where one expert's [out, in] weight matrix comes from: a weight of the checkpoint
// (Checkpoint::weight(), whatever its encoding) or a slice of a fused one.
struct ExpertWeightSource {
    std::string tensor;        // the weight's name (EncodedWeight::name)
    std::int64_t rows = 0;     // out features of the matrix this source yields
    std::int64_t cols = 0;     // in features
    // For fused layouts: the expert's matrix is a slice of a 3-D weight [E, a, b].
    struct FusedSlice {
        std::int64_t expert = 0;      // index along dimension 0
        std::int64_t offset = 0;      // first index of the slice along the sliced dimension
        std::int64_t length = 0;      // its length (indices offset, offset + step, ...)
        std::int64_t step = 1;        // distance between its indices (gpt-oss interleaves gate and up rows: 2)
        bool along_columns = false;   // slice dimension 2 instead of dimension 1 (step must be 1)
        bool transposed = false;      // stored as [in, out]: transpose to get [out, in]
    };
    std::optional<FusedSlice> slice;
};

// The Hugging Face module name of an expert's Linear, as llm-compressor's `ignore` patterns and
// vLLM/SGLang's loaders see it (conventions.md §4): the source's own per-expert module name
// (`…mlp.experts.E.gate_proj`, Mixtral `…block_sparse_moe.experts.E.w1`); for fused sources
// `<experts>.E.{gate,up,down}_proj`, what llm-compressor's linearization produces.
MOEQUANT_API std::string expert_module_name(const ExpertWeightSource& source, std::int64_t expert, Projection p);

struct ExpertPlan {
    std::int64_t expert = 0;
    std::array<ExpertWeightSource, 3> weights;  // indexed by Projection
};

struct MoeLayerPlan {
    std::int64_t layer = 0;
    std::vector<ExpertPlan> experts;
    std::string router_weight;  // the router's [experts, hidden] weight (empty if the checkpoint has none)
    std::string router_bias;    // its e_score_correction_bias [experts] (empty if none)
};

struct ModelPlan {
    std::string family;                   // adapter id
    std::string model_type;               // from config.json (text_config first)
    std::int64_t num_hidden_layers = 0;
    std::int64_t hidden_size = 0;
    std::int64_t expert_intermediate_size = 0;
    std::int64_t num_experts = 0;         // routed experts per MoE layer
    std::int64_t experts_per_token = 0;
    ExpertLayout layout = ExpertLayout::per_expert;
    RouterSpec router;                    // how each MoE layer routes its tokens
    GatedActivation expert_activation;    // what the routed experts' down_proj multiplies
    std::vector<MoeLayerPlan> moe_layers; // ascending layer index
    std::vector<std::pair<std::string, TensorRole>> roles;  // every tensor of the checkpoint
    std::vector<std::string> warnings;    // things a user should know (unrecognised tensors, ...)

    // The plan of MoE layer `layer`; null when that layer holds no routed experts.
    const MoeLayerPlan* moe_layer(std::int64_t layer) const noexcept {
        for (const MoeLayerPlan& l : moe_layers)
            if (l.layer == layer) return &l;
        return nullptr;
    }
};

// A release that synthesize() writes in its own conventions where they differ from those of
// its model_type (config values, shard names), e.g. MiniMax-M2.7 under model_type minimax_m2.
// `moequant synth --family NAME` accepts the name beside adapter ids and model types.
struct SynthRelease {
    std::string name;         // e.g. "minimax_m27" ([a-z0-9_]+, no adapter id or model type)
    std::string model_type;   // the model_type its config.json says: one of model_types()
    std::string description;  // one line, e.g. "MiniMax-M2.7: max_position_embeddings 204800"
};

class MOEQUANT_API ModelAdapter {
public:
    virtual ~ModelAdapter();

    // Family id, e.g. "deepseek_v3" ([a-z0-9_-]+).
    virtual std::string_view id() const = 0;
    virtual std::string_view description() const = 0;
    // The config.json model_type values this family owns, e.g. {"deepseek_v3", "kimi_k2"}.
    virtual std::vector<std::string> model_types() const = 0;

    // How well this adapter fits the checkpoint: 0 = not mine; the highest score wins.
    virtual int match(const ModelConfig& config, const Checkpoint& checkpoint) const = 0;

    // The MoE plan. Throws Error(input) naming the tensor or config key when the checkpoint
    // does not follow the family's conventions (never guesses).
    virtual ModelPlan plan(const ModelConfig& config, const Checkpoint& checkpoint) const = 0;

    // Writes a small random checkpoint in the family's exact on-disk conventions into
    // `directory` (which exists and is empty). Options: "model_type" (one of model_types()),
    // "preset" (tiny|small), "dtype" (bf16|fp8|fp8-channel|...), "seed", "layout" (per-expert|fused-linear|
    // fused-bmm) where the family has fused variants, "release" (one of synth_releases(), with
    // its model_type). Deterministic for given options. Optional: the default refuses with
    // Error(usage, "NoSynthesis").
    virtual void synthesize(const std::filesystem::path& directory, const Options& options) const;
    // The releases synthesize() writes by name (option "release"); the default has none.
    virtual std::vector<SynthRelease> synth_releases() const;

    // How the family writes a conversation, for calibration "messages" (chat_template.hpp).
    // The default is plain_chat_template().
    virtual ChatTemplate chat_template(const ModelConfig& config) const;

    // The family's decoder forward on `checkpoint` (decoder_forward.hpp), which must outlive it;
    // `plan` is this adapter's plan of it. The default refuses: Error(plugin, "NoForward").
    virtual std::unique_ptr<DecoderForward> decoder_forward(const ModelConfig& config, const Checkpoint& checkpoint,
                                                            const ModelPlan& plan) const;
};

}  // namespace moequant
