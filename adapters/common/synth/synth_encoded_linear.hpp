// How synth stores the linears a family marks quantizable (SynthTensor::dtype F8_E4M3) under
// each source encoding it can write: the tensors (the primary first), their bytes, and the
// config's quantization_config. The packing of each encoding is in its own file
// (synth_int4, synth_mxfp4, synth_gptq; FP8 here).
#pragma once

#include <moequant/fp8_dequant.hpp>
#include <moequant/safetensors_writer.hpp>
#include <moequant/tensor.hpp>

#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace moequant::adapters {

// How synth stores the linears a family marks quantizable (SynthTensor::dtype F8_E4M3).
enum class SynthEncoding {
    bf16,         // not quantized
    fp8_block,    // DeepSeek style: 128x128 blocks, F32 `<w>_scale_inv`, quant_method fp8
    fp8_block_e8m0,  // DeepSeek-V4-Flash's non-expert linears: 128x128 blocks, F8_E8M0 `<stem>.scale`
                     // (powers of two, scale_fmt ue8m0); a family asks for it per tensor
    fp8_channel,  // GLM-4.x-FP8 style: compressed-tensors float-quantized, BF16 `<w>_scale` [N,1],
                  // F32 `<stem>.input_scale` [1] (static activation scales, never read)
    int4_ct,      // Kimi-K2-Thinking style: routed experts compressed-tensors pack-quantized INT4,
                  // group 32, BF16 scales, weight_shape; every other marked linear stays BF16
    mxfp4,        // DeepSeek-V4-Flash style: routed experts MXFP4 (I8 `<stem>.weight` [N, K/2] and
                  // F8_E8M0 `<stem>.scale` [N, K/32], `expert_dtype: fp4`); the rest BF16
    gptq,         // Qwen GPTQ-Int4 style: every marked linear AutoGPTQ INT4 (qweight, qzeros v1,
                  // F16 scales, g_idx), group 32, symmetric, no act-order
    mxfp8,        // MiniMax-M3-MXFP8 style: every marked linear E4M3 with a U8 (E8M0) scale per 32
                  // elements of a row, `<w>_scale_inv` [N, K/32], powers of two; quant_method mxfp8
    awq,          // AutoAWQ style: every marked linear AWQ INT4 in the GEMM packing (qweight,
                  // qzeros, F16 scales), group 32, zero points
};

// The tensors a marked linear `name` ([N, K]) is stored as, the primary one first.
std::vector<TensorSpec> encoded_linear_specs(SynthEncoding encoding, BlockSize fp8_block, const std::string& name,
                                             const Shape& shape);

// The bytes of one of those tensors, from the linear's float values. `power_of_two_scales`:
// FP8 scales rounded up to powers of two, as checkpoints with `scale_fmt: ue8m0` store them.
std::vector<std::uint8_t> encoded_linear_bytes(SynthEncoding encoding, BlockSize fp8_block, const Shape& shape,
                                               const TensorSpec& spec, const std::vector<float>& values,
                                               bool power_of_two_scales = false);

// The quantization_config of an encoding: DeepSeek-style FP8 (model-families.md §4.2), or
// compressed-tensors float-quantized per channel (model-families-2026.md §2.3); null for bf16.
boost::json::value quantization_config(SynthEncoding encoding);

// Little-endian bytes of values as BF16 or F16 (nearest even) or F32.
std::vector<std::uint8_t> bf16_bytes(const std::vector<float>& values);
std::vector<std::uint8_t> f16_bytes(const std::vector<float>& values);
std::vector<std::uint8_t> f32_bytes(const std::vector<float>& values);

}  // namespace moequant::adapters
