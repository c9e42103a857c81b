#include "fp8_scales.hpp"

#include "encoding_rules.hpp"

#include <moequant/checked_math.hpp>

#include <vector>

namespace moequant::encodings {
namespace {

std::int64_t blocks(std::int64_t extent, std::int64_t block) { return extent / block + (extent % block != 0); }

// The strategy config.json announces, if it announces one: `quant_method: fp8` with a
// weight_block_size is block; compressed-tensors float-quantized groups name theirs.
std::optional<Fp8Strategy> declared_strategy(const ModelConfig* config, std::optional<BlockSize>& block,
                                             const Checkpoint& checkpoint, const std::string& weight) {
    auto q = quantization_config(config);
    if (!q) return std::nullopt;
    if (auto b = q->get("weight_block_size"); b && !b->is_null()) {
        auto v = b->as_int_array();
        if (v.size() != 2 || v[0] <= 0 || v[1] <= 0)
            throw Error(ErrorKind::input, "'" + b->path() + "' must be two positive integers, got " + b->to_json(),
                        {.file = config->source(), .code = "InvalidConfig"});
        block = BlockSize{v[0], v[1]};
    }
    const std::string method = string_member(*q, "quant_method");
    if (method == "fp8") return block ? std::optional(Fp8Strategy::block) : std::nullopt;
    if (method != "compressed-tensors") return std::nullopt;
    auto groups = q->get("config_groups");
    if (!groups || !groups->is_object()) return std::nullopt;
    std::optional<std::string> strategy;
    for (const auto& key : groups->keys()) {
        auto w = groups->get(key)->get("weights");
        if (!w || !w->is_object() || string_member(*w, "type") != "float") continue;
        const std::string s = string_member(*w, "strategy");
        if (strategy && *strategy != s) return std::nullopt;  // groups differ: the shape decides
        strategy = s;
    }
    if (!strategy) return std::nullopt;
    if (*strategy == "channel") return Fp8Strategy::channel;
    if (*strategy == "tensor") return Fp8Strategy::tensor;
    if (*strategy == "block")
        refuse(checkpoint, weight,
               "is compressed-tensors FP8 with the block strategy, whose block_structure moequant does not read yet",
               "UnsupportedEncoding", "convert the checkpoint with a per-channel or per-tensor scheme, or use its BF16 release");
    refuse(checkpoint, weight, "is compressed-tensors FP8 with strategy '" + *strategy + "', which moequant cannot decode",
           "UnsupportedEncoding");
}

}  // namespace

std::string_view strategy_name(Fp8Strategy s) noexcept {
    switch (s) {
        case Fp8Strategy::block: return "block";
        case Fp8Strategy::channel: return "channel";
        case Fp8Strategy::tensor: return "tensor";
    }
    return "block";
}

std::optional<std::string> fp8_scale_owner(const TensorInfo& tensor) {
    if (auto w = strip_suffix(tensor.name, "_scale_inv")) return w;
    if (auto w = strip_suffix(tensor.name, ".weight_scale")) return *w + ".weight";
    if (auto w = strip_suffix(tensor.name, ".input_scale")) return *w + ".weight";
    // DeepSeek-V4's block scales; a 1-D `.scale` is a norm weight (gpt-oss original/).
    if (tensor.shape.size() == 2)
        if (auto w = strip_suffix(tensor.name, ".scale")) return *w + ".weight";
    return std::nullopt;
}

Fp8Scaling fp8_scaling(const Checkpoint& checkpoint, const ModelConfig* config, const std::string& weight,
                       const TensorInfo& info) {
    Fp8Scaling out;
    std::vector<std::string> candidates{weight + "_scale_inv", weight + "_scale"};
    if (auto stem = strip_suffix(weight, ".weight")) candidates.push_back(*stem + ".scale");
    std::vector<std::string> present;
    for (const auto& c : candidates)
        if (checkpoint.contains(c)) present.push_back(c);
    if (present.empty())
        refuse(checkpoint, weight,
               "is " + std::string(dtype_name(info.dtype)) + " but its scale tensor is missing (looked for " + candidates[0] +
                   ", " + candidates[1] + (candidates.size() > 2 ? ", " + candidates[2] : "") + ")",
               "MissingScale");
    if (present.size() > 1)
        refuse(checkpoint, weight, "has two scale tensors, " + present[0] + " and " + present[1] + "; refusing to pick one",
               "AmbiguousScale");
    out.scale_tensor = present.front();
    if (auto stem = strip_suffix(weight, ".weight"); stem && checkpoint.contains(*stem + ".input_scale"))
        out.input_scale = *stem + ".input_scale";

    if (info.shape.size() != 2)
        refuse(checkpoint, weight, "is FP8 with shape " + shape_to_string(info.shape) + "; only 2-D FP8 weights are supported",
               "UnsupportedEncoding");
    const TensorInfo& scale = checkpoint.info(out.scale_tensor);
    if (scale.dtype != DType::F32 && scale.dtype != DType::BF16 && scale.dtype != DType::F8_E8M0)
        refuse(checkpoint, out.scale_tensor,
               "has dtype " + std::string(dtype_name(scale.dtype)) + "; FP8 scales must be F32, BF16 or F8_E8M0",
               "UnsupportedDtype");

    const std::int64_t n = info.shape[0], k = info.shape[1];
    std::optional<BlockSize> block;
    const auto declared = declared_strategy(config, block, checkpoint, weight);
    const Shape& s = scale.shape;
    std::optional<Fp8Strategy> found;
    if (block && s == Shape{blocks(n, block->rows), blocks(k, block->cols)}) found = Fp8Strategy::block;
    else if (s == Shape{n} || s == Shape{n, 1}) found = Fp8Strategy::channel;
    else if (s.empty() || s == Shape{1}) found = Fp8Strategy::tensor;

    if (!found) {
        std::string expected = shape_to_string({n}) + " or " + shape_to_string({n, 1}) + " (per channel), [] or [1] (per tensor)";
        if (block)
            expected = shape_to_string({blocks(n, block->rows), blocks(k, block->cols)}) + " (block " +
                       shape_to_string({block->rows, block->cols}) + "), " + expected;
        const std::string hint = s.size() == 4   ? "4-D (ModelOpt) block scales are not supported"
                                 : !block && s.size() == 2 ? "block scales need quantization_config.weight_block_size in config.json"
                                                           : "";
        refuse(checkpoint, out.scale_tensor,
               "has shape " + shape_to_string(s) + ", which fits no FP8 scaling of weight " + shape_to_string(info.shape) +
                   " (expected " + expected + ")",
               !block && s.size() == 2 ? "MissingBlockSize" : "ScaleShapeMismatch", hint);
    }
    if (declared && *declared != *found)
        refuse(checkpoint, out.scale_tensor,
               "has shape " + shape_to_string(s) + " (" + std::string(strategy_name(*found)) + " scaling), but config.json declares " +
                   std::string(strategy_name(*declared)) + " scaling",
               "ScaleShapeMismatch");
    out.strategy = *found;
    switch (*found) {
        case Fp8Strategy::block: out.block = *block; break;
        case Fp8Strategy::channel: out.block = {1, std::max<std::int64_t>(k, 1)}; break;
        case Fp8Strategy::tensor: out.block = {std::max<std::int64_t>(n, 1), std::max<std::int64_t>(k, 1)}; break;
    }
    return out;
}

}  // namespace moequant::encodings
