#include "kt_awq_quantizer.hpp"

#include "awq_relayout.hpp"

#include <moequant/checkpoint.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/model_adapter.hpp>

#include <cstring>
#include <string>

namespace moequant::kt_awq {
namespace {

std::int64_t group_count(std::int64_t k, std::int64_t group) { return k / group + (k % group != 0); }

// The stored form of an expert matrix, or an Error(input) naming it when kt's awq method
// cannot carry it (not AWQ, a slice of a fused tensor).
AwqForm form_of(const Checkpoint& checkpoint, const ExpertWeightSource& source) {
    if (source.slice)
        throw Error(ErrorKind::input,
                    "is a slice of a fused expert tensor; kt's awq method reads AutoAWQ's per-expert qweight/qzeros/scales",
                    {.tensor = source.tensor, .code = "NotAwq", .hint = "--quant-method int4 or int8 quantizes this checkpoint"});
    const EncodedWeight& w = checkpoint.weight(source.tensor);
    if (w.encoding != "awq")
        throw Error(ErrorKind::input,
                    "is " + w.summary + "; kt's awq method (kt-awq) re-lays AutoAWQ INT4 checkpoints' words and quantizes nothing",
                    {.tensor = source.tensor, .code = "NotAwq", .hint = "--quant-method int4 or int8 quantizes this checkpoint"});
    AwqForm form;
    form.group = w.parameters.get_int("group", 0);
    const auto dtype = dtype_from_name(w.parameters.get_string("scale_dtype", ""));
    if (form.group <= 0 || !dtype)
        throw Error(ErrorKind::internal, "the awq encoding did not record the group size and scale dtype", {.tensor = source.tensor});
    form.scale_dtype = *dtype;
    return form;
}

float scale_value(const std::byte* scales, DType dtype, std::int64_t index) {
    if (dtype == DType::F32) {
        float v;
        std::memcpy(&v, scales + index * 4, 4);
        return v;
    }
    std::uint16_t bits;
    std::memcpy(&bits, scales + index * 2, 2);
    return dtype == DType::F16 ? f16_to_f32(bits) : bf16_to_f32(bits);
}

}  // namespace

std::string_view KtAwqQuantizer::description() const {
    return "kt-kernel awq method: an AutoAWQ INT4 checkpoint's codes, zero points and scales re-laid column-major, "
           "nothing requantized";
}

Options KtAwqQuantizer::facts() const {
    Options facts;
    facts.set("kt.method", "AWQ");
    facts.set("kt.threadpool_split", "false");  // blk.L.ffn_*_exps.E.{weight,qzeros,scale}
    return facts;
}

Options KtAwqQuantizer::settings() const {
    Options settings;
    if (!bound()) return settings;
    settings.set("group_size", std::to_string(form_.group));
    settings.set("scale_dtype", std::string(dtype_name(form_.scale_dtype)));
    return settings;
}

std::shared_ptr<const Quantizer> KtAwqQuantizer::configure(const Options& options) const {
    // kt's script hands --save-backward-weights only to its AMX methods.
    if (options.get_bool("backward_weights", false))
        throw Error(ErrorKind::usage, "kt-awq has no backward weights: kt-kernel's SFT methods are AMXINT4/AMXINT8");
    return nullptr;
}

std::vector<TensorSpec> KtAwqQuantizer::output_layout(const Shape& m) const {
    if (!bound())
        throw Error(ErrorKind::usage, "kt-awq carries an AWQ source's codes; its layout follows the source's group size",
                    {.hint = "convert an AutoAWQ checkpoint (the host binds kt-awq to it)"});
    if (m.size() != 2 || m[0] <= 0 || m[1] <= 0 || m[0] % 8 != 0 || m[1] % 8 != 0)
        throw Error(ErrorKind::input, "kt's awq layout packs eight values a word along both dimensions; " + shape_to_string(m) +
                                          " is not a multiple of 8 in each",
                    {.code = "ShapeMismatch"});
    const std::int64_t n = m[0], k = m[1], groups = group_count(k, form_.group);
    return {{"weight", DType::I32, {n, k / 8}}, {"qzeros", DType::I32, {groups, n / 8}}, {"scale", form_.scale_dtype, {groups * n}}};
}

QuantizedTensor KtAwqQuantizer::quantize(const TensorView&) const {
    throw Error(ErrorKind::usage, "kt-awq carries an AutoAWQ checkpoint's stored codes; it does not quantize values",
                {.code = "NotAwq", .hint = "convert an AutoAWQ checkpoint, or use --quant-method int4 or int8"});
}

Tensor KtAwqQuantizer::dequantize(const QuantizedTensor& q, const Shape& shape) const {
    const std::vector<TensorSpec> layout = output_layout(shape);
    for (const auto& spec : layout) {
        const Tensor* t = q.part(spec.name);
        if (!t || t->dtype() != spec.dtype || t->shape() != spec.shape)
            throw Error(ErrorKind::input, "the stored '" + spec.name + "' is not " + std::string(dtype_name(spec.dtype)) + " " +
                                              shape_to_string(spec.shape) + " as kt's awq layout has it");
    }
    const std::int64_t n = shape[0], k = shape[1];
    const auto* weight = q.part("weight")->data_as<std::int32_t>();
    const auto* zeros = q.part("qzeros")->data_as<std::int32_t>();
    const std::byte* scales = q.part("scale")->data();
    Tensor out(DType::F32, shape);
    float* w = out.data_as<float>();
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t c = 0; c < k; ++c) {
            const std::int64_t g = c / form_.group;
            const int code = kt_nibble(weight, k, r, c) - kt_nibble(zeros, n, g, r);
            // The awq encoding's value rule: one float32 multiply, then nearest-even BF16.
            w[r * k + c] = bf16_to_f32(f32_to_bf16(static_cast<float>(code) * scale_value(scales, form_.scale_dtype, g * n + r)));
        }
    return out;
}

std::optional<Tensor> KtAwqQuantizer::error_bounds(const QuantizedTensor&, const Shape& shape) const {
    return Tensor(DType::F32, {shape[0], 1});  // zeros: the codes are the source's own
}

std::shared_ptr<const Quantizer> KtAwqQuantizer::bind_source(const Checkpoint& checkpoint, const ExpertWeightSource& source) const {
    return std::make_shared<KtAwqQuantizer>(form_of(checkpoint, source));
}

QuantizedTensor KtAwqQuantizer::carry(const Checkpoint& checkpoint, const ExpertWeightSource& source) const {
    const AwqForm form = form_of(checkpoint, source);
    if (!bound() || form.group != form_.group || form.scale_dtype != form_.scale_dtype)
        throw Error(ErrorKind::input, "is AWQ with group " + std::to_string(form.group) + " and " +
                                          std::string(dtype_name(form.scale_dtype)) + " scales, not the bound form",
                    {.tensor = source.tensor, .code = "MixedStoredForms"});
    const EncodedWeight& w = checkpoint.weight(source.tensor);
    const std::int64_t n = w.shape[0], k = w.shape[1];
    QuantizedTensor out;
    out.method = "AWQ";
    for (auto& spec : output_layout({n, k})) out.parts.emplace_back(spec.name, Tensor::uninitialized(spec.dtype, spec.shape));
    relay_awq_weight(checkpoint.view(w.tensor("packed")).data(), k, n, out.parts[0].second.data_as<std::int32_t>());
    relay_awq_zeros(checkpoint.view(w.tensor("zeros")).data(), group_count(k, form.group), n, out.parts[1].second.data_as<std::int32_t>());
    const TensorView scales = checkpoint.view(w.tensor("scale"));
    std::memcpy(out.parts[2].second.data(), scales.data(), scales.bytes.size());
    return out;
}

}  // namespace moequant::kt_awq
