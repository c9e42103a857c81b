#include "synth_encoded_linear.hpp"

#include "synth_awq.hpp"
#include "synth_gptq.hpp"
#include "synth_int4.hpp"
#include "synth_mxfp4.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace moequant::adapters {
namespace {

namespace json = boost::json;

constexpr std::int64_t int4_group = 32;
constexpr std::int64_t gptq_group = 32;  // Qwen ships 128; synth sizes are multiples of 32
constexpr std::int64_t awq_group = 32;   // AWQ releases ship 128
constexpr std::int64_t mx_block = 32;    // MXFP8: one E8M0 scale per 32 elements of a row

// Kimi-K2 and DeepSeek-V4 encode only their routed experts (the rest stays BF16 / FP8).
bool is_routed_expert(const std::string& name) { return name.find(".experts.") != std::string::npos; }

// `<stem><suffix>` of a `<stem>.weight`.
std::string sibling(const std::string& weight, const std::string& suffix) {
    return weight.substr(0, weight.size() - std::string(".weight").size()) + suffix;
}

Shape scale_shape(const Shape& weight, BlockSize block) {
    return {(weight[0] + block.rows - 1) / block.rows, (weight[1] + block.cols - 1) / block.cols};
}

// DeepSeek-style weight quantization: per block s = max(amax, 1e-4) / 448 in float32 (rounded up
// to a power of two for ue8m0 checkpoints), codes = e4m3(w / s); the stored scale is s (multiply
// to dequantize). A block of [1, K] is per channel.
std::pair<std::vector<std::uint8_t>, std::vector<float>> quantize_fp8(const std::vector<float>& w, const Shape& shape,
                                                                      BlockSize block, bool power_of_two) {
    const std::int64_t rows = shape[0], cols = shape[1];
    const Shape sshape = scale_shape(shape, block);
    std::vector<float> scales(static_cast<std::size_t>(sshape[0] * sshape[1]));
    std::vector<std::uint8_t> codes(w.size());
    for (std::int64_t br = 0; br < sshape[0]; ++br)
        for (std::int64_t bc = 0; bc < sshape[1]; ++bc) {
            const std::int64_t r0 = br * block.rows, r1 = std::min(rows, r0 + block.rows);
            const std::int64_t c0 = bc * block.cols, c1 = std::min(cols, c0 + block.cols);
            float amax = 0;
            for (std::int64_t r = r0; r < r1; ++r)
                for (std::int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(w[static_cast<std::size_t>(r * cols + c)]));
            float s = std::max(amax, 1e-4f) / 448.0f;
            if (power_of_two) s = std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(s))));
            scales[static_cast<std::size_t>(br * sshape[1] + bc)] = s;
            for (std::int64_t r = r0; r < r1; ++r)
                for (std::int64_t c = c0; c < c1; ++c) {
                    const auto i = static_cast<std::size_t>(r * cols + c);
                    codes[i] = f32_to_f8_e4m3(w[i] / s);
                }
        }
    return {std::move(codes), std::move(scales)};
}

// Powers of two 2^(e - 127) as their E8M0 exponent bytes e.
std::vector<std::uint8_t> e8m0_bytes(const std::vector<float>& scales) {
    std::vector<std::uint8_t> bytes(scales.size());
    for (std::size_t i = 0; i < scales.size(); ++i) bytes[i] = static_cast<std::uint8_t>(std::ilogb(scales[i]) + 127);
    return bytes;
}

json::object compressed_tensors_config(json::object weights, json::value inputs, const char* format, json::array ignore) {
    json::object group{{"targets", json::array{"Linear"}}, {"weights", std::move(weights)},
                       {"input_activations", std::move(inputs)}, {"output_activations", nullptr}};
    return json::object{{"quant_method", "compressed-tensors"},
                        {"format", format},
                        {"quantization_status", "compressed"},
                        {"config_groups", json::object{{"group_0", std::move(group)}}},
                        {"ignore", std::move(ignore)},
                        {"kv_cache_scheme", nullptr}};
}

}  // namespace

std::vector<TensorSpec> encoded_linear_specs(SynthEncoding encoding, BlockSize fp8_block, const std::string& name,
                                             const Shape& shape) {
    if (shape.size() != 2) throw Error(ErrorKind::internal, "quantizable synth tensors must be 2-D", {.tensor = name});
    const std::int64_t n = shape[0], k = shape[1];
    switch (encoding) {
        case SynthEncoding::bf16: return {{name, DType::BF16, shape}};
        case SynthEncoding::fp8_block:
            return {{name, DType::F8_E4M3, shape}, {name + "_scale_inv", DType::F32, scale_shape(shape, fp8_block)}};
        case SynthEncoding::fp8_block_e8m0:
            return {{name, DType::F8_E4M3, shape}, {sibling(name, ".scale"), DType::F8_E8M0, scale_shape(shape, fp8_block)}};
        case SynthEncoding::fp8_channel: {
            std::vector<TensorSpec> out{{name, DType::F8_E4M3, shape}, {name + "_scale", DType::BF16, {n, 1}}};
            if (name.ends_with(".weight")) out.push_back({sibling(name, ".input_scale"), DType::F32, {1}});
            return out;
        }
        case SynthEncoding::mxfp8:
            return {{name, DType::F8_E4M3, shape}, {name + "_scale_inv", DType::U8, {n, k / mx_block}}};
        case SynthEncoding::int4_ct:
            if (!is_routed_expert(name)) return {{name, DType::BF16, shape}};
            return {{sibling(name, ".weight_packed"), DType::I32, {n, k / 8}},
                    {sibling(name, ".weight_scale"), DType::BF16, {n, k / int4_group}},
                    {sibling(name, ".weight_shape"), DType::I64, {2}}};
        case SynthEncoding::mxfp4:
            if (!is_routed_expert(name)) return {{name, DType::BF16, shape}};
            return {{name, DType::I8, {n, k / 2}}, {sibling(name, ".scale"), DType::F8_E8M0, {n, k / 32}}};
        case SynthEncoding::gptq:
            return {{sibling(name, ".qweight"), DType::I32, {k / 8, n}},
                    {sibling(name, ".qzeros"), DType::I32, {k / gptq_group, n / 8}},
                    {sibling(name, ".scales"), DType::F16, {k / gptq_group, n}},
                    {sibling(name, ".g_idx"), DType::I32, {k}}};
        case SynthEncoding::awq:
            return {{sibling(name, ".qweight"), DType::I32, {k, n / 8}},
                    {sibling(name, ".qzeros"), DType::I32, {k / awq_group, n / 8}},
                    {sibling(name, ".scales"), DType::F16, {k / awq_group, n}}};
    }
    return {};
}

std::vector<std::uint8_t> encoded_linear_bytes(SynthEncoding encoding, BlockSize fp8_block, const Shape& shape,
                                               const TensorSpec& spec, const std::vector<float>& values,
                                               bool power_of_two_scales) {
    if (spec.dtype == DType::BF16 && spec.shape == shape) return bf16_bytes(values);  // a linear left unquantized
    const std::string& name = spec.name;
    switch (encoding) {
        case SynthEncoding::bf16: return bf16_bytes(values);
        case SynthEncoding::fp8_block:
        case SynthEncoding::fp8_channel: {
            if (name.ends_with(".input_scale")) return f32_bytes({0.0125f});  // static activation scale: never read
            const BlockSize block = encoding == SynthEncoding::fp8_channel ? BlockSize{1, shape[1]} : fp8_block;
            auto [codes, scales] = quantize_fp8(values, shape, block, power_of_two_scales);
            if (spec.dtype == DType::F8_E4M3) return codes;
            return spec.dtype == DType::BF16 ? bf16_bytes(scales) : f32_bytes(scales);
        }
        case SynthEncoding::mxfp8: {
            auto [codes, scales] = quantize_fp8(values, shape, {1, mx_block}, /*power_of_two=*/true);
            return spec.dtype == DType::F8_E4M3 ? codes : e8m0_bytes(scales);
        }
        case SynthEncoding::fp8_block_e8m0: {
            auto [codes, scales] = quantize_fp8(values, shape, fp8_block, /*power_of_two=*/true);
            return spec.dtype == DType::F8_E4M3 ? codes : e8m0_bytes(scales);
        }
        case SynthEncoding::int4_ct: {
            if (name.ends_with(".weight_shape")) {
                const std::int64_t dims[2] = {shape[0], shape[1]};
                return {reinterpret_cast<const std::uint8_t*>(dims), reinterpret_cast<const std::uint8_t*>(dims) + 16};
            }
            PackedInt4 packed = pack_int4_groups(values, shape, int4_group);
            return name.ends_with(".weight_scale") ? std::move(packed.scales) : std::move(packed.words);
        }
        case SynthEncoding::mxfp4: {
            PackedMxfp4 packed = pack_mxfp4(values, shape);
            return spec.dtype == DType::F8_E8M0 ? std::move(packed.scales) : std::move(packed.codes);
        }
        case SynthEncoding::gptq: {
            PackedGptq packed = pack_gptq(values, shape, gptq_group);
            if (name.ends_with(".qweight")) return std::move(packed.qweight);
            if (name.ends_with(".qzeros")) return std::move(packed.qzeros);
            if (name.ends_with(".scales")) return std::move(packed.scales);
            return std::move(packed.g_idx);
        }
        case SynthEncoding::awq: {
            PackedAwq packed = pack_awq(values, shape, awq_group);
            if (name.ends_with(".qweight")) return std::move(packed.qweight);
            if (name.ends_with(".qzeros")) return std::move(packed.qzeros);
            return std::move(packed.scales);
        }
    }
    return {};
}

json::value quantization_config(SynthEncoding encoding) {
    switch (encoding) {
        case SynthEncoding::bf16:
        case SynthEncoding::mxfp4: return nullptr;  // DeepSeek-V4 announces its experts with expert_dtype
        case SynthEncoding::fp8_block:
            return json::object{{"activation_scheme", "dynamic"},
                                {"fmt", "e4m3"},
                                {"quant_method", "fp8"},
                                {"weight_block_size", json::array{128, 128}}};
        case SynthEncoding::fp8_block_e8m0:  // as DeepSeek-V4-Flash's config.json has it
            return json::object{{"activation_scheme", "dynamic"},
                                {"fmt", "e4m3"},
                                {"quant_method", "fp8"},
                                {"scale_fmt", "ue8m0"},
                                {"weight_block_size", json::array{128, 128}}};
        case SynthEncoding::mxfp8:  // the adapter adds the release's ignored_layers
            return json::object{{"activation_scheme", "dynamic"}, {"quant_method", "mxfp8"},
                                {"weight_block_size", json::array{1, mx_block}}};
        case SynthEncoding::fp8_channel:
            return compressed_tensors_config(
                json::object{{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "channel"},
                             {"dynamic", false}, {"group_size", nullptr}, {"actorder", nullptr}, {"observer", "minmax"}},
                json::object{{"num_bits", 8}, {"type", "float"}, {"symmetric", true}, {"strategy", "tensor"},
                             {"dynamic", false}, {"observer", "minmax"}},
                "float-quantized", json::array{"lm_head"});
        case SynthEncoding::int4_ct:
            return compressed_tensors_config(
                json::object{{"num_bits", 4}, {"type", "int"}, {"symmetric", true}, {"strategy", "group"},
                             {"group_size", int4_group}, {"dynamic", false}, {"actorder", nullptr}, {"observer", "minmax"}},
                nullptr, "pack-quantized",
                json::array{"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"});
        case SynthEncoding::gptq:
            return json::object{{"quant_method", "gptq"},     {"bits", 4},          {"group_size", gptq_group},
                                {"desc_act", false},          {"sym", true},        {"damp_percent", 0.01},
                                {"true_sequential", true},    {"static_groups", false}, {"checkpoint_format", "gptq"}};
        case SynthEncoding::awq:  // as transformers' AwqConfig writes it
            return json::object{{"quant_method", "awq"}, {"bits", 4}, {"group_size", awq_group},
                                {"zero_point", true},    {"version", "gemm"}, {"modules_to_not_convert", nullptr}};
    }
    return nullptr;
}

std::vector<std::uint8_t> bf16_bytes(const std::vector<float>& values) {
    std::vector<std::uint8_t> out(values.size() * 2);
    convert_f32_to_bf16(values.data(), out.data(), values.size());  // the scalar rule's bits, vectorised
    return out;
}

std::vector<std::uint8_t> f16_bytes(const std::vector<float>& values) {
    std::vector<std::uint8_t> out(values.size() * 2);
    convert_f32_to_f16(values.data(), out.data(), values.size());
    return out;
}

std::vector<std::uint8_t> f32_bytes(const std::vector<float>& values) {
    std::vector<std::uint8_t> out(values.size() * 4);
    if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
}

}  // namespace moequant::adapters
