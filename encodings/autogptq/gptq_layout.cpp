#include "gptq_layout.hpp"

#include "encoding_rules.hpp"

#include <moequant/checked_math.hpp>

namespace moequant::encodings {
namespace {

// A tensor GPTQ needs beside qweight; its absence is refused with `code`.
const TensorInfo& required(const Checkpoint& checkpoint, const std::string& qweight, const std::string& tensor,
                           const std::string& what, const std::string& code) {
    if (!checkpoint.contains(tensor))
        refuse(checkpoint, qweight, "is GPTQ packed words, but its " + what + " tensor " + tensor + " is missing", code);
    return checkpoint.info(tensor);
}

}  // namespace

GptqLayout gptq_layout(const Checkpoint& checkpoint, const std::string& stem, const GptqConfig& config) {
    GptqLayout out;
    out.qweight = stem + ".qweight";
    out.qzeros = stem + ".qzeros";
    out.scales = stem + ".scales";
    const TensorInfo& packed = checkpoint.info(out.qweight);
    if (packed.dtype != DType::I32)
        refuse(checkpoint, out.qweight,
               "is " + std::string(dtype_name(packed.dtype)) + "; GPTQ qweight must be I32 words of eight 4-bit codes",
               "UnsupportedDtype");
    if (packed.shape.size() != 2 || packed.shape[0] < 1 || packed.shape[1] < 1)
        refuse(checkpoint, out.qweight,
               "has shape " + shape_to_string(packed.shape) + "; GPTQ qweight must be a non-empty [K/8, N] matrix",
               "ShapeMismatch");
    out.out_features = packed.shape[1];
    out.in_features = checked_mul<std::int64_t>(packed.shape[0], 8, "GPTQ in-features (8 x qweight rows)",
                                                {.file = file_of(checkpoint, out.qweight), .tensor = out.qweight});
    checked_mul<std::int64_t>(out.in_features, out.out_features, "GPTQ weight elements",
                              {.file = file_of(checkpoint, out.qweight), .tensor = out.qweight});
    if (out.out_features % 8 != 0)
        refuse(checkpoint, out.qweight,
               "has " + std::to_string(out.out_features) +
                   " output features, not a multiple of 8: its zero points cannot fill whole qzeros words",
               "ShapeMismatch");
    out.group = config.group_size == -1 ? out.in_features : config.group_size;
    out.groups = out.in_features / out.group + (out.in_features % out.group != 0);
    const std::string why = "K = " + std::to_string(out.in_features) + " input features, group_size " +
                            std::to_string(config.group_size) + ", " + std::to_string(out.groups) + " groups";

    const TensorInfo& scales = required(checkpoint, out.qweight, out.scales, "scale", "MissingScale");
    if (scales.dtype != DType::F16 && scales.dtype != DType::BF16 && scales.dtype != DType::F32)
        refuse(checkpoint, out.scales,
               "has dtype " + std::string(dtype_name(scales.dtype)) + "; GPTQ scales must be F16, BF16 or F32",
               "UnsupportedDtype");
    out.scale_dtype = scales.dtype;
    expect_shape(checkpoint, out.scales, {out.groups, out.out_features}, out.qweight, why);

    const TensorInfo& zeros = required(checkpoint, out.qweight, out.qzeros, "zero-point", "MissingZeros");
    if (zeros.dtype != DType::I32)
        refuse(checkpoint, out.qzeros,
               "is " + std::string(dtype_name(zeros.dtype)) + "; GPTQ qzeros must be I32 words of eight 4-bit zero points",
               "UnsupportedDtype");
    expect_shape(checkpoint, out.qzeros, {out.groups, out.out_features / 8}, out.qweight, why);

    if (const std::string g_idx = stem + ".g_idx"; checkpoint.contains(g_idx)) {
        const TensorInfo& info = checkpoint.info(g_idx);
        if (info.dtype != DType::I32)
            refuse(checkpoint, g_idx, "is " + std::string(dtype_name(info.dtype)) + "; GPTQ g_idx must be I32",
                   "UnsupportedDtype");
        if (info.shape != Shape{out.in_features})
            refuse(checkpoint, g_idx,
                   "has shape " + shape_to_string(info.shape) + ", but " + describe(checkpoint, out.qweight) + " holds " +
                       std::to_string(out.in_features) + " input features (8 per qweight row)",
                   "ShapeMismatch");
        out.g_idx = g_idx;
    } else if (config.desc_act) {
        refuse(checkpoint, out.qweight,
               "is act-order GPTQ (desc_act true), but its group index " + g_idx + " is missing", "MissingGroupIndex");
    }
    return out;
}

}  // namespace moequant::encodings
