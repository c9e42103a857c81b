#include "moe_int8_quantizer.hpp"

#include "aocl_int8_layout.hpp"

#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

namespace moequant::moe_int {
namespace {

// kt-kernel's N_BLOCK_UP_GATE and N_BLOCK_DOWN (operators/moe_kernel/la/kernel.hpp), the rows
// of one reordered block.
constexpr std::int64_t gate_up_block_rows = 32;
constexpr std::int64_t down_block_rows = 64;

// static_cast<int8_t>(x) as x86 computes it: cvttss2si to int32 (NaN and out-of-range give
// 0x80000000) and its low byte. kt's rows of zeros divide 0 by 0; their codes are 0.
std::int8_t kt_code(float rounded) noexcept {
    if (!(std::fabs(rounded) < 2147483648.0f)) return 0;
    return static_cast<std::int8_t>(static_cast<std::uint8_t>(static_cast<std::uint32_t>(static_cast<std::int32_t>(rounded))));
}

std::int32_t read_i32(const std::uint8_t* p) noexcept {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

}  // namespace

float moe_int8_row_scale(float amax) noexcept {
    // fl32(1/127): kt-kernel divides amax by 127 but is built with -ffast-math, which makes the
    // division this multiplication (as for AMXINT8; the golden vectors of kt's own build show it).
    constexpr std::uint32_t one_over_127_bits = 0x3C010204u;
    return amax * std::bit_cast<float>(one_over_127_bits);
}

MoeInt8Quantizer::MoeInt8Quantizer()
    : gate_up_(new MoeInt8Quantizer(gate_up_block_rows)), down_(new MoeInt8Quantizer(down_block_rows)) {}

std::string_view MoeInt8Quantizer::description() const {
    return "kt-kernel MOE_INT8 (AOCL, CPUs without AMX): per-row symmetric INT8 in AOCL's reordered blocks";
}

Options MoeInt8Quantizer::facts() const { return {{"kt.method", "MOE_INT8"}, {"kt.file_prefix", "MOE_INT8"}}; }

const Quantizer* MoeInt8Quantizer::for_matrix(const MatrixRole& role) const {
    if (!gate_up_) return nullptr;  // a variant packs its own matrices
    return role.projection == Projection::down ? down_.get() : gate_up_.get();
}

void MoeInt8Quantizer::require_variant() const {
    if (block_rows_ == 0)
        throw Error(ErrorKind::internal, "moe-int8 packs gate/up and down matrices differently: use quantizer_for()");
}

std::vector<TensorSpec> MoeInt8Quantizer::output_layout(const Shape& matrix) const {
    require_variant();
    if (matrix.size() != 2)
        throw Error(ErrorKind::input, "expected a 2-D weight, got shape " + shape_to_string(matrix), {.code = "ShapeMismatch"});
    const std::int64_t n = matrix[0], k = matrix[1];
    if (n <= 0 || k <= 0 || n % block_rows_ != 0)
        throw Error(ErrorKind::input,
                    "MOE_INT8 packs " + std::string(block_rows_ == down_block_rows ? "down" : "gate/up") + " matrices in blocks of " +
                        std::to_string(block_rows_) + " output rows: " + std::to_string(n) + " rows are not a multiple",
                    {.code = "UnpackableShape"});
    // 128 x the codes' sum of a row must fit the int32 column sum AOCL stores.
    if (k > (std::int64_t{1} << 31) / (128 * 127))
        throw Error(ErrorKind::input, "MOE_INT8 rows of " + std::to_string(k) + " inputs overflow AOCL's int32 column sums",
                    {.code = "UnpackableShape"});
    return {{"weight", DType::I8, {n / block_rows_ * aocl_block_bytes(block_rows_, k)}}, {"scale", DType::F32, {n}}};
}

QuantizedTensor MoeInt8Quantizer::quantize(const TensorView& weight) const {
    output_layout(weight.shape);  // checks the shape rules
    const std::int64_t n = weight.shape[0], k = weight.shape[1], nb = block_rows_;
    // BF16 input is read in place; other float types are rounded to BF16 first, as kt's converter loads them.
    std::vector<std::uint16_t> converted;
    const std::byte* source = weight.data();
    if (weight.dtype != DType::BF16) {
        converted.resize(static_cast<std::size_t>(n * k));
        decode_to_bf16(weight, converted);
        source = reinterpret_cast<const std::byte*>(converted.data());
    }

    QuantizedTensor out;
    out.method = "MOE_INT8";
    Tensor codes(DType::I8, {n / nb * aocl_block_bytes(nb, k)});  // zeroed: the K padding stays 0
    Tensor scales(DType::F32, {n});
    auto* code_ptr = codes.data_as<std::uint8_t>();
    auto* scale_ptr = scales.data_as<float>();
    parallel_for(0, static_cast<std::size_t>(n / nb), 1, [&](std::size_t first, std::size_t last) {
        std::vector<float> row(static_cast<std::size_t>(k));
        std::vector<std::int8_t> q(static_cast<std::size_t>(k));
        for (auto b = static_cast<std::int64_t>(first); b < static_cast<std::int64_t>(last); ++b) {
            std::uint8_t* block = code_ptr + b * aocl_block_bytes(nb, k);
            for (std::int64_t i = 0; i < nb; ++i) {
                const std::int64_t r = b * nb + i;
                convert_bf16_to_f32(source + 2 * r * k, row.data(), row.size());
                float amax = 0;
                for (const float v : row) amax = std::max(amax, std::fabs(v));
                const float d = moe_int8_row_scale(amax);
                scale_ptr[r] = d;
                for (std::int64_t c = 0; c < k; ++c) q[c] = kt_code(std::round(row[static_cast<std::size_t>(c)] / d));
                write_aocl_row(block, nb, k, i, q.data());
            }
        }
    });
    out.parts.emplace_back("weight", std::move(codes));
    out.parts.emplace_back("scale", std::move(scales));
    return out;
}

MoeInt8Quantizer::PackedParts MoeInt8Quantizer::packed_parts(const QuantizedTensor& quantized, const Shape& shape) const {
    const std::vector<TensorSpec> layout = output_layout(shape);
    const Tensor* codes = quantized.part("weight");
    const Tensor* scales = quantized.part("scale");
    if (!codes || !scales)
        throw Error(ErrorKind::input, "not a MOE_INT8 quantized tensor (needs 'weight' and 'scale' parts)");
    if (codes->elements() != shape_elements(layout[0].shape).value_or(0) ||
        scales->size_bytes() != static_cast<std::size_t>(4 * shape[0]))
        throw Error(ErrorKind::input, "part sizes do not match shape " + shape_to_string(shape), {.code = "SizeMismatch"});
    return {codes->data_as<std::uint8_t>(), scales->data_as<float>(), shape[0], shape[1]};
}

Tensor MoeInt8Quantizer::dequantize(const QuantizedTensor& quantized, const Shape& shape) const {
    const auto [codes, d, n, k] = packed_parts(quantized, shape);
    const std::int64_t nb = block_rows_;
    Tensor out(DType::F32, shape);
    auto* values = out.data_as<float>();
    for (std::int64_t r = 0; r < n; ++r) {
        const std::uint8_t* block = codes + (r / nb) * aocl_block_bytes(nb, k);
        for (std::int64_t c = 0; c < k; ++c)
            values[r * k + c] = static_cast<float>(static_cast<std::int8_t>(block[aocl_code_offset(nb, r % nb, c)])) * d[r];
    }
    return out;
}

std::optional<Tensor> MoeInt8Quantizer::error_bounds(const QuantizedTensor& quantized, const Shape& shape) const {
    const auto [codes, d, n, k] = packed_parts(quantized, shape);
    const double steps = 0.5 + 1.0 / 16384;  // the division and the decode round by far less than 2^-14 of a step
    Tensor bounds(DType::F32, {n, 1});
    for (std::int64_t r = 0; r < n; ++r)
        bounds.data_as<float>()[r] = std::nextafter(static_cast<float>(steps * std::fabs(static_cast<double>(d[r]))), INFINITY);
    return bounds;
}

std::string MoeInt8Quantizer::stored_problem(const QuantizedTensor& stored, const TensorView& source) const {
    const auto [codes, d, n, k] = packed_parts(stored, source.shape);
    const std::int64_t nb = block_rows_, padded = (k + 3) / 4 * 4;
    std::int64_t bad_sums = 0, bad_padding = 0, first = -1;
    for (std::int64_t r = 0; r < n; ++r) {
        const std::uint8_t* block = codes + (r / nb) * aocl_block_bytes(nb, k);
        const std::int64_t i = r % nb;
        std::uint32_t sum = 0;
        for (std::int64_t c = 0; c < k; ++c)
            sum += static_cast<std::uint32_t>(static_cast<std::int32_t>(static_cast<std::int8_t>(block[aocl_code_offset(nb, i, c)])));
        bool bad = false;
        if (static_cast<std::uint32_t>(read_i32(block + aocl_colsum_offset(nb, k, i))) != sum * 128u) bad = true, ++bad_sums;
        for (std::int64_t c = k; c < padded; ++c)
            if (block[aocl_code_offset(nb, i, c)] != 0) bad = true, ++bad_padding;
        if (bad && first < 0) first = r;
    }
    if (!bad_sums && !bad_padding) return {};
    return std::to_string(bad_sums) + " row(s) whose stored column sum is not 128 x their codes' sum and " +
           std::to_string(bad_padding) + " nonzero padding code(s) (first: row " + std::to_string(first) +
           "): AOCL's int8 GEMM subtracts the sums from every product, so kt-kernel's MOE_INT8 would compute this matrix wrongly";
}

bool MoeInt8Quantizer::packed_gemv(const QuantizedTensor& quantized, const Shape& shape, const float* x, float* y) const {
    const auto [codes, d, n, k] = packed_parts(quantized, shape);
    const std::int64_t nb = block_rows_, quads = (k + 3) / 4;
    std::vector<double> acc(static_cast<std::size_t>(nb));
    for (std::int64_t b = 0; b < n / nb; ++b) {
        const std::uint8_t* block = codes + b * aocl_block_bytes(nb, k);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t q = 0; q < quads; ++q)
            for (std::int64_t i = 0; i < nb; ++i)
                for (std::int64_t j = 0; j < 4 && q * 4 + j < k; ++j)
                    acc[static_cast<std::size_t>(i)] += static_cast<std::int8_t>(block[(q * nb + i) * 4 + j]) * static_cast<double>(x[q * 4 + j]);
        for (std::int64_t i = 0; i < nb; ++i) y[b * nb + i] = static_cast<float>(acc[static_cast<std::size_t>(i)] * d[b * nb + i]);
    }
    return true;
}

}  // namespace moequant::moe_int
