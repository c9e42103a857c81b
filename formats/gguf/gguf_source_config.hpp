// config.json of a GGUF model read as a checkpoint: the Hugging Face config of its family that
// describes the model llama.cpp computes from the file's metadata — the inverse of the keys the
// gguf format writes (gguf_architecture.cpp), per architecture read (docs/gguf-source.md):
// qwen3moe → qwen3_moe, deepseek2 → deepseek_v3 (sigmoid gating) or deepseek_v2, deepseek32 →
// deepseek_v32, glm-dsa → glm_moe_dsa, llama with
// experts → mixtral, glm4moe → glm4_moe, minimax-m2 → minimax_m2. Another architecture, or a key missing or out of range, is Error(input)
// naming the file and the key (UnsupportedGguf, BadGgufKey).
#pragma once

#include "gguf_container.hpp"

#include <string>

namespace moequant::formats {

// What of the tensors the config depends on (read from the tensor infos, not the data).
struct GgufSourceTensors {
    bool has_output = false;          // output.weight: otherwise the head is the embedding (tied)
    bool has_attention_bias = false;  // blk.*.attn_q.bias
    bool has_qk_norm = false;         // blk.*.attn_q_norm.weight
    bool has_router_bias = false;     // blk.*.exp_probs_b.bias
    std::int64_t vocab_rows = 0;      // token_embd's rows
    std::vector<std::int64_t> dense_layers;  // layers with ffn_gate.weight and no stacked experts
};

// The config.json text; `file` names the first part in messages.
std::string gguf_source_config(const GgufFile& first, const GgufSourceTensors& tensors, const std::string& file);

}  // namespace moequant::formats
