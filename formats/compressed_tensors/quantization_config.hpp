// config.json's `quantization_config` for a compressed-tensors `pack-quantized` checkpoint
// (gptq-compressed-tensors.md §7), and the modules it lists as not quantized.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/options.hpp>

#include <boost/json.hpp>

#include <string>
#include <vector>

namespace moequant::formats {

// The compressed-tensors version whose format we reproduce (conventions.md §4).
inline constexpr const char* compressed_tensors_version = "0.18.0";

// Every Linear module that stays unquantized, by module name (`ignore` lists names, not the
// user's regexes): attention, routers, shared experts and their gate, dense MLPs and lm_head,
// i.e. the 2-D `.weight` tensors of those roles, plus `unquantized_experts` (module names of
// routed experts kept in BF16); per decoder layer in ascending order (attention, dense MLP,
// kept experts, router, shared experts), a VLM's vision tower and projector Linears (role
// other) before them and lm_head last. MTP layers are not listed (never written).
std::vector<std::string> ignored_modules(const ModelPlan& plan, const Checkpoint& source,
                                         const std::vector<std::string>& unquantized_experts);

// The quantization_config object. `settings`: the quantizer's settings() (num_bits, strategy,
// group_size, actorder).
boost::json::object quantization_config(const Options& settings, const std::vector<std::string>& ignore);

}  // namespace moequant::formats
