// The `moe-int8` quantizer: kt-kernel's MOE_INT8 CPU method (its AOCL-BLAS "moe_kernel", for
// CPUs without AMX), byte for byte. Per row r of a [n, k] BF16 matrix: d = amax * fl32(1/127)
// (kt's amax / 127 under -ffast-math) and q = round(w / d) (half away from zero), no zero point; rows in blocks of 32 (gate, up) or 64
// (down) output rows, each block in AOCL's reordered int8 layout (aocl_int8_layout.hpp), then
// the n float32 scales as their own part (docs/kt-moe-int8.md).
#pragma once

#include <moequant/quantizer.hpp>

#include <memory>

namespace moequant::moe_int {

// kt's row scale d of a row whose largest magnitude is `amax`.
float moe_int8_row_scale(float amax) noexcept;

class MoeInt8Quantizer final : public Quantizer {
public:
    // The registered quantizer: it packs no matrix itself but hands each to its gate/up or
    // down variant (for_matrix()).
    MoeInt8Quantizer();

    std::string_view id() const override { return "moe-int8"; }
    std::string_view description() const override;
    // kt-kernel's MOE_INT8, in files prefixed MOE_INT8.
    Options facts() const override;
    const Quantizer* for_matrix(const MatrixRole& role) const override;

    // "weight" I8 [n / NB blocks of AOCL's reordered layout], "scale" F32 [n].
    std::vector<TensorSpec> output_layout(const Shape& matrix) const override;
    // weight: [n, k] BF16 (F16 and F32 are first rounded to BF16, as kt's converter loads them).
    QuantizedTensor quantize(const TensorView& weight) const override;
    // q * d as F32 [n, k], read from the blocks.
    Tensor dequantize(const QuantizedTensor& quantized, const Shape& shape) const override;
    // Per row: half a step d, plus 2^-14 of a step for the float division and the decode.
    std::optional<Tensor> error_bounds(const QuantizedTensor& quantized, const Shape& shape) const override;
    // What AOCL's GEMM relies on beyond the codes: each block's column sums (128 x the row's
    // codes; the GEMM subtracts them from every product) and zero padding past k.
    std::string stored_problem(const QuantizedTensor& stored, const TensorView& source) const override;
    // y = d * (codes . x), the blocks read in storage order (K quads, then rows) as the GEMM streams them.
    bool packed_gemv(const QuantizedTensor& quantized, const Shape& shape, const float* x, float* y) const override;

    // NB of a variant: 32 (gate, up) or 64 (down); 0 for the registered object.
    std::int64_t block_rows() const noexcept { return block_rows_; }

private:
    explicit MoeInt8Quantizer(std::int64_t block_rows) : block_rows_(block_rows) {}

    struct PackedParts {
        const std::uint8_t* codes;
        const float* scales;
        std::int64_t n, k;
    };
    // The "weight" and "scale" parts, checked against `shape`.
    PackedParts packed_parts(const QuantizedTensor& quantized, const Shape& shape) const;
    // Error(internal) on the registered object, which packs nothing itself.
    void require_variant() const;

    std::int64_t block_rows_ = 0;  // NB: 32 (gate, up) or 64 (down); 0 for the registered object
    std::unique_ptr<const MoeInt8Quantizer> gate_up_, down_;
};

}  // namespace moequant::moe_int
