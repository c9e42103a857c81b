// The skeleton every first-party family's synthetic checkpoint shares, written once: the
// tokenizer and its side files, config.json from the sizes every MoE family has, then the token
// embedding, the decoder layers, the final norm and the output head, sharded. A family
// contributes its sizes, names and the tensors of one layer (model-families.md §1).
#pragma once

#include "family_rules.hpp"
#include "synth_side_files.hpp"
#include "synth_writer.hpp"

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace moequant::adapters {

namespace json = boost::json;  // the synthetic configs are JSON throughout

// The sizes every synthetic MoE family has; a family's preset adds its own. Presets list them
// in this order: {hidden, layers, experts, top_k, expert_intermediate, heads, kv_heads, head_dim, vocab}.
struct SynthSizes {
    std::int64_t hidden = 0, layers = 0, experts = 0, top_k = 0, expert_intermediate = 0, heads = 0, kv_heads = 0;
    std::int64_t head_dim = 0;  // 0: config.json leaves it out (the family derives it)
    std::int64_t vocab = 0;
};

// What config.json says the model is: model_type and the one architectures entry (none when
// empty, as in a VLM's text_config).
struct ConfigIdentity {
    std::string model_type, architecture;
};

// base_config() plus the identity and the sizes: hidden_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim (when set), num_experts_per_tok, and the
// expert count and size under the family's own key names (the first of `keys`).
boost::json::object family_config(const SynthTokenizer& tokenizer, SynthEncoding encoding, const SynthSizes& sizes,
                                  const ExpertSizeKeys& keys, const ConfigIdentity& identity);

// One family checkpoint: what write_family_checkpoint() writes around the family's own layers.
struct FamilyCheckpoint {
    SynthTokenizer tokenizer;
    boost::json::value config;
    std::int64_t hidden = 0;
    // Rows of the embedding and the head; 0: the tokenizer's size. A released model's table is
    // padded beyond its tokenizer (DeepSeek-V3: 129280 rows), more ids than the embedded text
    // can train a tokenizer for.
    std::int64_t vocab = 0;
    std::string root = "model.";                   // holds "embed_tokens.weight", "layers.<L>.", "norm.weight"
    std::string embedding = "embed_tokens.weight";  // under root
    std::string head = "lm_head.weight";            // not under root
    std::int64_t layers = 0;                        // decoder layers written, MTP layers included
    // The tensors of layer `layer`, whose names start with `prefix` ("<root>layers.<L>.").
    std::function<void(std::vector<SynthTensor>& t, const std::string& prefix, std::int64_t layer)> layer;
    // Tensors outside the language model's stack: before the embedding (a vision tower) and
    // after the head (MTP modules, a vision tower). Optional.
    std::function<void(std::vector<SynthTensor>& t)> before_embedding, after_head;
    std::size_t shard_count = 1;
    // Shard file names: "model-00001-of-00005.safetensors" unless the family names them otherwise.
    std::function<std::string(std::size_t number, std::size_t count)> shard_name = [](std::size_t n, std::size_t c) {
        return padded_shard_name(n, c, 5, 5);
    };
    std::optional<SynthEncoding> encoding;  // how quantizable tensors are stored; default: the settings'
    bool fp8_power_of_two_scales = false;
};

// Writes `checkpoint` into `directory` (which must exist); deterministic for given settings.
void write_family_checkpoint(const FamilyCheckpoint& checkpoint, const std::filesystem::path& directory,
                             const SynthSettings& settings);

}  // namespace moequant::adapters
