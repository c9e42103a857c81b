// The tensors a format copies beside the quantized experts, and how: weights in a non-plain
// encoding (FP8, INT4, ...) are decoded to BF16 on the CPU and their side tensors dropped,
// everything else keeps its dtype and bytes; MTP layers and rotary buffers are never copied (conventions.md §4).
// Header-only, shared by the format modules.
#pragma once

#include <moequant/error.hpp>
#include <moequant/expert_matrix.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/safetensors_writer.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <optional>
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

// True when a weight is stored in a non-plain encoding (FP8, INT4, MXFP4, ...): copies of it
// are decoded to BF16.
inline bool is_encoded(const EncodedWeight& w) {
    return w.input_type != "bf16" && w.input_type != "fp16" && w.input_type != "fp32";
}

// The name a stored tensor is copied under: its own, or for the primary tensor of an encoded
// weight the weight's name (`x.weight_packed` -> `x.weight`); nullopt for the other tensors of
// an encoded weight (scales, zero points, input_scale), which the decoded copy folds in.
inline std::optional<std::string> copied_name(const Checkpoint& source, const std::string& tensor) {
    const EncodedWeight* w = source.weight_holding(tensor);
    if (!w || !is_encoded(*w)) return tensor;
    if (tensor != w->primary()) return std::nullopt;
    return w->name;
}

// The tensors a BF16 copy of the checkpoint holds, in plan order: every tensor whose role
// `keep` accepts, except MTP layers, rotary buffers and what encoded weights fold in; encoded
// weights appear under their weight names.
template <class Keep>
std::vector<std::string> copied_tensors(const Checkpoint& source, const ModelPlan& plan, const Keep& keep) {
    std::vector<std::string> out;
    for (const auto& [name, role] : plan.roles) {
        if (role == TensorRole::skipped_mtp || role == TensorRole::skipped_buffer || !keep(role)) continue;
        if (auto copied = copied_name(source, name)) out.push_back(*copied);
    }
    return out;
}

// A fused (3-D) encoded weight [E, R, K] (gpt-oss's MXFP4 experts) is copied as transformers
// dequantizes it: each expert's matrix transposed, [E, K, R] (its convert_moe_packed_tensors
// ends with a transpose of the last two dimensions, model-families-2026.md §2.1).
inline Shape copied_shape(const EncodedWeight& w) {
    if (w.shape.size() != 3) return w.shape;
    return {w.shape[0], w.shape[2], w.shape[1]};
}

// The spec a copied tensor gets: BF16 with the weight's shape for encoded weights (fused ones
// transposed, copied_shape()), its own dtype and shape otherwise.
inline TensorSpec copied_spec(const Checkpoint& source, const std::string& name) {
    if (source.contains(name)) {
        const EncodedWeight* w = source.weight_holding(name);
        if (!w || !is_encoded(*w)) {
            const TensorInfo& info = source.info(name);
            return {name, info.dtype, info.shape};
        }
    }
    return {name, DType::BF16, copied_shape(source.weight(name))};
}

// Writes one copied tensor: plain tensors streamed from the mmap, encoded weights decoded to
// BF16 one matrix at a time.
inline void write_copied(SafetensorsWriter& writer, const Checkpoint& source, const std::string& name) {
    if (source.contains(name)) {
        const EncodedWeight* w = source.weight_holding(name);
        if (!w || !is_encoded(*w)) {
            writer.write(name, source.view(name));
            return;
        }
    }
    const EncodedWeight& w = source.weight(name);
    if (w.shape.size() == 2) {
        writer.write(name, decode_matrix(source, w).view());
        return;
    }
    Tensor all(DType::BF16, copied_shape(w));
    const std::size_t rows = static_cast<std::size_t>(w.shape[1]), cols = static_cast<std::size_t>(w.shape[2]);
    for (std::int64_t m = 0; m < w.shape[0]; ++m) {
        const Tensor one = decode_matrix(source, w, m);  // [R, K]
        std::byte* out = all.data() + static_cast<std::size_t>(m) * rows * cols * 2;
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t k = 0; k < cols; ++k) std::memcpy(out + (k * rows + r) * 2, one.data() + (r * cols + k) * 2, 2);
    }
    writer.write(name, all.view());
}

}  // namespace moequant::formats
