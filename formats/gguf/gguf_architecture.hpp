// How a family's checkpoint becomes llama.cpp's architecture in GGUF: the architecture name,
// its metadata keys (typed as llama.cpp's convert_hf_to_gguf.py writes them), every tensor's
// GGUF name, the pre-tokenizer name, and the facts llama-quantize's rules read
// (docs/gguf-format.md). One entry per model_type; gguf_architecture_for() refuses the others
// naming what is written.
#pragma once

#include "gguf_container.hpp"
#include "gguf_expert_tensor_name.hpp"
#include "gguf_mla_split.hpp"
#include "gguf_type_policy.hpp"

#include <moequant/model_adapter.hpp>
#include <moequant/model_config.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moequant::formats {

struct GgufArchitecture {
    std::string arch;  // general.architecture, e.g. qwen3moe
    std::string pre;   // tokenizer.ggml.pre
    std::vector<GgufKeyValue> metadata;  // {arch}.* keys
    GgufModelFacts facts;
    // The GGUF name of a (non-expert) checkpoint weight; nullopt when it has none.
    std::optional<std::string> (*tensor_name)(const std::string& checkpoint_name) = nullptr;
    // The tokenizer metadata: llama.cpp's gpt2 (byte-level BPE) or llama (SentencePiece) vocabulary.
    enum class Vocabulary { gpt2, llama } vocabulary = Vocabulary::gpt2;
    // llama's converter reorders the rows of attn_q / attn_k (weights and biases) from Hugging
    // Face's half-split rotary to its interleaved one, per head: the heads of each; 0 = as stored.
    std::int64_t rope_interleave_q_heads = 0, rope_interleave_k_heads = 0;
    // deepseek2 as today's converter writes it: attn_kv_b split into attn_k_b / attn_v_b of this
    // shape (gguf_mla_split.hpp); nullopt keeps attn_kv_b whole (--legacy-mla, llama.cpp before 2025-04).
    std::optional<MlaShape> mla_split;
    // Special tokens the converter names by their text ({type, content}, GgufVocabRequest).
    std::vector<std::pair<std::string, std::string>> named_specials;
    // Checkpoint tensors the converter splits by interleaved columns (gpt-oss's gate_up_proj_bias:
    // gate the even values of each row, up the odd): the GGUF names of the even and the odd half;
    // nullopt for the others. Null when the architecture splits none.
    std::optional<std::pair<std::string, std::string>> (*deinterleaved_names)(const std::string& checkpoint_name) = nullptr;
};

// What of the architecture the user chose: the older deepseek2 layout.
struct GgufArchitectureRequest {
    bool legacy_mla = false;
};

// The heads whose rows `arch` interleaves in the GGUF tensor `gguf_name`; 0 for none.
std::int64_t gguf_rope_interleave_heads(const GgufArchitecture& arch, const std::string& gguf_name);

// The architecture the plan's model maps to. Error(input) naming the model type when GGUF output
// is not written for it (yet), listing the ones that are.
GgufArchitecture gguf_architecture_for(const ModelPlan& plan, const ModelConfig& config, const GgufArchitectureRequest& request = {});

}  // namespace moequant::formats
