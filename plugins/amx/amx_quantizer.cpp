#include "amx_quantizer.hpp"

#include "amx_backward_weights.hpp"
#include "row_kernels.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

namespace moequant::amx {
namespace {

// fl32(1/127): kt-kernel divides by 127 but is built with -ffast-math, which turns the
// division into this multiplication (kt-cpu-format.md §3.1).
constexpr std::uint32_t one_over_127_bits = 0x3C010204u;

constexpr std::int64_t panel_rows = 16;  // a tile is two panels of 16 rows

}  // namespace

float kt_row_scale(Method m, float amax) noexcept {
    if (m == Method::int8) return amax * std::bit_cast<float>(one_over_127_bits);
    return static_cast<float>(static_cast<double>(amax) / 112.0);  // correctly rounded for every BF16 amax
}

std::string_view AmxQuantizer::id() const { return method_ == Method::int8 ? "amx-int8" : "amx-int4"; }

std::string_view AmxQuantizer::description() const {
    return method_ == Method::int8 ? "kt-kernel AMXINT8: per-row symmetric INT8 in the AMX tile layout"
                                   : "kt-kernel AMXINT4: per-row symmetric INT4 (amax/112) in the AMX tile layout";
}

Options AmxQuantizer::facts() const {
    return {{"kt.method", kt_method_name()}, {"kt.file_prefix", method_ == Method::int8 ? "INT8" : "INT4"}};
}

std::string AmxQuantizer::kt_method_name() const { return method_ == Method::int8 ? "AMXINT8" : "AMXINT4"; }

std::shared_ptr<const Quantizer> AmxQuantizer::configure(const Options& options) const {
    const bool backward = options.get_bool("backward_weights", false);  // Error(usage) for a non-boolean value
    if (backward == backward_) return nullptr;
    return std::make_shared<AmxQuantizer>(method_, backward);
}

std::vector<TensorSpec> AmxQuantizer::output_layout(const Shape& matrix) const {
    if (matrix.size() != 2)
        throw Error(ErrorKind::input, "expected a 2-D weight, got shape " + shape_to_string(matrix), {.code = "ShapeMismatch"});
    const std::int64_t n = matrix[0], k = matrix[1];
    if (auto problem = shape_problem(method_, n, k); !problem.empty())
        throw Error(ErrorKind::input, problem, {.code = "UnpackableShape"});
    std::vector<TensorSpec> layout{{"weight", DType::I8, {code_bytes(method_, n, k)}}, {"scale", DType::F32, {n}}};
    if (!backward_) return layout;
    if (auto problem = shape_problem(method_, k, n); !problem.empty())
        throw Error(ErrorKind::input, "the backward weights (the part transposed, [" + std::to_string(k) + ", " +
                                          std::to_string(n) + "]) cannot be packed: " + problem,
                    {.code = "UnpackableShape"});
    layout.push_back({std::string(backward_weight_part), DType::I8, {code_bytes(method_, k, n)}});
    layout.push_back({std::string(backward_scale_part), DType::F32, {k}});
    return layout;
}

QuantizedTensor AmxQuantizer::quantize(const TensorView& weight) const {
    output_layout(weight.shape);  // checks the shape rules
    const std::int64_t n = weight.shape[0], k = weight.shape[1];

    // BF16 input is used in place; other float types are rounded to BF16 first.
    std::vector<std::uint16_t> converted;
    const auto* source = reinterpret_cast<const std::uint16_t*>(weight.data());
    if (weight.dtype != DType::BF16) {
        converted.resize(static_cast<std::size_t>(n * k));
        decode_to_bf16(weight, converted);
        source = converted.data();
    }

    QuantizedTensor out;
    out.method = kt_method_name();
    auto [codes, scales] = pack(source, n, k);
    out.parts.emplace_back("weight", std::move(codes));
    out.parts.emplace_back("scale", std::move(scales));
    if (backward_) {
        // kt-kernel packs the BF16 part transposed, from the source values (not the codes above).
        auto [backward_codes, backward_scales] = pack(transposed_bf16(source, n, k).data(), k, n);
        out.parts.emplace_back(std::string(backward_weight_part), std::move(backward_codes));
        out.parts.emplace_back(std::string(backward_scale_part), std::move(backward_scales));
    }
    return out;
}

std::pair<Tensor, Tensor> AmxQuantizer::pack(const std::uint16_t* bf16, std::int64_t n, std::int64_t k) const {
    const auto* source = reinterpret_cast<const std::byte*>(bf16);
    Tensor codes = Tensor::uninitialized(DType::I8, {code_bytes(method_, n, k)});  // every byte is written below
    Tensor scales(DType::F32, {n});
    const RowKernels& kernels = row_kernels(active_isa());
    auto* code_ptr = codes.data_as<std::uint8_t>();
    auto* scale_ptr = scales.data_as<float>();
    const std::int64_t row_bytes = method_ == Method::int8 ? k : k / 2;
    const std::int64_t tiles = k / constants(method_).tile_k;
    const std::int64_t n_block = constants(method_).n_block;
    // N-blocks are independent (their own code range and scales): quantize them in parallel.
    // Within a block, 16 rows at a time are quantized into a small buffer and each of their
    // 64-byte tile rows is transposed into place as one 1024-byte panel.
    const auto blocks = static_cast<std::size_t>((n + n_block - 1) / n_block);
    parallel_for(0, blocks, 1, [&](std::size_t first, std::size_t last) {
        std::vector<std::uint8_t> panel(static_cast<std::size_t>(panel_rows * row_bytes));
        for (std::int64_t r0 = static_cast<std::int64_t>(first) * n_block;
             r0 < std::min(n, static_cast<std::int64_t>(last) * n_block); r0 += panel_rows) {
            for (std::int64_t i = 0; i < panel_rows; ++i) {
                const std::int64_t r = r0 + i;
                const std::byte* row = source + 2 * r * k;
                const float d = kt_row_scale(method_, kernels.amax(row, static_cast<std::size_t>(k)));
                const float inv = d != 0.0f ? 1.0f / d : 0.0f;
                scale_ptr[r] = d;
                std::uint8_t* dst = panel.data() + i * row_bytes;
                if (method_ == Method::int8)
                    kernels.quantize_int8(row, static_cast<std::size_t>(k), inv, reinterpret_cast<std::int8_t*>(dst));
                else
                    kernels.quantize_int4(row, static_cast<std::size_t>(k), inv, dst);
            }
            for (std::int64_t t = 0; t < tiles; ++t)
                kernels.transpose_panel(panel.data() + t * 64, static_cast<std::size_t>(row_bytes),
                                        code_ptr + tile_word_offset(method_, n, k, r0, t, 0));
        }
        kernels.finish_panels();
    });
    return {std::move(codes), std::move(scales)};
}

AmxQuantizer::PackedParts AmxQuantizer::packed_parts(const QuantizedTensor& quantized, const Shape& shape) const {
    const Tensor* codes = quantized.part("weight");
    const Tensor* scales = quantized.part("scale");
    if (shape.size() != 2 || !codes || !scales)
        throw Error(ErrorKind::input, "not an AMX quantized tensor (needs 'weight' and 'scale' parts and a 2-D shape)");
    const std::int64_t n = shape[0], k = shape[1];
    if (auto problem = shape_problem(method_, n, k); !problem.empty()) throw Error(ErrorKind::input, problem);
    if (codes->size_bytes() != static_cast<std::size_t>(code_bytes(method_, n, k)) ||
        scales->size_bytes() != static_cast<std::size_t>(4 * n))
        throw Error(ErrorKind::input, "part sizes do not match shape " + shape_to_string(shape), {.code = "SizeMismatch"});
    return {codes->data_as<std::uint8_t>(), scales->data_as<float>(), n, k};
}

Tensor AmxQuantizer::dequantize(const QuantizedTensor& quantized, const Shape& shape) const {
    const auto [c, d, n, k] = packed_parts(quantized, shape);
    Tensor out(DType::F32, shape);
    auto* values = out.data_as<float>();
    const std::int64_t tile_k = constants(method_).tile_k;
    for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t t = 0; t < k / tile_k; ++t)
            for (std::int64_t g = 0; g < 16; ++g) {
                const std::uint8_t* word = c + tile_word_offset(method_, n, k, r, t, g);
                for (std::int64_t b = 0; b < 4; ++b) {
                    const std::int64_t j = g * 4 + b;  // byte within the row's 64-byte tile row
                    if (method_ == Method::int8) {
                        values[r * k + t * 64 + j] = static_cast<float>(static_cast<std::int8_t>(word[b])) * d[r];
                    } else {
                        auto nibble = [](int v) { return v >= 8 ? v - 16 : v; };
                        values[r * k + t * 128 + j] = static_cast<float>(nibble(word[b] & 0xF) * 16) * d[r];
                        values[r * k + t * 128 + 64 + j] = static_cast<float>(nibble(word[b] >> 4) * 16) * d[r];
                    }
                }
            }
    return out;
}

namespace {

// quantize() multiplies by fl32(1/d); below d = 2^-128 that is +inf and every code saturates
// (or is whatever the kernel makes of 0 * inf), as in kt-kernel.
bool saturated(float d) noexcept { return d > 0 && std::isinf(1.0f / d); }

}  // namespace

std::optional<Tensor> AmxQuantizer::error_bounds(const QuantizedTensor& quantized, const Shape& shape) const {
    const auto [codes, d, n, k] = packed_parts(quantized, shape);
    // Rounding slack in steps: fl32(1/d) and fl32(x * inv) move the code by up to about
    // 127 * 2^-24 + 2^-18, and the decoded float q*d is rounded by up to 127 * 2^-24 of d.
    const double slack = 1.0 / 16384;
    const double steps = method_ == Method::int8 ? 0.5 + slack : 16.0 * (0.53125 + slack);
    // A saturated row decodes to at most 128 d while |w| <= 127 d (INT4: 112 d): 256 d covers
    // any code it holds.
    const double saturated_steps = 256;
    Tensor bounds(DType::F32, {n, 1});
    for (std::int64_t r = 0; r < n; ++r) {
        const auto bound =
            static_cast<float>((saturated(d[r]) ? saturated_steps : steps) * static_cast<double>(std::fabs(d[r])));
        bounds.data_as<float>()[r] = std::nextafter(bound, INFINITY);  // never round the bound down
    }
    return bounds;
}

std::string AmxQuantizer::stored_problem(const QuantizedTensor& stored, const TensorView& source) const {
    std::string problem = kt_range_problem(stored, source.shape);
    if (!backward_) return problem;
    if (std::string b = backward_problem(stored, source); !b.empty()) problem += (problem.empty() ? "" : "; ") + b;
    return problem;
}

std::string AmxQuantizer::backward_problem(const QuantizedTensor& stored, const TensorView& source) const {
    const Tensor* codes = stored.part(backward_weight_part);
    const Tensor* scales = stored.part(backward_scale_part);
    if (!codes || !scales) return "the backward weights are missing";
    const std::int64_t n = source.shape[0], k = source.shape[1];
    const Shape transposed{k, n};
    QuantizedTensor backward;  // the backward parts under the names the forward decoder reads
    backward.parts.emplace_back("weight", Tensor::copy_of(codes->view()));
    backward.parts.emplace_back("scale", Tensor::copy_of(scales->view()));
    std::vector<float> values(static_cast<std::size_t>(n * k));
    decode_to_f32(source, values);
    std::string problem = backward_bound_problem(dequantize(backward, transposed), *error_bounds(backward, transposed), values, n, k);
    if (std::string range = kt_range_problem(backward, transposed); !range.empty())
        problem += (problem.empty() ? "" : "; ") + range;
    return problem.empty() ? problem : "backward weights: " + problem;
}

std::string AmxQuantizer::kt_range_problem(const QuantizedTensor& quantized, const Shape& shape) const {
    const auto [c, d, n, k] = packed_parts(quantized, shape);
    const std::int64_t tile_k = constants(method_).tile_k;
    std::int64_t count = 0, rows = 0, first = -1;
    for (std::int64_t r = 0; r < n; ++r) {
        if (saturated(d[r])) continue;
        std::int64_t in_row = 0;
        for (std::int64_t t = 0; t < k / tile_k; ++t)
            for (std::int64_t g = 0; g < 16; ++g) {
                const std::uint8_t* word = c + tile_word_offset(method_, n, k, r, t, g);
                for (std::int64_t b = 0; b < 4; ++b) {
                    if (method_ == Method::int8) in_row += word[b] == 0x80;
                    else in_row += ((word[b] & 0xF) == 0x8) + ((word[b] >> 4) == 0x8);  // two nibbles a byte
                }
            }
        if (in_row && rows++ == 0) first = r;
        count += in_row;
    }
    if (!count) return {};
    const bool int8 = method_ == Method::int8;
    return std::to_string(count) + " code(s) of " + (int8 ? "-128" : "-8") + " in " + std::to_string(rows) + " row(s) (first: row " +
           std::to_string(first) + "), outside kt-kernel's range " + (int8 ? "-127..127" : "-7..7") +
           ": its AVX-512 products multiply them with the wrong sign (kt-kernel operators/amx/la/amx_quantization.hpp:237-252)";
}

std::vector<std::int64_t> AmxQuantizer::saturated_rows(const QuantizedTensor& quantized, const Shape& shape) const {
    const auto [codes, d, n, k] = packed_parts(quantized, shape);
    std::vector<std::int64_t> rows;
    for (std::int64_t r = 0; r < n; ++r)
        if (saturated(d[r])) rows.push_back(r);
    return rows;
}

}  // namespace moequant::amx
