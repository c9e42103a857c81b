// Rotary-embedding settings from config.json: transformers 5 writes them under `rope_parameters`
// ({rope_theta, partial_rotary_factor, rope_type, ...}) where older configs have top-level keys.
#pragma once

#include <moequant/model_config.hpp>

#include <string>

namespace moequant::adapters {

// The top-level `key`, else `rope_parameters.<key>`, else `fallback` (null counts as absent).
double rope_setting(const ModelConfig& config, const std::string& key, double fallback);

}  // namespace moequant::adapters
