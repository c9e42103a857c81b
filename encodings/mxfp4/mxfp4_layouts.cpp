#include "mxfp4_layouts.hpp"

#include "encoding_rules.hpp"
#include "mxfp4_rows.hpp"

#include <moequant/checked_math.hpp>

namespace moequant::encodings {
namespace {

bool is_code_byte(DType d) { return d == DType::U8 || d == DType::I8; }
bool is_scale_byte(DType d) { return d == DType::F8_E8M0 || d == DType::U8; }

std::string described(const TensorInfo& t) {
    return t.name + " " + std::string(dtype_name(t.dtype)) + " " + shape_to_string(t.shape);
}

// F4 is what DeepSeek's reference declares in memory; on disk only I8 is known, and in what
// order an F4-typed header would count the nibbles is not established (§2.1).
[[noreturn]] void refuse_f4(const Checkpoint& checkpoint, const TensorInfo& t) {
    refuse(checkpoint, t.name,
           "is MXFP4 stored with dtype F4 " + shape_to_string(t.shape) +
               "; moequant reads MXFP4 codes packed two per I8 or U8 byte (even column in the low nibble)",
           "UnsupportedDtype", "only I8/U8-packed MXFP4 (DeepSeek-V4, gpt-oss) is supported");
}

[[noreturn]] void refuse_empty(const Checkpoint& checkpoint, const TensorInfo& t) {
    refuse(checkpoint, t.name, "is an MXFP4 weight without elements (" + described(t) + ")", "EmptyWeight");
}

std::int64_t columns_of(const Checkpoint& checkpoint, const TensorInfo& t, std::int64_t groups, std::int64_t per_group) {
    return checked_mul(groups, per_group, "MXFP4 columns", {.file = file_of(checkpoint, t.name), .tensor = t.name});
}

void describe(EncodedWeight& out, Shape shape, const TensorInfo& packed, const TensorInfo& scale, const std::string& layout,
              const std::string& where) {
    out.shape = std::move(shape);
    out.input_type = "mxfp4";
    out.tensors = {{"packed", packed.name}, {"scale", scale.name}};
    out.parameters.set("layout", layout);
    out.parameters.set("block", std::to_string(mxfp4_block));
    out.parameters.set("packed_dtype", std::string(dtype_name(packed.dtype)));
    out.parameters.set("scale_dtype", std::string(dtype_name(scale.dtype)));
    out.summary = "MXFP4 E2M1, " + std::to_string(mxfp4_block) + "-element E8M0 blocks (" + where + ")";
    out.stored_bytes = packed.size_bytes() + scale.size_bytes();
}

}  // namespace

std::optional<std::string> mxfp4_component_owner(const TensorInfo& tensor) {
    if (auto x = strip_suffix(tensor.name, "_blocks"))
        if (tensor.shape.size() == 4 && (is_code_byte(tensor.dtype) || tensor.dtype == DType::F4)) return x;
    if (auto x = strip_suffix(tensor.name, "_scales"))
        if (tensor.shape.size() == 3 && is_scale_byte(tensor.dtype)) return x;
    if (auto stem = strip_suffix(tensor.name, ".scale"))
        if (tensor.shape.size() == 2 && is_scale_byte(tensor.dtype)) return *stem + ".weight";
    if (auto stem = strip_suffix(tensor.name, ".weight_packed"))
        if (tensor.shape.size() == 2 && tensor.dtype == DType::U8) return *stem + ".weight";
    return std::nullopt;
}

bool recognise_deepseek_v4(std::string_view name, const Checkpoint& checkpoint, EncodedWeight& out) {
    const auto stem = strip_suffix(name, ".weight");
    if (!stem || !checkpoint.contains(name) || !checkpoint.contains(*stem + ".scale")) return false;
    const TensorInfo& packed = checkpoint.info(name);
    const TensorInfo& scale = checkpoint.info(*stem + ".scale");
    if (packed.dtype == DType::F4) refuse_f4(checkpoint, packed);
    // FP8 weights carry the same `.scale` sibling: only bytes of codes with bytes of scales are ours.
    if (!is_code_byte(packed.dtype) || !is_scale_byte(scale.dtype)) return false;
    if (packed.shape.size() != 2 || scale.shape.size() != 2)
        refuse(checkpoint, packed.name,
               "is " + described(packed) + " with the E8M0 scale " + described(scale) +
                   "; MXFP4 weights of this layout are [N, K/2] bytes with [N, K/32] scales",
               "ScaleShapeMismatch");
    const std::int64_t n = packed.shape[0], k = columns_of(checkpoint, packed, packed.shape[1], 2);
    if (n == 0 || k == 0) refuse_empty(checkpoint, packed);
    if (k % mxfp4_block != 0)
        refuse(checkpoint, packed.name,
               "is " + described(packed) + ", so K = " + std::to_string(k) + ", which is not a multiple of the " +
                   std::to_string(mxfp4_block) + "-element MXFP4 block (scale " + described(scale) + ")",
               "ScaleShapeMismatch");
    const Shape expected{n, k / mxfp4_block};
    if (scale.shape != expected)
        refuse(checkpoint, scale.name,
               "has shape " + shape_to_string(scale.shape) + ", but the MXFP4 weight " + described(packed) + " (K = " +
                   std::to_string(k) + ") needs one scale per 32 elements: " + shape_to_string(expected),
               "ScaleShapeMismatch");
    describe(out, {n, k}, packed, scale, "deepseek-v4", "DeepSeek-V4, " + std::string(dtype_name(packed.dtype)) + " packed");
    return true;
}

bool recognise_gpt_oss(std::string_view name, const Checkpoint& checkpoint, EncodedWeight& out) {
    const std::string blocks_name = std::string(name) + "_blocks", scales_name = std::string(name) + "_scales";
    const bool has_blocks = checkpoint.contains(blocks_name), has_scales = checkpoint.contains(scales_name);
    if (!has_blocks && !has_scales) return false;
    if (!has_scales) {  // a half alone is ours only when it looks like one
        const TensorInfo& blocks = checkpoint.info(blocks_name);
        if (blocks.shape.size() != 4 || !(is_code_byte(blocks.dtype) || blocks.dtype == DType::F4)) return false;
        refuse(checkpoint, blocks_name, "holds MXFP4 blocks, but the checkpoint has no " + scales_name, "MissingScale");
    }
    if (!has_blocks) {
        const TensorInfo& scales = checkpoint.info(scales_name);
        if (scales.shape.size() != 3 || !is_scale_byte(scales.dtype)) return false;
        refuse(checkpoint, scales_name, "holds MXFP4 scales, but the checkpoint has no " + blocks_name, "MissingBlocks");
    }
    const TensorInfo& blocks = checkpoint.info(blocks_name);
    const TensorInfo& scales = checkpoint.info(scales_name);
    if (blocks.dtype == DType::F4) refuse_f4(checkpoint, blocks);
    if (!is_code_byte(blocks.dtype) || !is_scale_byte(scales.dtype)) return false;
    if (blocks.shape.size() != 4 || blocks.shape[3] != mxfp4_block / 2)
        refuse(checkpoint, blocks_name,
               "has shape " + shape_to_string(blocks.shape) + "; MXFP4 blocks are [E, R, K/32, 16] (scales " +
                   described(scales) + ")",
               "BlockShapeMismatch");
    const Shape expected{blocks.shape[0], blocks.shape[1], blocks.shape[2]};
    if (scales.shape != expected)
        refuse(checkpoint, scales_name,
               "has shape " + shape_to_string(scales.shape) + ", but the MXFP4 blocks " + described(blocks) +
                   " need one scale per block: " + shape_to_string(expected),
               "ScaleShapeMismatch");
    const std::int64_t k = columns_of(checkpoint, blocks, blocks.shape[2], mxfp4_block);
    if (blocks.shape[0] == 0 || blocks.shape[1] == 0 || k == 0) refuse_empty(checkpoint, blocks);
    describe(out, {blocks.shape[0], blocks.shape[1], k}, blocks, scales, "gpt-oss", "gpt-oss fused");
    return true;
}

}  // namespace moequant::encodings
