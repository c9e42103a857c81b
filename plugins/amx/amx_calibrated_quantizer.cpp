#include "amx_calibrated_quantizer.hpp"

#include "gptq_solver.hpp"
#include "inverse_hessian.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

namespace moequant::amx {

namespace {

// The scale search's factors f of d_kt: 1, 0.98, ..., 0.5. Below half of kt-kernel's scale a
// row would clip more than a quarter of its range, which no weight distribution rewards.
constexpr int search_steps = 26;
constexpr double search_floor = 0.5;

double search_factor(int i) noexcept { return 1.0 - i * (1.0 - search_floor) / (search_steps - 1); }

// What prepare_calibration() derives from a Hessian: GPTQ's inverse factor and diag(H).
struct AmxCalibration final : PreparedCalibration {
    gptq::InverseHessian inverse;
    std::vector<float> diagonal;
};

gptq::Scheme scheme_of(Method method, const CalibratedSettings& settings) {
    gptq::Scheme s;
    s.bits = method == Method::int8 ? 8 : 4;
    s.code_range = gptq::CodeRange::symmetric;  // -127..127 or -7..7: what kt's products multiply right
    s.group_size = 0;                           // one scale per row
    s.actorder = settings.actorder ? gptq::ActOrder::static_order : gptq::ActOrder::none;
    s.dampening_frac = settings.dampening_frac;
    return s;
}

// The step between codes of a row stored with scale d: INT4 codes decode as q * 16 d.
float step_of(Method method, float d) noexcept { return method == Method::int8 ? d : 16.0f * d; }

int round_code(float t, int qmin, int qmax) noexcept {
    return static_cast<int>(std::nearbyint(std::clamp(t, static_cast<float>(qmin), static_cast<float>(qmax))));
}

// The factor f of d_kt whose round-to-nearest codes give row `w` the least sum_j h_j (w_j -
// q_j s)^2: the output error of the row if the columns' inputs were uncorrelated.
double searched_factor(Method method, const float* w, const float* h, std::int64_t k, float d_kt, int qmin, int qmax) {
    double best_error = INFINITY, best = 1.0;
    for (int i = 0; i < search_steps; ++i) {
        const double f = search_factor(i);
        const float s = step_of(method, static_cast<float>(f * d_kt));
        double error = 0;
        for (std::int64_t c = 0; c < k; ++c) {
            const float e = w[c] - static_cast<float>(round_code(w[c] / s, qmin, qmax)) * s;
            error += static_cast<double>(h[c]) * e * e;
        }
        if (error < best_error) {
            best_error = error;
            best = f;
        }
    }
    return best;
}

std::vector<float> f32_values(const TensorView& weight) {
    std::vector<std::uint16_t> bits(weight.elements());
    decode_to_bf16(weight, bits);  // F16 and F32 are first rounded to BF16, as for the plain quantizer
    std::vector<float> values(bits.size());
    convert_bf16_to_f32(bits.data(), values.data(), bits.size());
    return values;
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
    CalibratedSettings s = settings_;
    const std::string order = options.get_string("actorder", s.actorder ? "static" : "none");
    if (order != "static" && order != "none")
        throw Error(ErrorKind::usage, "actorder '" + order + "' is not supported by " + std::string(id()),
                    {.code = "BadOption", .hint = "use static or none"});
    s.actorder = order == "static";
    s.dampening_frac = options.get_double("dampening_frac", s.dampening_frac);
    if (!(s.dampening_frac > 0 && s.dampening_frac < 1))
        throw Error(ErrorKind::usage, "dampening_frac must lie in (0, 1), not " + options.get_string("dampening_frac", ""),
                    {.code = "BadOption"});
    const std::string scale = options.get_string("scale", s.scale_search ? "searched" : "kt");
    if (scale != "searched" && scale != "kt")
        throw Error(ErrorKind::usage, "scale '" + scale + "' is not supported by " + std::string(id()),
                    {.code = "BadOption", .hint = "use searched or kt"});
    s.scale_search = scale == "searched";
    return std::make_shared<AmxCalibratedQuantizer>(method_, s);
}

Options AmxCalibratedQuantizer::settings() const {
    Options o;
    o.set("calibration", "gptq");
    o.set("actorder", settings_.actorder ? "static" : "none");
    o.set("dampening_frac", std::to_string(settings_.dampening_frac));
    o.set("scale", settings_.scale_search ? "searched" : "kt");
    o.set("code_range", "symmetric");  // always: kt-kernel's range
    return o;
}

QuantizedTensor AmxCalibratedQuantizer::quantize(const TensorView&) const {
    throw Error(ErrorKind::usage, std::string(id()) + " chooses its codes on calibration inputs and needs them",
                {.code = "NeedsCalibration", .hint = "give calibration data, or use " + std::string(plain_.id())});
}

std::shared_ptr<const PreparedCalibration> AmxCalibratedQuantizer::prepare_calibration(const Tensor& hessian) const {
    auto prepared = std::make_shared<AmxCalibration>();
    prepared->inverse = gptq::prepare_inverse_hessian(hessian, scheme_of(method_, settings_));
    const std::int64_t k = hessian.shape()[0];
    prepared->diagonal.resize(static_cast<std::size_t>(k));
    for (std::int64_t c = 0; c < k; ++c) prepared->diagonal[c] = hessian.data_as<float>()[c * k + c];
    return prepared;
}

QuantizedTensor AmxCalibratedQuantizer::quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const {
    const auto* prepared = dynamic_cast<const AmxCalibration*>(&calibration);
    if (!prepared) throw Error(ErrorKind::internal, std::string(id()) + " was given another quantizer's calibration");
    output_layout(weight.shape);  // checks the shape rules
    const std::int64_t n = weight.shape[0], k = weight.shape[1];
    if (prepared->inverse.columns != k)
        throw Error(ErrorKind::internal, "the Hessian has " + std::to_string(prepared->inverse.columns) + " columns, the weight " +
                                             std::to_string(k));
    const gptq::Scheme scheme = scheme_of(method_, settings_);
    const std::vector<float> w = f32_values(weight);

    // Each row's stored scale d and the step GPTQ rounds to; an all-zero row keeps d = 0 (as
    // kt-kernel writes it) and codes 0, with a step of 1 so that no division is by zero.
    std::vector<float> d(static_cast<std::size_t>(n)), steps(static_cast<std::size_t>(n));
    parallel_for(0, static_cast<std::size_t>(n), 16, [&](std::size_t first, std::size_t last) {
        for (std::size_t r = first; r < last; ++r) {
            const float* row = w.data() + r * k;
            float amax = 0;
            for (std::int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(row[c]));
            const float d_kt = kt_row_scale(method_, amax);
            const double f = settings_.scale_search && d_kt > 0
                                 ? searched_factor(method_, row, prepared->diagonal.data(), k, d_kt, scheme.qmin(), scheme.qmax())
                                 : 1.0;
            d[r] = static_cast<float>(f * d_kt);
            steps[r] = d[r] > 0 ? step_of(method_, d[r]) : 1.0f;
        }
    });
    const std::vector<std::int32_t> group_of(static_cast<std::size_t>(k), 0);
    const gptq::GptqResult result = gptq::run_gptq(w.data(), n, prepared->inverse, scheme, steps, 1, group_of, true);

    // GPTQ's weights are code * step exactly (F32 products): dividing back gives the codes.
    std::vector<std::int8_t> codes(static_cast<std::size_t>(n * k));
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t c = 0; c < k; ++c)
            codes[r * k + c] = static_cast<std::int8_t>(
                d[r] > 0 ? round_code(result.weight[r * k + c] / steps[r], scheme.qmin(), scheme.qmax()) : 0);
    QuantizedTensor out;
    out.method = plain_.published_name("kt.method");
    Tensor packed = Tensor::uninitialized(DType::I8, {code_bytes(method_, n, k)});  // pack_codes writes every byte
    pack_codes(method_, n, k, codes.data(), packed.data_as<std::uint8_t>());
    Tensor scales(DType::F32, {n});
    std::copy(d.begin(), d.end(), scales.data_as<float>());
    out.parts.emplace_back("weight", std::move(packed));
    out.parts.emplace_back("scale", std::move(scales));
    return out;
}

std::string AmxCalibratedQuantizer::stored_problem(const QuantizedTensor& stored, const TensorView& source) const {
    const Tensor* scale = stored.part("scale");
    const std::int64_t n = source.shape.size() == 2 ? source.shape[0] : 0, k = n ? source.shape[1] : 0;
    if (!scale || scale->dtype() != DType::F32 || scale->elements() != static_cast<std::size_t>(n))
        return "not " + std::to_string(n) + " F32 row scales";
    const std::vector<float> w = f32_values(source);
    const float* d = scale->data_as<float>();
    std::int64_t wrong = 0, first = -1;
    for (std::int64_t r = 0; r < n; ++r) {
        float amax = 0;
        for (std::int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(w[r * k + c]));
        const float d_kt = kt_row_scale(method_, amax);
        // f * d_kt in double, rounded once to F32: rounding is monotonic, so the stored scale
        // lies in [fl(0.5 d_kt), d_kt] exactly.
        const auto low = static_cast<float>(search_floor * static_cast<double>(d_kt));
        const bool ok = amax == 0 ? d[r] == 0 : (d[r] >= low && d[r] <= d_kt);
        if (!ok && wrong++ == 0) first = r;
    }
    std::string problem = plain_.kt_range_problem(stored, source.shape);
    if (!wrong) return problem;
    return (problem.empty() ? "" : problem + "; ") + std::to_string(wrong) + " row scale(s) outside [" + std::to_string(search_floor) +
           ", 1] x kt-kernel's scale of the source row (first: row " + std::to_string(first) + ", " +
           std::to_string(d[first]) + ")";
}

}  // namespace moequant::amx
