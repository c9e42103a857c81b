// Which compressed-tensors quantization scheme applies to a module (gptq-compressed-tensors.md
// §6–§7, model-families-2026.md §2.2): the config group whose targets name it, and whether its
// weight arguments are ones moequant decodes exactly.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/model_config.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace moequant::encodings {

struct PackScheme {
    int bits = 4;                 // 4 or 8
    bool group = true;            // group strategy (else channel: one scale per row)
    std::int64_t group_size = 0;  // for the group strategy
    std::string actorder;         // null/"static"/"group"/"weight" as written (g_idx only for "group")
};

// The pack-quantized scheme of module `module` (its `.weight` minus the suffix), or nullopt
// when the config is not compressed-tensors pack-quantized. Refuses (Error(input) naming
// `tensor`) schemes it cannot decode exactly: asymmetric, non-int, bits other than 4 and 8,
// dynamic weights, or several groups that could all apply.
std::optional<PackScheme> pack_scheme(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& module,
                                      const std::string& tensor);

}  // namespace moequant::encodings
