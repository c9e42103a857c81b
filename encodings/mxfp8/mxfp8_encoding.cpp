// MXFP8 weights (OCP Microscaling; MiniMax-M3's release, docs/encodings.md): FP8 codes (E4M3,
// or E5M2) with one E8M0 scale byte per 32 consecutive elements of a row, stored as
// `<w>` F8_E4M3 [N, K] and `<w>_scale_inv` U8 or F8_E8M0 [N, K/32]. Despite "_inv" the scale
// multiplies: w = bf16_rne(f32(code) x 2^(e-127)), the fp8 encoding's rule, exact in float32.
// Refused where a decoded window meets them: NaN (and E5M2 infinity) codes, which kt's AMX
// kernels would read as +-480 and transformers as NaN; the NaN scale byte 255; scale bytes that
// overflow BF16 for the format's largest code (above 246 for E4M3, 239 for E5M2).
#include "encoding_rules.hpp"
#include "mx_block_scale.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/plugin.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

namespace moequant::encodings {
namespace {

struct CodeFormat {
    const char* name;
    int largest_exponent;  // of the format's largest finite value (448 = 1.75 x 2^8, 57344 = 1.75 x 2^15)
    std::array<float, 256> values;  // every code through the SDK's one definition
};

CodeFormat code_table(const char* name, int largest_exponent, float (*decode)(std::uint8_t) noexcept) {
    CodeFormat f{name, largest_exponent, {}};
    for (unsigned b = 0; b < 256; ++b) f.values[b] = decode(static_cast<std::uint8_t>(b));
    return f;
}
const CodeFormat e4m3 = code_table("E4M3", 8, &f8_e4m3_to_f32);
const CodeFormat e5m2 = code_table("E5M2", 15, &f8_e5m2_to_f32);

const CodeFormat& code_format(const EncodedWeight& w) { return w.parameters.get_string("format", "e4m3") == "e5m2" ? e5m2 : e4m3; }

// 127 + 127 - largest_exponent: the largest byte whose scale keeps every code below BF16's
// (and float32's) largest finite value.
int largest_scale_byte(const CodeFormat& f) { return 254 - f.largest_exponent; }

std::string block_text(const EncodedWeight& w, std::int64_t row, std::int64_t block) {
    return "block " + std::to_string(block) + " (columns " + std::to_string(block * mx_block) + ".." +
           std::to_string((block + 1) * mx_block - 1) + ") of row " + std::to_string(row) + " of weight " + w.name;
}

class Mxfp8Encoding final : public SourceEncoding {
public:
    std::string_view id() const override { return "mxfp8"; }
    std::string_view description() const override {
        return "MXFP8: FP8 E4M3/E5M2 with an E8M0 scale per 32 elements of a row (MiniMax-M3)";
    }
    std::vector<std::string> input_types() const override { return {"mxfp8"}; }

    std::optional<std::string> weight_of(const TensorInfo& tensor) const override { return strip_suffix(tensor.name, "_scale_inv"); }

    int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config,
                  EncodedWeight& out) const override {
        const TensorInfo* fp8 = fp8_weight(checkpoint, name);
        if (!fp8) return 0;
        const TensorInfo& info = *fp8;
        const std::string weight(name);
        const auto scale = mx_block_scale(checkpoint, weight);
        if (!scale) {
            if (announces_mxfp8(config) && checkpoint.contains(weight + "_scale_inv"))
                refuse(checkpoint, weight + "_scale_inv",
                       "does not hold MXFP8 scales for " + describe(checkpoint, weight) + ": expected U8 or F8_E8M0 " +
                           (info.shape.size() == 2 && info.shape[1] % mx_block == 0
                                ? shape_to_string({info.shape[0], info.shape[1] / mx_block})
                                : std::string("[N, K/32] with K a multiple of 32")) +
                           ", got " + describe(checkpoint, weight + "_scale_inv"),
                       "ScaleShapeMismatch");
            return 0;
        }
        const bool is_e4m3 = info.dtype == DType::F8_E4M3;
        out.shape = info.shape;
        out.input_type = "mxfp8";
        out.tensors = {{"weight", weight}, {"scale", *scale}};
        out.parameters.set("format", is_e4m3 ? "e4m3" : "e5m2");
        out.parameters.set("block", std::to_string(mx_block));
        out.parameters.set("scale_dtype", std::string(dtype_name(checkpoint.info(*scale).dtype)));
        out.summary = std::string("MXFP8 ") + (is_e4m3 ? "E4M3" : "E5M2") + ", " + std::to_string(mx_block) +
                      "-element E8M0 blocks";
        return 25;  // above fp8's 20: an FP8 weight with MX scales is this encoding's
    }

    void decode(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) const override {
        const TensorView codes = checkpoint.view(w.primary());
        const TensorView scale = checkpoint.view(w.tensor("scale"));
        const std::int64_t rows = w.shape[0], cols = w.shape[1], row_blocks = cols / mx_block;
        if (codes.size_bytes() != static_cast<std::uint64_t>(rows * cols) ||
            scale.size_bytes() != static_cast<std::uint64_t>(rows * row_blocks))
            throw Error(ErrorKind::internal, "MXFP8 tensors do not match the weight's shape " + shape_to_string(w.shape),
                        {.tensor = w.name, .plugin = "mxfp8"});
        const std::int64_t width = window.cols();
        if (window.rows() == 0 || width == 0) return;
        const CodeFormat& format = code_format(w);
        const auto* code_bytes = reinterpret_cast<const std::uint8_t*>(codes.data());
        const auto* scale_bytes = reinterpret_cast<const std::uint8_t*>(scale.data());
        std::vector<float> values(static_cast<std::size_t>(width));
        const std::size_t out_row = static_cast<std::size_t>(width) * decode_target_bytes(target);
        std::size_t i = 0;
        for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i) {
            const std::uint8_t* row_codes = code_bytes + r * cols;
            const std::uint8_t* row_scales = scale_bytes + r * row_blocks;
            // Block by block: each scale byte is checked and widened once.
            for (std::int64_t c0 = window.col_begin; c0 < window.col_end;) {
                const std::int64_t block = c0 / mx_block, c1 = std::min(window.col_end, (block + 1) * mx_block);
                check_scale(checkpoint, w, format, r, block, row_scales[block]);
                const float s = f8_e8m0_to_f32(row_scales[block]);
                for (std::int64_t c = c0; c < c1; ++c) {
                    const float code = format.values[row_codes[c]];
                    if (!std::isfinite(code)) refuse_code(checkpoint, w, format, r, c, row_codes[c]);
                    values[static_cast<std::size_t>(c - window.col_begin)] = code * s;
                }
                c0 = c1;
            }
            std::byte* dst = out.data() + i * out_row;
            if (target == DecodeTarget::f32) std::memcpy(dst, values.data(), values.size() * sizeof(float));
            else convert_f32_to_bf16(values.data(), dst, values.size());
        }
    }

private:
    static void check_scale(const Checkpoint& checkpoint, const EncodedWeight& w, const CodeFormat& format, std::int64_t row,
                            std::int64_t block, std::uint8_t e) {
        if (e == 0xFF)
            refuse(checkpoint, w.tensor("scale"), "holds the NaN scale byte 255 at " + block_text(w, row, block), "NaNScale",
                   "the shard is damaged or not MXFP8");
        if (e > largest_scale_byte(format))
            refuse(checkpoint, w.tensor("scale"),
                   "holds the scale byte " + std::to_string(e) + " (2^" + std::to_string(e - 127) + ") at " +
                       block_text(w, row, block) + ", which overflows BF16 for the largest " + format.name +
                       " codes; MXFP8 " + format.name + " scale bytes above " +
                       std::to_string(largest_scale_byte(format)) + " are refused",
                   "ScaleOverflow", "the shard is damaged or not MXFP8");
    }

    [[noreturn]] static void refuse_code(const Checkpoint& checkpoint, const EncodedWeight& w, const CodeFormat& format,
                                         std::int64_t row, std::int64_t col, std::uint8_t code) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", code);
        refuse(checkpoint, w.primary(),
               "holds the " + std::string(format.name) + " code " + hex + " (not a finite number) at row " +
                   std::to_string(row) + ", column " + std::to_string(col) + " of weight " + w.name,
               "NaNWeight", "the shard is damaged; kt-kernel would multiply it as +-480, transformers as NaN");
    }
};

}  // namespace
}  // namespace moequant::encodings

MOEQUANT_PLUGIN("mxfp8", "1.0.0", MOEQUANT_KIND_ENCODING, "MXFP8 weights (FP8 with E8M0 scales per 32 elements)") {
    registrar.add(std::make_unique<moequant::encodings::Mxfp8Encoding>());
}
