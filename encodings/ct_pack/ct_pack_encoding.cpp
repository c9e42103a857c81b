// compressed-tensors `pack-quantized` INT4/INT8 weights read as a source (Kimi-K2-Thinking,
// Kimi-K2.5, and moequant's own GPU checkpoints): gptq-compressed-tensors.md §6,
// model-families-2026.md §2.2. `<m>.weight_packed` I32 [N, ceil(K·b/32)] holds u = code + 2^(b-1)
// LSB first along K; `<m>.weight_scale` [N, K/gs] (group) or [N, 1] (channel);
// `<m>.weight_shape` I64 [2] = [N, K] (checked at decode); `<m>.weight_g_idx` I32 [K] with
// actorder "group". w[n][k] = (u − 2^(b−1)) × s[n][g(k)]: exact in float32, not always in BF16.
#include "ct_pack_scheme.hpp"
#include "encoding_rules.hpp"

#include <moequant/checked_math.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/plugin.hpp>

#include <array>
#include <cstring>
#include <vector>

namespace moequant::encodings {
namespace {

constexpr std::string_view component_suffixes[] = {".weight_packed", ".weight_scale", ".weight_shape", ".weight_g_idx",
                                                   ".weight_zero_point"};

template <class T>
T element(const TensorView& v, std::size_t i) {  // an unaligned element of a view
    T x;
    std::memcpy(&x, v.data() + i * sizeof(T), sizeof(T));
    return x;
}

// For each byte of 4-bit codes: the values of its low and high nibble, u - 8.
const std::array<std::array<float, 2>, 256>& nibble_pairs() {
    static const auto table = [] {
        std::array<std::array<float, 2>, 256> t{};
        for (int b = 0; b < 256; ++b) t[static_cast<std::size_t>(b)] = {static_cast<float>((b & 0xF) - 8), static_cast<float>((b >> 4) - 8)};
        return t;
    }();
    return table;
}

class CtPackEncoding final : public SourceEncoding {
public:
    std::string_view id() const override { return "ct-pack"; }
    std::string_view description() const override {
        return "compressed-tensors pack-quantized INT4/INT8 (symmetric, group or channel, optional g_idx)";
    }
    std::vector<std::string> input_types() const override { return {"int4", "int8"}; }

    std::optional<std::string> weight_of(const TensorInfo& tensor) const override {
        for (std::string_view suffix : component_suffixes)
            if (auto stem = strip_suffix(tensor.name, suffix)) return *stem + ".weight";
        return std::nullopt;
    }

    int recognise(std::string_view name, const Checkpoint& checkpoint, const ModelConfig* config,
                  EncodedWeight& out) const override {
        auto module = strip_suffix(name, ".weight");
        if (!module) return 0;
        const std::string packed = *module + ".weight_packed", scale = *module + ".weight_scale";
        if (!checkpoint.contains(packed)) return 0;
        const TensorInfo& p = checkpoint.info(packed);
        if (p.dtype != DType::I32) return 0;  // U8 weight_packed is mxfp4-pack-quantized: another plugin's
        const auto scheme = pack_scheme(checkpoint, config, *module, packed);
        if (!scheme) return 0;
        if (checkpoint.contains(*module + ".weight_zero_point"))
            refuse(checkpoint, *module + ".weight_zero_point", "is a zero point; asymmetric packed weights are not read as a source",
                   "UnsupportedEncoding");
        if (p.shape.size() != 2) refuse(checkpoint, packed, "has shape " + shape_to_string(p.shape) + "; [N, K·bits/32] expected", "ShapeMismatch");
        if (!checkpoint.contains(scale)) refuse(checkpoint, packed, "has no scale tensor " + scale, "MissingScale");
        const TensorInfo& s = checkpoint.info(scale);
        if (s.dtype != DType::BF16 && s.dtype != DType::F16 && s.dtype != DType::F32)
            refuse(checkpoint, scale, "has dtype " + std::string(dtype_name(s.dtype)) + "; BF16, F16 or F32 expected", "UnsupportedDtype");
        const std::int64_t n = p.shape[0];
        const std::int64_t k = checked_mul(p.shape[1], std::int64_t{32 / scheme->bits}, "the packed weight's columns",
                                           {.file = file_of(checkpoint, packed), .tensor = packed});
        const std::int64_t groups = scheme->group ? k / scheme->group_size + (k % scheme->group_size != 0) : 1;
        if (s.shape != Shape{n, groups})
            refuse(checkpoint, scale,
                   "has shape " + shape_to_string(s.shape) + ", but " + packed + " " + shape_to_string(p.shape) + " (K = " +
                       std::to_string(k) + ") with " + (scheme->group ? "group size " + std::to_string(scheme->group_size) : std::string("channel scales")) +
                       " needs " + shape_to_string({n, groups}),
               "ScaleShapeMismatch");
        out.shape = {n, k};
        out.input_type = scheme->bits == 4 ? "int4" : "int8";
        out.tensors = {{"packed", packed}, {"scale", scale}};
        if (checkpoint.contains(*module + ".weight_shape")) {
            const TensorInfo& ws = checkpoint.info(*module + ".weight_shape");
            if ((ws.dtype != DType::I64 && ws.dtype != DType::I32) || ws.shape != Shape{2})
                refuse(checkpoint, ws.name, "has " + std::string(dtype_name(ws.dtype)) + " " + shape_to_string(ws.shape) + "; I64 [2] expected",
                       "ShapeMismatch");
            out.tensors.emplace_back("shape", ws.name);
        }
        if (checkpoint.contains(*module + ".weight_g_idx")) {
            const TensorInfo& g = checkpoint.info(*module + ".weight_g_idx");
            if (g.dtype != DType::I32 || g.shape != Shape{k})
                refuse(checkpoint, g.name, "has " + std::string(dtype_name(g.dtype)) + " " + shape_to_string(g.shape) + "; I32 " +
                                               shape_to_string({k}) + " expected", "ShapeMismatch");
            out.tensors.emplace_back("g_idx", g.name);
        }
        out.parameters.set("bits", std::to_string(scheme->bits));
        out.parameters.set("strategy", scheme->group ? "group" : "channel");
        if (scheme->group) out.parameters.set("group_size", std::to_string(scheme->group_size));
        out.parameters.set("scale_dtype", std::string(dtype_name(s.dtype)));
        out.summary = "compressed-tensors INT" + std::to_string(scheme->bits) + ", " +
                      (scheme->group ? "group " + std::to_string(scheme->group_size) : std::string("per-channel")) + " " +
                      std::string(dtype_name(s.dtype)) + " scales" + (out.tensor("g_idx").empty() ? "" : ", act-order g_idx");
        return 20;
    }

    void decode(const Checkpoint& checkpoint, const EncodedWeight& w, const DecodeWindow& window, DecodeTarget target,
                std::span<std::byte> out) const override {
        const int bits = static_cast<int>(w.parameters.get_int("bits", 4));
        const std::int64_t n = w.shape[0], k = w.shape[1];
        check_recorded_shape(checkpoint, w, n, k);
        const TensorView packed = checkpoint.view(w.tensor("packed"));
        const TensorView scale = checkpoint.view(w.tensor("scale"));
        const auto groups = static_cast<std::size_t>(scale.shape[1]);
        const std::vector<std::int32_t> group_of = column_groups(checkpoint, w, k, static_cast<std::int64_t>(groups));
        const std::size_t row_bytes = static_cast<std::size_t>(packed.shape[1]) * 4;
        const int offset = 1 << (bits - 1);
        const auto width = static_cast<std::size_t>(window.cols());
        const auto c0 = static_cast<std::size_t>(window.col_begin);
        std::vector<float> row_scale(groups), column_scale(width), values(width);
        const std::size_t out_row = width * decode_target_bytes(target);
        const std::size_t scale_row_bytes = groups * dtype_bits(scale.dtype) / 8;
        std::size_t i = 0;
        for (std::int64_t r = window.row_begin; r < window.row_end; r += window.row_step, ++i) {
            decode_to_f32(TensorView{scale.dtype, {static_cast<std::int64_t>(groups)},
                                     scale.bytes.subspan(static_cast<std::size_t>(r) * scale_row_bytes, scale_row_bytes)},
                          row_scale);
            for (std::size_t j = 0; j < width; ++j) column_scale[j] = row_scale[static_cast<std::size_t>(group_of[c0 + j])];
            // The little-endian byte view of the words: 4-bit element c is nibble c % 2 of byte
            // c / 2, 8-bit element c is byte c (gptq-compressed-tensors.md §6.3).
            const auto* bytes = reinterpret_cast<const std::uint8_t*>(packed.data()) + static_cast<std::size_t>(r) * row_bytes;
            if (bits == 4) {
                std::size_t j = 0;
                if (c0 % 2 == 1) {  // a window starting on a high nibble
                    values[0] = static_cast<float>((bytes[c0 >> 1] >> 4) - offset) * column_scale[0];
                    j = 1;
                }
                // Two codes per byte through a table of both nibbles' values (codes - 8).
                const auto& table = nibble_pairs();
                for (; j + 1 < width; j += 2) {
                    const auto& pair = table[bytes[(c0 + j) >> 1]];
                    values[j] = pair[0] * column_scale[j];
                    values[j + 1] = pair[1] * column_scale[j + 1];
                }
                if (j < width) values[j] = static_cast<float>((bytes[(c0 + j) >> 1] & 0xF) - offset) * column_scale[j];
            } else {
                for (std::size_t j = 0; j < width; ++j) values[j] = static_cast<float>(bytes[c0 + j] - offset) * column_scale[j];
            }
            std::byte* dst = out.data() + i * out_row;
            if (target == DecodeTarget::f32) std::memcpy(dst, values.data(), width * 4);
            else convert_f32_to_bf16(values.data(), dst, width);
        }
    }

private:
    // weight_shape, when present, must say [N, K]: a checkpoint that padded K would otherwise
    // decode the padding as weights.
    static void check_recorded_shape(const Checkpoint& checkpoint, const EncodedWeight& w, std::int64_t n, std::int64_t k) {
        const std::string& name = w.tensor("shape");
        if (name.empty()) return;
        const TensorView v = checkpoint.view(name);
        const std::int64_t a = v.dtype == DType::I64 ? element<std::int64_t>(v, 0) : element<std::int32_t>(v, 0);
        const std::int64_t b = v.dtype == DType::I64 ? element<std::int64_t>(v, 1) : element<std::int32_t>(v, 1);
        if (a != n || b != k)
            refuse(checkpoint, name,
                   "records shape [" + std::to_string(a) + "," + std::to_string(b) + "], but the packed words hold " +
                       shape_to_string({n, k}),
                   "ShapeMismatch", "padded or truncated packed weights are not supported");
    }

    // The scale column of every input column: k / group_size, or weight_g_idx (act-order),
    // every entry checked to name a stored group.
    static std::vector<std::int32_t> column_groups(const Checkpoint& checkpoint, const EncodedWeight& w, std::int64_t k,
                                                   std::int64_t groups) {
        std::vector<std::int32_t> out(static_cast<std::size_t>(k));
        const std::string& g_idx = w.tensor("g_idx");
        if (g_idx.empty()) {
            const std::int64_t size = w.parameters.get_int("group_size", k);
            for (std::int64_t c = 0; c < k; ++c) out[static_cast<std::size_t>(c)] = static_cast<std::int32_t>(size > 0 ? c / size : 0);
            return out;
        }
        const TensorView v = checkpoint.view(g_idx);
        std::memcpy(out.data(), v.data(), out.size() * 4);
        for (std::int64_t c = 0; c < k; ++c)
            if (out[static_cast<std::size_t>(c)] < 0 || out[static_cast<std::size_t>(c)] >= groups)
                refuse(checkpoint, g_idx,
                       "gives column " + std::to_string(c) + " group " + std::to_string(out[static_cast<std::size_t>(c)]) +
                           ", outside the " + std::to_string(groups) + " groups of the scales",
                       "InvalidGroupIndex");
        return out;
    }
};

}  // namespace
}  // namespace moequant::encodings

MOEQUANT_PLUGIN("ct_pack", "1.0.0", MOEQUANT_KIND_ENCODING, "compressed-tensors pack-quantized INT4/INT8 weights") {
    registrar.add(std::make_unique<moequant::encodings::CtPackEncoding>());
}
