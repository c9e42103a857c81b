// kt-kernel's CPU MoE arithmetic for the methods moequant writes for it (AMXINT4, AMXINT8,
// RAWINT4's amx backend, and MOE_INT8's integer product), re-implemented from kt's source (kvcache-ai/ktransformers 95009ea6;
// docs/kt-arithmetic.md gives every step with its file and line) so that tests can run kt's
// integer products on moequant's outputs where kt itself cannot be built (CI has no network).
// Scalar code: integer sums are exact, so the order kt's vectors add them in does not matter;
// the float steps (scales, BF16 roundings of the intermediates) are kt's.
#pragma once

#include <moequant/quantizer.hpp>
#include <moequant/router.hpp>

#include <cstdint>
#include <functional>
#include <vector>

namespace moequant::test::kt {

// One activation byte times one weight byte as kt's replacement for _mm512_dpbssd_epi32 computes
// it: the weight takes the activation's sign (_mm256_sign_epi8: -(-128) wraps to -128), the
// activation becomes its magnitude as an unsigned byte (_mm512_abs_epi8), and dpbusd multiplies
// unsigned by signed. Exact for every weight but -128, whose product with a negative
// activation comes out with the wrong sign.
std::int32_t signed_byte_product(std::int8_t activation, std::int8_t weight) noexcept;

// Activations as kt's BufferA quantizes them: per row, or per group of `group` columns
// (RAWINT4), d = amax * fl(1/127) (kt divides by 127 under -ffast-math), code =
// saturate(rne(x * fl(1/d))), 0 where d is 0.
struct QuantizedActivations {
    std::int64_t rows = 0, cols = 0, group = 0;  // group: columns per scale (cols for one per row)
    std::vector<std::int8_t> codes;              // [rows, cols]
    std::vector<float> scales;                   // [rows, cols / group]
};
QuantizedActivations quantize_activations(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t group);

// A weight matrix as kt's kernels multiply it: [rows, cols] signed bytes (AMXINT8: the code q;
// AMXINT4 and RAWINT4: 16 q, the nibble in the high half of a byte, so nibble -8 is -128) with
// one scale per row (AMX) or per group of 32 columns (RAWINT4).
struct KernelWeights {
    std::int64_t rows = 0, cols = 0, group = 0;
    std::vector<std::int8_t> bytes;
    std::vector<float> scales;  // [rows, cols / group]
    bool rawint4 = false;       // its products are divided by 16 at the end (the scale is per code)
};

// The "weight" and "scale" parts of an AMXINT4 / AMXINT8 part of shape [rows, cols], unpacked
// from kt's tile layout.
KernelWeights amx_weights(const QuantizedTensor& stored, bool int4, std::int64_t rows, std::int64_t cols);
// A compressed-tensors W4A16 matrix (weight_packed I32, weight_scale BF16 [rows, cols / 32]) as
// kt's RAWINT4 amx backend reads it: nibble xor 8 (the stored code + 8 made signed), shifted up.
KernelWeights rawint4_weights(const QuantizedTensor& stored, std::int64_t rows, std::int64_t cols);

// y [rows, weights.rows] = the quantized activations times the weights, as kt computes it:
// AMX, as * bs * float(sum of signed_byte_product over the row); RAWINT4, the sum over 32-column
// groups of (as_g * bs_g) * float(the group's integer sum), divided by 16.
std::vector<float> kernel_product(const QuantizedActivations& a, const KernelWeights& w);

// The product of BF16-exact rows x [rows, cols] with `w` as kt's MoE runs it (activations
// quantized per row, or per 32 columns for RAWINT4).
std::vector<float> kt_linear(const std::vector<float>& x, std::int64_t rows, const KernelWeights& w);

// RAWINT4's avxvnni backend (operators/avx2/rawint4_avxvnni-moe.hpp): the nibbles unpacked to
// signed bytes -8..7 (no shift), each group's activations quantized to -127..127 and biased by
// 128 into unsigned bytes, dpbusd, then 128 x the group's weight sum taken off: the exact
// integer dot product for every code, scaled by (d_a * d_w) per group. `w` as rawint4_weights()
// gives it (its bytes are 16 q, divided back here).
std::vector<float> avxvnni_linear(const std::vector<float>& x, std::int64_t rows, const KernelWeights& w);

// One expert as kt holds it: its threadpool parts (gate/up split by rows, down by columns, as kt's
// TP parts and moequant's --threadpool-count store them); one part when unsplit.
struct KernelExpert {
    std::vector<KernelWeights> gate, up, down;
};

// Which product a forward runs: kt_linear (AMX methods, RAWINT4's amx backend) or avxvnni_linear.
using Linear = std::vector<float> (*)(const std::vector<float>&, std::int64_t, const KernelWeights&);

// kt's routed-expert forward for BF16-exact tokens x [tokens, hidden]: per token and chosen
// expert, per part, gate and up outputs rounded to BF16, silu(gate) * up rounded to BF16, the
// part's down output rounded to BF16, weighted by the router and summed in F32 over experts and
// parts, the result rounded to BF16. `expert(e)` gives expert e.
std::vector<float> moe_forward(const std::vector<float>& x, std::int64_t tokens, std::int64_t hidden, const Routing& routing,
                               const std::function<const KernelExpert&(std::int64_t)>& expert, Linear linear = kt_linear);

// MOE_INT8 (kt's moe_kernel over AOCL-BLAS's s8s8s32os32 GEMM; docs/kt-moe-int8.md). Its
// activations, per row as BufferA::from_mat quantizes them: d = amax * fl(1/127), code =
// int8(round(x / d)) (half away from zero, no saturation: |x / d| <= 127), 0 where d is 0.
QuantizedActivations moe_int8_activations(const float* x, std::int64_t rows, std::int64_t cols);

// A MOE_INT8 weight part as the GEMM reads it: AOCL's reordered blocks of `block_rows` rows
// (32 gate/up, 64 down), each codes [ceil(cols / 4)][block_rows][4] then the int32 column sums.
struct AoclWeights {
    std::int64_t rows = 0, cols = 0, block_rows = 0;
    std::vector<std::uint8_t> blocks;
    std::vector<float> scales;  // [rows]
};
AoclWeights aocl_weights(const QuantizedTensor& stored, std::int64_t rows, std::int64_t cols, std::int64_t block_rows);

// The int32 results [a.rows, w.rows] of AOCL's s8s8s32 GEMM: the activations made unsigned by
// adding 128, multiplied unsigned by signed (vpdpbusd: exact, no saturation) over the stored
// codes, padding included, then the stored column sum (128 x the row's codes) taken off. With
// right column sums this is the exact integer dot product for every code -128..127; kt then
// scales each by d_a * d_w (GemmKernelInt8::apply_scale).
std::vector<std::int32_t> aocl_integer_product(const QuantizedActivations& a, const AoclWeights& w);

}  // namespace moequant::test::kt
