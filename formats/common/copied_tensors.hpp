// The tensors a format copies beside the quantized experts, and how: FP8 block-scaled weights
// are dequantized to BF16 on the CPU and their `*_scale_inv` dropped, everything else keeps its
// dtype and bytes; MTP layers and rotary buffers are never copied (conventions.md §4).
// Header-only, shared by the format modules.
#pragma once

#include <moequant/error.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/safetensors_writer.hpp>

#include <charconv>
#include <set>
#include <string>
#include <vector>

namespace moequant::formats {

// The decoder layer a tensor belongs to ("...layers.{L}." anywhere in the name), or -1.
inline std::int64_t layer_of(const std::string& name) {
    for (std::size_t p = name.find("layers."); p != std::string::npos; p = name.find("layers.", p + 1)) {
        if (p > 0 && name[p - 1] != '.') continue;
        const char* begin = name.data() + p + 7;
        std::int64_t layer = -1;
        auto [end, ec] = std::from_chars(begin, name.data() + name.size(), layer);
        if (ec == std::errc() && end != begin && *end == '.') return layer;
    }
    return -1;
}

// An FP8 weight with its block scale beside it.
inline bool is_fp8_weight(const Checkpoint& source, const std::string& name) {
    return source.info(name).dtype == DType::F8_E4M3 && source.contains(name + "_scale_inv");
}

// The tensors a BF16 copy of the checkpoint holds, in plan order: every tensor whose role
// `keep` accepts, except MTP layers, rotary buffers and the scales folded into FP8 weights.
template <class Keep>
std::vector<std::string> copied_tensors(const Checkpoint& source, const ModelPlan& plan, const Keep& keep) {
    std::set<std::string> names;
    for (const auto& [name, role] : plan.roles) names.insert(name);
    std::vector<std::string> out;
    for (const auto& [name, role] : plan.roles) {
        if (role == TensorRole::skipped_mtp || role == TensorRole::skipped_buffer || !keep(role)) continue;
        if (name.ends_with("_scale_inv")) {
            const std::string weight = name.substr(0, name.size() - 10);
            if (names.count(weight) && source.info(weight).dtype == DType::F8_E4M3) continue;  // folded in
        }
        out.push_back(name);
    }
    return out;
}

// The spec a copied tensor gets: BF16 for FP8 weights, its own dtype otherwise.
inline TensorSpec copied_spec(const Checkpoint& source, const std::string& name) {
    const TensorInfo& info = source.info(name);
    return {name, is_fp8_weight(source, name) ? DType::BF16 : info.dtype, info.shape};
}

// Writes one copied tensor (streamed from the mmap, FP8 dequantized one tensor at a time).
inline void write_copied(SafetensorsWriter& writer, const Checkpoint& source, const ModelPlan& plan,
                         const std::string& name) {
    if (!is_fp8_weight(source, name)) {
        writer.write(name, source.view(name));
        return;
    }
    if (!plan.fp8_block)
        throw Error(ErrorKind::input, "is FP8 but the config has no quantization_config.weight_block_size",
                    {.tensor = name, .code = "MissingBlockSize"});
    Tensor bf16 = dequantize_fp8_block(source.view(name), source.view(name + "_scale_inv"), *plan.fp8_block, {.tensor = name});
    writer.write(name, bf16.view());
}

}  // namespace moequant::formats
