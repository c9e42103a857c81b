#include "integer_quantizer.hpp"

#include "gptq_solver.hpp"
#include "integer_mapping.hpp"
#include "inverse_hessian.hpp"
#include "packed_codes.hpp"

#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <cmath>
#include <cstring>

namespace moequant::gptq {

namespace {

// The weight as BF16-exact floats (F16 and F32 are first rounded to BF16, the model dtype of
// the reference flow).
std::vector<float> weight_values(const TensorView& weight) {
    if (weight.shape.size() != 2) throw Error(ErrorKind::input, "expected a 2-D weight, got " + shape_to_string(weight.shape));
    std::vector<std::uint16_t> bits(weight.elements());
    decode_to_bf16(weight, bits);
    std::vector<float> values(bits.size());
    convert_bf16_to_f32(bits.data(), values.data(), bits.size());
    return values;
}

// The min-max observer's absmax (§3.1) over groups of `group` consecutive positions of each
// row, where position j of a row is column column_at(j): [rows, ceil(cols / group)], the last
// group over the columns that are left.
template <class ColumnAt>
std::vector<float> group_absmax(const std::vector<float>& w, std::int64_t rows, std::int64_t cols, std::int64_t group,
                                const ColumnAt& column_at) {
    const std::int64_t groups = (cols + group - 1) / group;
    std::vector<float> absmax(static_cast<std::size_t>(rows * groups), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < groups; ++g)
            for (std::int64_t j = g * group; j < std::min((g + 1) * group, cols); ++j)
                absmax[r * groups + g] = std::max(absmax[r * groups + g], std::fabs(w[r * cols + column_at(j)]));
    return absmax;
}

// BF16 scales: the observer run on the BF16 module weight.
std::vector<std::uint16_t> bf16_scales(const std::vector<float>& absmax, const Scheme& scheme) {
    std::vector<std::uint16_t> scales(absmax.size());
    for (std::size_t i = 0; i < absmax.size(); ++i) scales[i] = observer_scale(absmax[i], scheme);
    return scales;
}

// F32 scales: the observer run again on GPTQ's F32 working weight (actorder "group", §4.2);
// an all-zero group gets F32's epsilon.
std::vector<float> f32_scales(const std::vector<float>& absmax, const Scheme& scheme) {
    std::vector<float> scales(absmax.size());
    for (std::size_t i = 0; i < absmax.size(); ++i) {
        scales[i] = absmax[i] / scheme.scale_divisor();
        if (scales[i] == 0) scales[i] = 0x1p-23f;
    }
    return scales;
}

struct PackedParts {
    const std::int32_t* words = nullptr;
    const std::uint16_t* scales = nullptr;
    const std::int32_t* g_idx = nullptr;  // null: column c is in group c / group_columns
    std::int64_t rows = 0, cols = 0, groups = 0, group_columns = 0, words_per_row = 0;
    int bits = 4;

    std::int64_t group_of(std::int64_t c) const noexcept { return g_idx ? g_idx[c] : c / group_columns; }
    float scale(std::int64_t r, std::int64_t c) const noexcept { return bf16_to_f32(scales[r * groups + group_of(c)]); }
};

// The parts of a matrix stored with `scheme`'s groups: ceil(cols / group size) scales a row.
PackedParts packed_parts(const QuantizedTensor& q, const Shape& shape, const Scheme& scheme) {
    const Tensor* packed = q.part("weight_packed");
    const Tensor* scale = q.part("weight_scale");
    if (!packed || !scale || shape.size() != 2)
        throw Error(ErrorKind::input, "the weight_packed and weight_scale parts of a " + shape_to_string(shape) +
                                          " matrix are missing");
    PackedParts p;
    p.rows = shape[0];
    p.cols = shape[1];
    if (packed->dtype() != DType::I32 || packed->shape().size() != 2 || packed->shape()[0] != p.rows)
        throw Error(ErrorKind::input, "weight_packed is " + std::string(dtype_name(packed->dtype())) + " " +
                                          shape_to_string(packed->shape()) + ", expected I32 [" + std::to_string(p.rows) + ", ...]");
    p.words_per_row = packed->shape()[1];
    if (p.words_per_row * 8 == p.cols)
        p.bits = 4;
    else if (p.words_per_row * 4 == p.cols)
        p.bits = 8;
    else
        throw Error(ErrorKind::input, "weight_packed " + shape_to_string(packed->shape()) + " holds neither 4- nor 8-bit codes of " +
                                          std::to_string(p.cols) + " columns");
    p.groups = scheme.groups(p.cols);
    p.group_columns = scheme.group_columns(p.cols);
    if (scale->dtype() != DType::BF16 || scale->shape() != Shape{p.rows, p.groups})
        throw Error(ErrorKind::input, "weight_scale is " + std::string(dtype_name(scale->dtype())) + " " +
                                          shape_to_string(scale->shape()) + ", expected BF16 " +
                                          shape_to_string(Shape{p.rows, p.groups}));
    p.words = packed->data_as<std::int32_t>();
    p.scales = scale->data_as<std::uint16_t>();
    if (const Tensor* g = q.part("weight_g_idx")) {
        if (g->dtype() != DType::I32 || g->shape() != Shape{p.cols})
            throw Error(ErrorKind::input, "weight_g_idx is " + shape_to_string(g->shape()) + ", expected I32 [" + std::to_string(p.cols) + "]");
        p.g_idx = g->data_as<std::int32_t>();
        for (std::int64_t c = 0; c < p.cols; ++c)
            if (p.g_idx[c] < 0 || p.g_idx[c] >= p.groups)
                throw Error(ErrorKind::input, "weight_g_idx[" + std::to_string(c) + "] = " + std::to_string(p.g_idx[c]) +
                                                  " is not a group of weight_scale");
    }
    return p;
}

}  // namespace

std::string_view IntegerQuantizer::description() const {
    return gptq_ ? "GPTQ (llm-compressor GPTQModifier) W4A16/W8A16, compressed-tensors pack-quantized"
                 : "round-to-nearest (llm-compressor QuantizationModifier) W4A16/W8A16, compressed-tensors pack-quantized";
}

Options IntegerQuantizer::facts() const {
    Options facts{{"ct.scheme", scheme_.name()}};
    if (gptq_) facts.set("verify.reference", "rtn");
    return facts;
}

std::shared_ptr<const Quantizer> IntegerQuantizer::configure(const Options& options) const {
    return std::make_shared<IntegerQuantizer>(gptq_, parse_scheme(options, gptq_));
}

Options IntegerQuantizer::settings() const {
    Options o;
    o.set("num_bits", std::to_string(scheme_.bits));
    o.set("strategy", scheme_.strategy());
    if (scheme_.group_size) o.set("group_size", std::to_string(scheme_.group_size));
    if (scheme_.actorder == ActOrder::static_order) o.set("actorder", "static");
    if (scheme_.actorder == ActOrder::group) o.set("actorder", "group");
    if (gptq_) o.set("dampening_frac", std::to_string(scheme_.dampening_frac));
    if (scheme_.code_range == CodeRange::symmetric) o.set("code_range", "symmetric");  // else full, as before it existed
    return o;
}

std::vector<TensorSpec> IntegerQuantizer::output_layout(const Shape& m) const {
    if (m.size() != 2 || m[0] <= 0 || m[1] <= 0) throw Error(ErrorKind::input, "expected a 2-D weight, got " + shape_to_string(m));
    // Groups may be ragged (the format refuses them without --allow-unaligned); the codes
    // must fill whole 32-bit words.
    if ((m[1] * scheme_.bits) % 32 != 0)
        throw Error(ErrorKind::input,
                    "in_features " + std::to_string(m[1]) + " does not fill whole 32-bit words of " +
                        std::to_string(scheme_.bits) + "-bit codes (a multiple of " + std::to_string(32 / scheme_.bits) + ")",
                    {.code = "UnalignedShape"});
    std::vector<TensorSpec> layout = {{"weight_packed", DType::I32, {m[0], m[1] * scheme_.bits / 32}},
                                      {"weight_scale", DType::BF16, {m[0], scheme_.groups(m[1])}},
                                      {"weight_shape", DType::I64, {2}}};
    if (scheme_.actorder == ActOrder::group) layout.push_back({"weight_g_idx", DType::I32, {m[1]}});
    return layout;
}

namespace {

// The stored parts from the weight GPTQ or RTN leaves (BF16-exact values) and the BF16 scales:
// codes re-derived with compressed-tensors' BF16 division (§4.3), packed (§6.3).
QuantizedTensor pack(const IntegerQuantizer& quantizer, const std::vector<float>& w, const Shape& shape,
                     const std::vector<std::uint16_t>& scales, const std::vector<std::int32_t>& g_idx) {
    const Scheme& scheme = quantizer.scheme();
    const std::int64_t rows = shape[0], cols = shape[1];
    const std::vector<TensorSpec> layout = quantizer.output_layout(shape);
    QuantizedTensor q;
    q.method = scheme.name();
    for (const auto& spec : layout) q.parts.emplace_back(spec.name, Tensor::uninitialized(spec.dtype, spec.shape));
    const std::int64_t groups = scheme.groups(cols), group = scheme.group_columns(cols), words = cols * scheme.bits / 32;
    auto* packed = q.parts[0].second.data_as<std::int32_t>();
    parallel_for(0, static_cast<std::size_t>(rows), 16, [&](std::size_t first, std::size_t last) {
        std::vector<std::int8_t> codes(static_cast<std::size_t>(cols));
        for (std::size_t r = first; r < last; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
                const std::int64_t g = g_idx.empty() ? c / group : g_idx[c];
                // module.weight is BF16 when compressed-tensors re-derives the code.
                const float stored = bf16_to_f32(f32_to_bf16(w[r * cols + c]));
                codes[c] = static_cast<std::int8_t>(saved_code(stored, bf16_to_f32(scales[r * groups + g]), scheme));
            }
            pack_row(codes, scheme.bits, {packed + r * words, static_cast<std::size_t>(words)});
        }
    });
    std::memcpy(q.parts[1].second.data(), scales.data(), scales.size() * 2);
    auto* weight_shape = q.parts[2].second.data_as<std::int64_t>();
    weight_shape[0] = rows;
    weight_shape[1] = cols;
    if (!g_idx.empty()) std::memcpy(q.parts[3].second.data(), g_idx.data(), g_idx.size() * 4);
    return q;
}

}  // namespace

QuantizedTensor IntegerQuantizer::quantize(const TensorView& weight) const {
    if (gptq_)
        throw Error(ErrorKind::usage, "GPTQ needs calibration data",
                    {.code = "NeedsCalibration", .hint = "GPTQ quantizes through its calibration facet, on calibration data"});
    output_layout(weight.shape);
    const std::vector<float> w = weight_values(weight);
    const std::int64_t rows = weight.shape[0], cols = weight.shape[1];
    const auto scales = bf16_scales(group_absmax(w, rows, cols, scheme_.group_columns(cols), [](std::int64_t j) { return j; }), scheme_);
    return pack(*this, w, weight.shape, scales, {});
}

std::shared_ptr<const PreparedCalibration> IntegerQuantizer::prepare_calibration(const Tensor& hessian) const {
    return std::make_shared<InverseHessian>(prepare_inverse_hessian(hessian, scheme_));
}

QuantizedTensor IntegerQuantizer::quantize_calibrated(const TensorView& weight, const PreparedCalibration& calibration) const {
    const auto* prepared = dynamic_cast<const InverseHessian*>(&calibration);
    if (!prepared) throw Error(ErrorKind::internal, "gptq was given another quantizer's calibration");
    output_layout(weight.shape);
    const std::int64_t rows = weight.shape[0], cols = weight.shape[1];
    if (prepared->columns != cols)
        throw Error(ErrorKind::internal, "the Hessian has " + std::to_string(prepared->columns) + " columns, the weight " +
                                             std::to_string(cols));
    const std::vector<float> w = weight_values(weight);
    const std::int64_t group = scheme_.group_columns(cols), groups = scheme_.groups(cols);
    // Scales are fixed before the loop from the original weight (§4.2), dead columns included.
    // With actorder "group" they are observed on the permuted weight, so groups follow the new
    // order and the checkpoint needs g_idx.
    const bool by_position = scheme_.actorder == ActOrder::group;
    const auto absmax = by_position ? group_absmax(w, rows, cols, group, [&](std::int64_t j) { return prepared->order[j]; })
                                    : group_absmax(w, rows, cols, group, [](std::int64_t j) { return j; });
    const auto scales = bf16_scales(absmax, scheme_);
    std::vector<float> loop_scales(scales.size());
    if (by_position)
        loop_scales = f32_scales(absmax, scheme_);
    else
        convert_bf16_to_f32(scales.data(), loop_scales.data(), scales.size());
    std::vector<std::int32_t> group_of(cols);  // group of permuted position j
    std::vector<std::int32_t> g_idx;           // group of original column c (actorder group)
    for (std::int64_t j = 0; j < cols; ++j)
        group_of[j] = static_cast<std::int32_t>((by_position ? j : prepared->order[j]) / group);
    if (by_position) {
        g_idx.resize(cols);
        for (std::int64_t j = 0; j < cols; ++j) g_idx[prepared->order[j]] = group_of[j];
    }
    const GptqResult result = run_gptq(w.data(), rows, *prepared, scheme_, loop_scales, groups, group_of, by_position);
    return pack(*this, result.weight, weight.shape, scales, g_idx);
}

Tensor IntegerQuantizer::dequantize(const QuantizedTensor& quantized, const Shape& shape) const {
    const PackedParts p = packed_parts(quantized, shape, scheme_);
    Tensor out(DType::F32, shape);
    float* y = out.data_as<float>();
    for (std::int64_t r = 0; r < p.rows; ++r)
        for (std::int64_t c = 0; c < p.cols; ++c)
            y[r * p.cols + c] = dequantized(static_cast<float>(packed_code(p.words + r * p.words_per_row, c, p.bits)), p.scale(r, c));
    return out;
}

std::optional<Tensor> IntegerQuantizer::error_bounds(const QuantizedTensor& quantized, const Shape& shape) const {
    if (gptq_) return std::nullopt;
    const PackedParts p = packed_parts(quantized, shape, scheme_);
    // In steps s of the group. The observer maps the group's absmax to D (bit_range/2, or qmax
    // with symmetric codes) with a BF16 scale rounded by at most 2^-8, so |w/s| <= T = D / (1 -
    // 2^-8). Below the clamp, the BF16 quotient moves by at most half its spacing 2^(b-9) near
    // the top and rounding adds half a step; where the clamp cuts, the code is qmax and the
    // error at most T - qmax. The BF16 product bf16(code * s) adds at most 2^-8 of |code| <=
    // 2^(b-1) steps.
    Scheme stored = scheme_;
    stored.bits = p.bits;
    const double t_max = stored.scale_divisor() / (1 - std::ldexp(1.0, -8));
    const double steps = std::max(0.5 + std::ldexp(1.0, p.bits - 10), t_max - stored.qmax()) + std::ldexp(1.0, p.bits - 9);
    // One bound per group, or per column when the last group is shorter (the verifier reads
    // column c's bound at c / (cols / bounds' columns)).
    const bool ragged = p.cols % p.group_columns != 0;
    const std::int64_t columns = ragged ? p.cols : p.groups;
    Tensor bounds(DType::F32, {p.rows, columns});
    float* b = bounds.data_as<float>();
    for (std::int64_t r = 0; r < p.rows; ++r)
        for (std::int64_t i = 0; i < columns; ++i)
            b[r * columns + i] = static_cast<float>(steps * p.scale(r, ragged ? i : i * p.group_columns) * (1 + 0x1p-20));
    return bounds;
}

namespace {

// vLLM and SGLang take the matrix shape from weight_shape, not from the packed sizes.
std::string weight_shape_problem(const QuantizedTensor& stored, const Shape& source) {
    const Tensor* shape = stored.part("weight_shape");
    if (!shape || shape->dtype() != DType::I64 || shape->elements() != 2) return "weight_shape is not I64 [2]";
    const Shape declared{shape->data_as<std::int64_t>()[0], shape->data_as<std::int64_t>()[1]};
    if (declared == source) return {};
    return "weight_shape holds " + shape_to_string(declared) + ", but the source matrix is " + shape_to_string(source);
}

}  // namespace

std::string IntegerQuantizer::stored_problem(const QuantizedTensor& stored, const TensorView& source) const {
    if (auto problem = weight_shape_problem(stored, source.shape); !problem.empty()) return problem;
    const PackedParts p = packed_parts(stored, source.shape, scheme_);
    const std::vector<float> w = weight_values(source);
    std::vector<float> absmax(static_cast<std::size_t>(p.rows * p.groups), 0.0f);
    for (std::int64_t r = 0; r < p.rows; ++r)
        for (std::int64_t c = 0; c < p.cols; ++c) {
            float& m = absmax[r * p.groups + p.group_of(c)];
            m = std::max(m, std::fabs(w[r * p.cols + c]));
        }
    std::int64_t wrong = 0, first = -1;
    for (std::size_t i = 0; i < absmax.size(); ++i)
        if (observer_scale(absmax[i], scheme_) != p.scales[i]) {
            if (first < 0) first = static_cast<std::int64_t>(i);
            ++wrong;
        }
    std::string problem;
    if (wrong)
        problem = std::to_string(wrong) + " weight_scale value(s) differ from the min-max observer's (first at row " +
                  std::to_string(first / p.groups) + ", group " + std::to_string(first % p.groups) + ")";
    // Symmetric codes leave out the lowest one, which the packing could still hold.
    std::int64_t below = 0, first_below = -1;
    if (scheme_.code_range == CodeRange::symmetric)
        for (std::int64_t r = 0; r < p.rows; ++r)
            for (std::int64_t c = 0; c < p.cols; ++c)
                if (packed_code(p.words + r * p.words_per_row, c, p.bits) < scheme_.qmin() && below++ == 0) first_below = r;
    if (below)
        problem += (problem.empty() ? "" : "; ") + std::to_string(below) + " code(s) of " + std::to_string(scheme_.qmin() - 1) +
                   ", outside the recorded code range " + std::to_string(scheme_.qmin()) + ".." + std::to_string(scheme_.qmax()) +
                   " (first in row " + std::to_string(first_below) + ")";
    return problem;
}

bool IntegerQuantizer::packed_gemv(const QuantizedTensor& quantized, const Shape& shape, const float* x, float* y) const {
    const PackedParts p = packed_parts(quantized, shape, scheme_);
    const int per_word = 32 / p.bits;
    const std::uint32_t mask = (1u << p.bits) - 1;
    const int offset = 1 << (p.bits - 1);
    for (std::int64_t r = 0; r < p.rows; ++r) {
        const std::int32_t* row = p.words + r * p.words_per_row;
        double sum = 0;
        for (std::int64_t w = 0; w < p.words_per_row; ++w) {  // storage order: word by word, low bits first
            const auto word = static_cast<std::uint32_t>(row[w]);
            for (int i = 0; i < per_word; ++i) {
                const std::int64_t c = w * per_word + i;
                const int code = static_cast<int>((word >> (p.bits * i)) & mask) - offset;
                sum += static_cast<double>(dequantized(static_cast<float>(code), p.scale(r, c))) * x[c];
            }
        }
        y[r] = static_cast<float>(sum);
    }
    return true;
}

}  // namespace moequant::gptq
