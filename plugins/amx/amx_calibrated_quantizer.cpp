#include "amx_calibrated_quantizer.hpp"

#include "fixed_scale_gptq.hpp"

namespace moequant::amx {

namespace {

// kt-kernel's row scale rule of each method, and the step a scale d decodes to (INT4 codes
// decode as q * 16 d).
gptq::RowScaleRule rule_of(Method method) {
    if (method == Method::int8) return {[](float amax) { return kt_row_scale(Method::int8, amax); }, 1.0f};
    return {[](float amax) { return kt_row_scale(Method::int4, amax); }, 16.0f};
}

gptq::Scheme scheme_of(Method method, const gptq::FixedScaleSettings& settings) {
    return gptq::fixed_scale_scheme(method == Method::int8 ? 8 : 4, settings);  // -127..127 or -7..7
}

}  // namespace

std::string_view AmxCalibratedQuantizer::id() const { return method_ == Method::int8 ? "amx-int8-gptq" : "amx-int4-gptq"; }

std::string_view AmxCalibratedQuantizer::description() const {
    return method_ == Method::int8 ? "kt-kernel AMXINT8 layout, codes by GPTQ error feedback on calibration inputs"
                                   : "kt-kernel AMXINT4 layout, codes by GPTQ error feedback on calibration inputs";
}

Options AmxCalibratedQuantizer::facts() const {
    Options facts = plain_.facts();
    facts.set("verify.reference", std::string(plain_.id()));
    return facts;
}

std::shared_ptr<const Quantizer> AmxCalibratedQuantizer::configure(const Options& options) const {
    return std::make_shared<AmxCalibratedQuantizer>(method_, gptq::configure_fixed_scale(settings_, options, id()));
}

Options AmxCalibratedQuantizer::settings() const { return gptq::fixed_scale_settings(settings_); }

QuantizedTensor AmxCalibratedQuantizer::quantize(const TensorView&) const { gptq::refuse_without_calibration(id(), plain_.id()); }

std::shared_ptr<const PreparedCalibration> AmxCalibratedQuantizer::prepare_calibration(const Tensor& hessian) const {
    return gptq::prepare_fixed_scale(hessian, scheme_of(method_, settings_));
}

QuantizedTensor AmxCalibratedQuantizer::quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const {
    output_layout(weight.shape);  // checks the shape rules
    const std::int64_t n = weight.shape[0], k = weight.shape[1];
    const gptq::FixedScaleCalibration& prepared = gptq::fixed_scale_calibration(calibration, k, id());
    const gptq::FixedScaleCodes solved = gptq::solve_fixed_scale(gptq::bf16_rounded_values(weight), n, k, prepared,
                                                                 scheme_of(method_, settings_), settings_.scale_search, rule_of(method_));
    Tensor packed = Tensor::uninitialized(DType::I8, {code_bytes(method_, n, k)});  // pack_codes writes every byte
    pack_codes(method_, n, k, solved.codes.data(), packed.data_as<std::uint8_t>());
    return gptq::row_scaled_tensor(plain_.published_name("kt.method"), std::move(packed), solved.scales);
}

std::string AmxCalibratedQuantizer::stored_problem(const QuantizedTensor& stored, const TensorView& source) const {
    const Tensor* scale = stored.part("scale");
    const std::int64_t n = source.shape.size() == 2 ? source.shape[0] : 0;
    if (!scale || scale->dtype() != DType::F32 || scale->elements() != static_cast<std::size_t>(n))
        return "not " + std::to_string(n) + " F32 row scales";
    const std::string range = plain_.kt_range_problem(stored, source.shape);
    const std::string scales = gptq::scale_range_problem(source, scale->data_as<float>(), rule_of(method_));
    return range.empty() || scales.empty() ? range + scales : range + "; " + scales;
}

}  // namespace moequant::amx
