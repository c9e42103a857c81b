#include "moe_int8_gptq_quantizer.hpp"

#include "aocl_int8_layout.hpp"

namespace moequant::moe_int {

namespace {

// kt's MOE_INT8 row scale, and INT8 codes decode as q * d.
const gptq::RowScaleRule row_rule{moe_int8_row_scale, 1.0f};

}  // namespace

MoeInt8GptqQuantizer::MoeInt8GptqQuantizer(gptq::FixedScaleSettings settings)
    : settings_(settings), plain_(std::make_shared<MoeInt8Quantizer>()) {
    // moe-int8's variants (for_matrix() of the registered plain object, which is a MoeInt8Quantizer).
    auto variant = [&](Projection p) {
        return std::unique_ptr<const MoeInt8GptqQuantizer>(
            new MoeInt8GptqQuantizer(static_cast<const MoeInt8Quantizer&>(plain_->quantizer_for({0, p})), settings));
    };
    gate_up_ = variant(Projection::gate);
    down_ = variant(Projection::down);
}

std::string_view MoeInt8GptqQuantizer::description() const {
    return "kt-kernel MOE_INT8 layout (AOCL, CPUs without AMX), codes by GPTQ error feedback on calibration inputs";
}

Options MoeInt8GptqQuantizer::facts() const {
    Options facts = layout().facts();
    facts.set("verify.reference", std::string(layout().id()));
    return facts;
}

std::shared_ptr<const Quantizer> MoeInt8GptqQuantizer::configure(const Options& options) const {
    return std::make_shared<MoeInt8GptqQuantizer>(gptq::configure_fixed_scale(settings_, options, id()));
}

const Quantizer* MoeInt8GptqQuantizer::for_matrix(const MatrixRole& role) const {
    if (!gate_up_) return nullptr;  // a variant packs its own matrices
    return role.projection == Projection::down ? down_.get() : gate_up_.get();
}

const MoeInt8Quantizer& MoeInt8GptqQuantizer::layout() const {
    // The registered plain object refuses to pack (Error(internal): "use quantizer_for()").
    return layout_ ? *layout_ : *plain_;
}

QuantizedTensor MoeInt8GptqQuantizer::quantize(const TensorView&) const { gptq::refuse_without_calibration(id(), layout().id()); }

std::shared_ptr<const PreparedCalibration> MoeInt8GptqQuantizer::prepare_calibration(const Tensor& hessian) const {
    return gptq::prepare_fixed_scale(hessian, gptq::fixed_scale_scheme(8, settings_));
}

QuantizedTensor MoeInt8GptqQuantizer::quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const {
    output_layout(weight.shape);  // checks the shape rules (and refuses on the registered object)
    const std::int64_t n = weight.shape[0], k = weight.shape[1], nb = layout().block_rows();
    const gptq::FixedScaleCodes solved =
        gptq::solve_fixed_scale(gptq::bf16_rounded_values(weight), n, k, gptq::fixed_scale_calibration(calibration, k, id()),
                                gptq::fixed_scale_scheme(8, settings_), settings_.scale_search, row_rule);
    Tensor codes(DType::I8, {n / nb * aocl_block_bytes(nb, k)});  // zeroed: the K padding stays 0
    for (std::int64_t r = 0; r < n; ++r)
        write_aocl_row(codes.data_as<std::uint8_t>() + (r / nb) * aocl_block_bytes(nb, k), nb, k, r % nb, solved.codes.data() + r * k);
    return gptq::row_scaled_tensor(layout().published_name("kt.method"), std::move(codes), solved.scales);
}

std::string MoeInt8GptqQuantizer::stored_problem(const QuantizedTensor& stored, const TensorView& source) const {
    std::vector<std::string> problems;
    if (std::string p = layout().stored_problem(stored, source); !p.empty()) problems.push_back(std::move(p));  // also checks the sizes
    const std::int64_t n = source.shape[0], k = source.shape[1], nb = layout().block_rows();
    const auto* codes = stored.part("weight")->data_as<std::uint8_t>();
    std::int64_t lowest = 0, first = -1;
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t c = 0; c < k; ++c)
            if (codes[(r / nb) * aocl_block_bytes(nb, k) + aocl_code_offset(nb, r % nb, c)] == 0x80 && lowest++ == 0) first = r;
    if (lowest)
        problems.push_back(std::to_string(lowest) + " code(s) -128 (first: row " + std::to_string(first) +
                           "): calibrated codes keep to -127..127");
    if (std::string p = gptq::scale_range_problem(source, stored.part("scale")->data_as<float>(), row_rule); !p.empty())
        problems.push_back(std::move(p));
    std::string joined;
    for (const std::string& p : problems) joined += (joined.empty() ? "" : "; ") + p;
    return joined;
}

}  // namespace moequant::moe_int
