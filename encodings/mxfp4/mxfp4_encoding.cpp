// MXFP4 weights (model-families-2026.md §2.1): E2M1 nibbles with one E8M0 scale byte per 32
// elements along K, as DeepSeek-V4 (2-D per expert) and gpt-oss (fused 3-D) store them; the
// compressed-tensors variant is recognised and refused. w = LUT[code] x 2^(e-127) in float32,
// exact in float32 and BF16 for scale bytes up to 252; 253 and 254 (overflow) and 255 (NaN)
// are refused where a decoded window meets them.
#include "encoding_rules.hpp"
#include "mxfp4_compressed_tensors.hpp"
#include "mxfp4_layouts.hpp"
#include "mxfp4_rows.hpp"

#include <moequant/checked_math.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/plugin.hpp>

#include <cstring>
#include <vector>

namespace moequant::encodings {
namespace {

// Names the scale tensor, the expert (fused weights), the row and the block: what a user needs
// to find the byte.
[[noreturn]] void refuse_scale(const Checkpoint& checkpoint, const EncodedWeight& w, std::int64_t matrix, std::int64_t row,
                               std::int64_t block, std::uint8_t byte) {
    const std::string where = "block " + std::to_string(block) + " (columns " + std::to_string(block * mxfp4_block) + ".." +
                              std::to_string((block + 1) * mxfp4_block - 1) + ") of row " + std::to_string(row) +
                              (w.shape.size() == 3 ? " of expert " + std::to_string(matrix) : std::string()) +
                              " of weight " + w.name;
    if (byte == 0xFF)
        refuse(checkpoint, w.tensor("scale"), "holds the NaN scale byte 255 at " + where, "NaNScale",
               "the shard is damaged or not MXFP4");
    const int magnitude = byte == 253 ? 4 : 2;  // the smallest |code| whose product leaves float32 and BF16
    refuse(checkpoint, w.tensor("scale"),
           "holds the scale byte " + std::to_string(byte) + " (2^" + std::to_string(byte - 127) + ") at " + where +
               ", which overflows float32 and BF16 for elements of magnitude " + std::to_string(magnitude) +
               " or more; MXFP4 scale bytes above " + std::to_string(mxfp4_largest_scale) + " are refused",
           "ScaleOverflow", "the shard is damaged or not MXFP4");
}

class Mxfp4Encoding final : public SourceEncoding {
public:
    std::string_view id() const override { return "mxfp4"; }
    std::string_view description() const override {
        return "MXFP4: E2M1 nibbles with an E8M0 scale per 32 elements (DeepSeek-V4, gpt-oss)";
    }
    std::vector<std::string> input_types() const override { return {"mxfp4"}; }

    std::optional<std::string> weight_of(const TensorInfo& tensor) const override { return mxfp4_component_owner(tensor); }

    int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config,
                  EncodedWeight& out) const override {
        refuse_compressed_tensors_mxfp4(name, checkpoint, config);
        if (recognise_deepseek_v4(name, checkpoint, out) || recognise_gpt_oss(name, checkpoint, out)) return 30;
        return 0;
    }

    void decode(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) const override {
        const TensorView packed = checkpoint.view(w.primary());
        const TensorView scale = checkpoint.view(w.tensor("scale"));
        const std::int64_t rows = w.shape[w.shape.size() - 2], cols = w.shape.back();
        const std::int64_t matrices = w.shape.size() == 3 ? w.shape[0] : 1;
        const std::int64_t row_bytes = cols / 2, row_blocks = cols / mxfp4_block;
        const std::int64_t stored_rows = checked_mul(matrices, rows, "MXFP4 rows", {.tensor = w.name});
        if (packed.size_bytes() != static_cast<std::uint64_t>(checked_mul(stored_rows, row_bytes, "MXFP4 bytes")) ||
            scale.size_bytes() != static_cast<std::uint64_t>(checked_mul(stored_rows, row_blocks, "MXFP4 scales")))
            throw Error(ErrorKind::internal, "MXFP4 tensors do not match the weight's shape " + shape_to_string(w.shape),
                        {.tensor = w.name, .plugin = "mxfp4"});
        const std::int64_t width = window.cols();
        if (window.rows() == 0 || width == 0) return;
        const auto* codes = reinterpret_cast<const std::uint8_t*>(packed.data());
        const auto* scales = reinterpret_cast<const std::uint8_t*>(scale.data());
        const std::int64_t first_block = window.col_begin / mxfp4_block, last_block = (window.col_end - 1) / mxfp4_block;
        std::vector<float> values(static_cast<std::size_t>(width));
        const std::size_t out_row = static_cast<std::size_t>(width) * decode_target_bytes(target);
        std::size_t i = 0;
        for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i) {
            const std::int64_t stored = window.matrix * rows + r;
            const std::uint8_t* row_scales = scales + stored * row_blocks;
            if (auto bad = first_refused_block(row_scales, first_block, last_block))
                refuse_scale(checkpoint, w, window.matrix, r, *bad, row_scales[*bad]);
            decode_mxfp4_row(codes + stored * row_bytes, row_scales, window.col_begin, window.col_end, values.data());
            std::byte* dst = out.data() + i * out_row;
            if (target == DecodeTarget::f32) std::memcpy(dst, values.data(), values.size() * sizeof(float));
            else convert_f32_to_bf16(values.data(), dst, values.size());
        }
    }
};

}  // namespace
}  // namespace moequant::encodings

MOEQUANT_PLUGIN("mxfp4", "1.0.0", MOEQUANT_KIND_ENCODING, "MXFP4 weights (E2M1 with E8M0 block scales)") {
    registrar.add(std::make_unique<moequant::encodings::Mxfp4Encoding>());
}
