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

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moequant::formats {

// What the converter makes of a checkpoint weight beyond renaming it (qwen3next's gated delta-net
// tensors, its zero-centred norms, Qwen3.5's value heads in tiled order): one GGUF tensor, of some
// of the weight's rows, its columns reordered, or its values changed as torch changes them in float32.
struct GgufTensorTransform {
    std::string gguf_name;
    std::vector<std::int64_t> rows;  // the weight's rows (over its last dimension) in output order; empty: all, as stored
    std::vector<std::int64_t> cols;  // the columns (last dimension) each row keeps, in output order; empty: all, as stored
    bool squeeze = false;            // dimensions of 1 dropped (a conv1d [C, 1, K] becomes [C, K])
    enum class Values { as_stored, plus_one, negative_exp } values = Values::as_stored;
};

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
    // The tensors a checkpoint weight of `shape` becomes when the converter does more than rename
    // it; empty (or no function) for a weight tensor_name() maps as stored.
    std::function<std::vector<GgufTensorTransform>(const std::string& checkpoint_name, const std::vector<std::int64_t>& shape)> transforms;
    // The gpt2 vocabulary may come from tiktoken.model where the folder has no tokenizer.json
    // (Kimi-K2's release: DeepseekV2Model.set_vocab's "kimi-k2" path, gguf_tiktoken_vocab.hpp).
    bool tiktoken_fallback = false;
    // Special tokens the converter names by their text ({type, content}, GgufVocabRequest).
    std::vector<std::pair<std::string, std::string>> named_specials;
    // The converter's type of each tensor follows what the checkpoint stores, whatever its outtype
    // (DeepseekV4Model.tensor_force_quant): block FP8 as Q8_0, F32 as F32, BF16 as BF16, an
    // integer table as I32 (gguf_plan.cpp). Otherwise its types are TextModel's by name.
    bool types_follow_source = false;
    // GGUF tensors llama.cpp's loader requires that the name mapping alone does not guarantee
    // (DeepSeek-V4's hash tables below num_hash_layers): the plan refuses a checkpoint without them.
    std::vector<std::string> required_tensors;
};

// What of the architecture the user chose: the older deepseek2 layout.
struct GgufArchitectureRequest {
    bool legacy_mla = false;
};

// Whether llama.cpp's converter leaves checkpoint tensor `name` out of the text model's GGUF as a
// multimodal one (a vision tower, a projector: it writes those to a separate mmproj file).
bool gguf_skips_multimodal(const std::string& name);

// The heads whose rows `arch` interleaves in the GGUF tensor `gguf_name`; 0 for none.
std::int64_t gguf_rope_interleave_heads(const GgufArchitecture& arch, const std::string& gguf_name);

// The checkpoint name of GGUF tensor `gguf_name` of architecture `arch` (qwen3moe, deepseek2,
// deepseek32, glm-dsa, llama, glm4moe, minimax-m2: those read as checkpoints), the inverse of tensor_name(); nullopt when it has none (the
// stacked experts and deepseek2's attn_k_b / attn_v_b are the checkpoint reader's own).
std::optional<std::string> gguf_checkpoint_name(const std::string& arch, const std::string& gguf_name);

// The architecture the plan's model maps to. Error(input) naming the model type when GGUF output
// is not written for it (yet), listing the ones that are.
GgufArchitecture gguf_architecture_for(const ModelPlan& plan, const ModelConfig& config, const GgufArchitectureRequest& request = {});

}  // namespace moequant::formats
