// FP8 E4M3 (and E5M2) weights with block, per-channel or per-tensor scales
// (model-families.md §4, model-families-2026.md §2.3): w = bf16_rne(f32(q) x s), one float32
// multiply; the scale always multiplies, whatever "_inv" says. Per-channel and per-tensor
// scaling run through the SDK's block kernel as blocks of [1, K] and [N, K].
#include "encoding_rules.hpp"
#include "fp8_scales.hpp"
#include "mx_block_scale.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/plugin.hpp>

#include <cstring>
#include <vector>

namespace moequant::encodings {
namespace {

// The scale as the 2-D tensor the block kernel reads: [N, 1] per channel, [1, 1] per tensor.
TensorView kernel_scale(const Checkpoint& checkpoint, const EncodedWeight& w, Fp8Strategy strategy) {
    TensorView s = checkpoint.view(w.tensor("scale"));
    if (strategy == Fp8Strategy::channel) s.shape = {w.shape[0], 1};
    if (strategy == Fp8Strategy::tensor) s.shape = {1, 1};
    return s;
}

Fp8Strategy strategy_of(const EncodedWeight& w) {
    const std::string s = w.parameters.get_string("strategy", "block");
    return s == "channel" ? Fp8Strategy::channel : s == "tensor" ? Fp8Strategy::tensor : Fp8Strategy::block;
}

BlockSize block_of(const EncodedWeight& w) {
    return {w.parameters.get_int("block_rows", 128), w.parameters.get_int("block_cols", 128)};
}

class Fp8Encoding final : public SourceEncoding {
public:
    std::string_view id() const override { return "fp8"; }
    std::string_view description() const override {
        return "FP8 E4M3/E5M2 with block, per-channel or per-tensor scales (F32, BF16 or E8M0)";
    }
    std::vector<std::string> input_types() const override { return {"fp8"}; }

    std::optional<std::string> weight_of(const TensorInfo& tensor) const override { return fp8_scale_owner(tensor); }

    int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config,
                  EncodedWeight& out) const override {
        const TensorInfo* fp8 = fp8_weight(checkpoint, name);
        if (!fp8) return 0;
        const TensorInfo& info = *fp8;
        const std::string weight(name);
        if (mx_block_scale(checkpoint, weight) || announces_mxfp8(config)) return 0;  // MXFP8: the mxfp8 encoding's
        const Fp8Scaling scaling = fp8_scaling(checkpoint, config, weight, info);
        const TensorInfo& scale = checkpoint.info(scaling.scale_tensor);
        out.shape = info.shape;
        out.input_type = "fp8";
        out.tensors = {{"weight", weight}, {"scale", scaling.scale_tensor}};
        if (scaling.input_scale) out.ignored.push_back(*scaling.input_scale);
        out.parameters.set("format", info.dtype == DType::F8_E4M3 ? "e4m3" : "e5m2");
        out.parameters.set("strategy", std::string(strategy_name(scaling.strategy)));
        out.parameters.set("block_rows", std::to_string(scaling.block.rows));
        out.parameters.set("block_cols", std::to_string(scaling.block.cols));
        out.parameters.set("scale_dtype", std::string(dtype_name(scale.dtype)));
        const std::string kind = info.dtype == DType::F8_E4M3 ? "FP8 E4M3" : "FP8 E5M2";
        const std::string scale_text = std::string(dtype_name(scale.dtype));
        switch (scaling.strategy) {
            case Fp8Strategy::block:
                out.summary = kind + ", " + std::to_string(scaling.block.rows) + "x" + std::to_string(scaling.block.cols) +
                              " block " + scale_text + " scales";
                break;
            case Fp8Strategy::channel: out.summary = kind + ", per-channel " + scale_text + " scales"; break;
            case Fp8Strategy::tensor: out.summary = kind + ", per-tensor " + scale_text + " scale"; break;
        }
        return 20;
    }

    void decode(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) const override {
        const Fp8Strategy strategy = strategy_of(w);
        const BlockSize block = block_of(w);
        const TensorView weight = checkpoint.view(w.primary());
        const TensorView scale = kernel_scale(checkpoint, w, strategy);
        check_fp8_block_inputs(weight, scale, block, {.tensor = w.name});
        const auto cols = static_cast<std::size_t>(w.shape[1]);
        const auto width = static_cast<std::size_t>(window.cols());
        const bool whole_rows = window.col_begin == 0 && width == cols;
        if (target == DecodeTarget::bf16 && whole_rows && window.row_step == 1) {  // the common case: one kernel call
            dequantize_fp8_block_rows(weight, scale, block, window.row_begin, window.row_end,
                                      {reinterpret_cast<std::uint16_t*>(out.data()), out.size() / 2});
            return;
        }
        std::vector<float> scales(static_cast<std::size_t>(scale.elements()));
        decode_to_f32(scale, scales);
        const auto scale_cols = static_cast<std::size_t>(scale.shape[1]);
        std::vector<float> row(cols);
        std::vector<std::uint16_t> row_bf16(cols);
        const std::size_t out_row = width * decode_target_bytes(target);
        std::size_t i = 0;
        for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i) {
            std::byte* dst = out.data() + i * out_row;
            if (target == DecodeTarget::bf16) {
                dequantize_fp8_block_rows(weight, scale, block, r, r + 1, row_bf16);
                std::memcpy(dst, row_bf16.data() + window.col_begin, width * 2);
                continue;
            }
            const TensorView codes{weight.dtype, {static_cast<std::int64_t>(cols)},
                                   weight.bytes.subspan(static_cast<std::size_t>(r) * cols, cols)};
            decode_to_f32(codes, row);
            const float* s = scales.data() + static_cast<std::size_t>(r / block.rows) * scale_cols;
            auto* f = reinterpret_cast<float*>(dst);
            for (std::size_t j = 0; j < width; ++j) {
                const std::size_t c = static_cast<std::size_t>(window.col_begin) + j;
                f[j] = row[c] * s[c / static_cast<std::size_t>(block.cols)];
            }
        }
    }
};

}  // namespace
}  // namespace moequant::encodings

MOEQUANT_PLUGIN("fp8", "1.0.0", MOEQUANT_KIND_ENCODING, "FP8 weights with block, per-channel or per-tensor scales") {
    registrar.add(std::make_unique<moequant::encodings::Fp8Encoding>());
}
