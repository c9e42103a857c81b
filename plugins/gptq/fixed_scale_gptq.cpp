#include "fixed_scale_gptq.hpp"

#include "gptq_solver.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <algorithm>
#include <cmath>

namespace moequant::gptq {

namespace {

// The scale search's factors f of d_kt: 1, 0.98, ..., search_floor.
constexpr int search_steps = 26;

double search_factor(int i) noexcept { return 1.0 - i * (1.0 - search_floor) / (search_steps - 1); }

int round_code(float t, int qmin, int qmax) noexcept {
    return static_cast<int>(std::nearbyint(std::clamp(t, static_cast<float>(qmin), static_cast<float>(qmax))));
}

// The factor f of d_kt whose round-to-nearest codes give row `w` the least sum_j h_j (w_j -
// q_j s)^2: the output error of the row if the columns' inputs were uncorrelated.
double searched_factor(const float* w, const float* h, std::int64_t k, float d_kt, float step_per_scale, int qmin, int qmax) {
    double best_error = INFINITY, best = 1.0;
    for (int i = 0; i < search_steps; ++i) {
        const double f = search_factor(i);
        const float s = step_per_scale * static_cast<float>(f * d_kt);
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

float row_amax(const float* row, std::int64_t k) noexcept {
    float amax = 0;
    for (std::int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(row[c]));
    return amax;
}

}  // namespace

FixedScaleSettings configure_fixed_scale(const FixedScaleSettings& current, const Options& options, std::string_view id) {
    FixedScaleSettings s = current;
    const std::string order = options.get_string("actorder", s.actorder ? "static" : "none");
    if (order != "static" && order != "none")
        throw Error(ErrorKind::usage, "actorder '" + order + "' is not supported by " + std::string(id),
                    {.code = "BadOption", .hint = "use static or none"});
    s.actorder = order == "static";
    s.dampening_frac = options.get_double("dampening_frac", s.dampening_frac);
    if (!(s.dampening_frac > 0 && s.dampening_frac < 1))
        throw Error(ErrorKind::usage, "dampening_frac must lie in (0, 1), not " + options.get_string("dampening_frac", ""),
                    {.code = "BadOption"});
    const std::string scale = options.get_string("scale", s.scale_search ? "searched" : "kt");
    if (scale != "searched" && scale != "kt")
        throw Error(ErrorKind::usage, "scale '" + scale + "' is not supported by " + std::string(id),
                    {.code = "BadOption", .hint = "use searched or kt"});
    s.scale_search = scale == "searched";
    return s;
}

Options fixed_scale_settings(const FixedScaleSettings& settings) {
    Options o;
    o.set("calibration", "gptq");
    o.set("actorder", settings.actorder ? "static" : "none");
    o.set("dampening_frac", std::to_string(settings.dampening_frac));
    o.set("scale", settings.scale_search ? "searched" : "kt");
    o.set("code_range", "symmetric");  // always: the range kt-kernel's products multiply right
    return o;
}

Scheme fixed_scale_scheme(int bits, const FixedScaleSettings& settings) {
    Scheme s;
    s.bits = bits;
    s.code_range = CodeRange::symmetric;
    s.group_size = 0;  // one scale per row
    s.actorder = settings.actorder ? ActOrder::static_order : ActOrder::none;
    s.dampening_frac = settings.dampening_frac;
    return s;
}

std::shared_ptr<const FixedScaleCalibration> prepare_fixed_scale(const Tensor& hessian, const Scheme& scheme) {
    auto prepared = std::make_shared<FixedScaleCalibration>();
    prepared->inverse = prepare_inverse_hessian(hessian, scheme);
    const std::int64_t k = hessian.shape()[0];
    prepared->diagonal.resize(static_cast<std::size_t>(k));
    for (std::int64_t c = 0; c < k; ++c) prepared->diagonal[c] = hessian.data_as<float>()[c * k + c];
    return prepared;
}

const FixedScaleCalibration& fixed_scale_calibration(const PreparedCalibration& calibration, std::int64_t k, std::string_view id) {
    const auto* prepared = dynamic_cast<const FixedScaleCalibration*>(&calibration);
    if (!prepared) throw Error(ErrorKind::internal, std::string(id) + " was given another quantizer's calibration");
    if (prepared->inverse.columns != k)
        throw Error(ErrorKind::internal,
                    "the Hessian has " + std::to_string(prepared->inverse.columns) + " columns, the weight " + std::to_string(k));
    return *prepared;
}

void refuse_without_calibration(std::string_view id, std::string_view plain_id) {
    throw Error(ErrorKind::usage, std::string(id) + " chooses its codes on calibration inputs and needs them",
                {.code = "NeedsCalibration", .hint = "give calibration data, or use " + std::string(plain_id)});
}

std::vector<float> bf16_rounded_values(const TensorView& weight) {
    std::vector<std::uint16_t> bits(weight.elements());
    decode_to_bf16(weight, bits);
    std::vector<float> values(bits.size());
    convert_bf16_to_f32(bits.data(), values.data(), bits.size());
    return values;
}

FixedScaleCodes solve_fixed_scale(const std::vector<float>& w, std::int64_t rows, std::int64_t cols,
                                  const FixedScaleCalibration& calibration, const Scheme& scheme, bool scale_search,
                                  const RowScaleRule& rule) {
    const std::int64_t n = rows, k = cols;
    // Each row's stored scale d and the step GPTQ rounds to; an all-zero row keeps d = 0 (as
    // kt-kernel writes it) and codes 0, with a step of 1 so that no division is by zero.
    FixedScaleCodes out;
    out.scales.resize(static_cast<std::size_t>(n));
    std::vector<float> steps(static_cast<std::size_t>(n));
    parallel_for(0, static_cast<std::size_t>(n), 16, [&](std::size_t first, std::size_t last) {
        for (std::size_t r = first; r < last; ++r) {
            const float* row = w.data() + r * k;
            const float d_kt = rule.kt_scale(row_amax(row, k));
            const double f = scale_search && d_kt > 0
                                 ? searched_factor(row, calibration.diagonal.data(), k, d_kt, rule.step_per_scale, scheme.qmin(),
                                                   scheme.qmax())
                                 : 1.0;
            out.scales[r] = static_cast<float>(f * d_kt);
            steps[r] = out.scales[r] > 0 ? rule.step_per_scale * out.scales[r] : 1.0f;
        }
    });
    const std::vector<std::int32_t> group_of(static_cast<std::size_t>(k), 0);
    const GptqResult result = run_gptq(w.data(), n, calibration.inverse, scheme, steps, 1, group_of, true);

    // GPTQ's weights are code * step exactly (F32 products): dividing back gives the codes.
    out.codes.resize(static_cast<std::size_t>(n * k));
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t c = 0; c < k; ++c)
            out.codes[r * k + c] = static_cast<std::int8_t>(
                out.scales[r] > 0 ? round_code(result.weight[r * k + c] / steps[r], scheme.qmin(), scheme.qmax()) : 0);
    return out;
}

QuantizedTensor row_scaled_tensor(std::string method, Tensor packed, const std::vector<float>& scales) {
    QuantizedTensor out;
    out.method = std::move(method);
    Tensor stored_scales(DType::F32, {static_cast<std::int64_t>(scales.size())});
    std::copy(scales.begin(), scales.end(), stored_scales.data_as<float>());
    out.parts.emplace_back("weight", std::move(packed));
    out.parts.emplace_back("scale", std::move(stored_scales));
    return out;
}

std::string scale_range_problem(const TensorView& source, const float* d, const RowScaleRule& rule) {
    const std::int64_t n = source.shape[0], k = source.shape[1];
    const std::vector<float> w = bf16_rounded_values(source);
    std::int64_t wrong = 0, first = -1;
    for (std::int64_t r = 0; r < n; ++r) {
        const float amax = row_amax(w.data() + r * k, k);
        const float d_kt = rule.kt_scale(amax);
        // f * d_kt in double, rounded once to F32: rounding is monotonic, so the stored scale
        // lies in [fl(search_floor d_kt), d_kt] exactly.
        const auto low = static_cast<float>(search_floor * static_cast<double>(d_kt));
        const bool ok = amax == 0 ? d[r] == 0 : (d[r] >= low && d[r] <= d_kt);
        if (!ok && wrong++ == 0) first = r;
    }
    if (!wrong) return {};
    return std::to_string(wrong) + " row scale(s) outside [" + std::to_string(search_floor) +
           ", 1] x kt-kernel's scale of the source row (first: row " + std::to_string(first) + ", " + std::to_string(d[first]) + ")";
}

}  // namespace moequant::gptq
