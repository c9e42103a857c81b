// The rotary-embedding keys llama.cpp's converter writes for every text model
// (TextModel.__init__ / set_gguf_parameters, 2026): it resolves the rope parameters
// (transformers v5's rope_parameters, else rope_scaling; a "full_attention" entry when there is
// one) with the config's global rope_theta, type, partial_rotary_factor and
// original_max_position_embeddings mirrored in, then writes the scaling (linear: type and
// factor; yarn: type, factor, original context, ext/attn factors, beta_fast/slow), the M-RoPE
// sections, rope.freq_base and the sliding layers' freq_base_swa.
#pragma once

#include "gguf_container.hpp"

#include <moequant/model_config.hpp>

#include <optional>
#include <string>
#include <vector>

namespace moequant::formats {

// Appends the keys above to `kv` (named "<arch>.rope.…"). Error(input) naming the config for a
// scaling llama.cpp would not compute from these keys (longrope, llama3, dynamic, an unknown
// type) and for yarn without original_max_position_embeddings.
void add_rope_keys(const std::string& arch, const ModelConfig& config, std::vector<GgufKeyValue>& kv);

// A number among the resolved rope parameters (e.g. "mscale_all_dim", "partial_rotary_factor").
std::optional<double> rope_parameter(const ModelConfig& config, const std::string& name);

}  // namespace moequant::formats
