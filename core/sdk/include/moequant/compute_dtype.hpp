// The precision of the calibration forward's matrix products: the linear layers and the
// attention products of layer_ops.hpp (linear(), swiglu_mlp(), add_routed_experts(),
// causal_attention()).
//
// f32: FP32 products through BLIS, as torch runs the model in float32. bf16: both operands
// rounded once to BF16, products accumulated in FP32 and kept in FP32 (oneDNN's matmul, on AMX
// where the CPU has it, else AVX512-BF16 or AVX-512: oneDNN 2.x has no BF16 below AVX-512), as
// llm-compressor runs the model in bfloat16 except that moequant keeps every result in FP32.
// Either way the bytes do not depend on the thread count: both split the work into fixed
// blocks, each computed by one thread. The routers' logits stay FP32 (as the reference's
// routers compute them), and so do norms, softmax, rotary and GPTQ's solve; the engine's
// Hessians use bf16_product() for BF16-exact inputs (hessian.hpp).
#pragma once

#include <moequant/export.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moequant {

enum class ComputeDtype : int { f32 = 0, bf16 = 1 };

// The dtype the products use now: f32 until set_compute_dtype() says otherwise. Not meant to
// be changed while products run on other threads.
MOEQUANT_API ComputeDtype compute_dtype() noexcept;
MOEQUANT_API void set_compute_dtype(ComputeDtype dtype) noexcept;

// Whether this CPU multiplies BF16 natively (AVX512-BF16 or AMX-BF16): where bf16 is the faster
// choice, and the host's default.
MOEQUANT_API bool cpu_has_bf16_products() noexcept;

// Whether oneDNN can run BF16 products here at all (it needs AVX-512); set_compute_dtype(bf16)
// without them makes every product fail.
MOEQUANT_API bool bf16_products_available();

// oneDNN's name of the implementation its BF16 products use here (e.g. "brg:avx512_core_amx",
// "brg:avx512_core_bf16"), or "none".
MOEQUANT_API std::string bf16_product_isa();

// c[m, n] (dense, overwritten) = a[m, k] x op(b) for dense row-major BF16 operands: op(b) = b^T
// for b[n, k] (b_transposed), else b for b[k, n]; FP32 accumulation, on the calling thread alone
// (callers split the work into fixed blocks). The product behind the bf16 dtype, also for the
// engine's Hessians, whose BF16 inputs it multiplies exactly.
MOEQUANT_API void bf16_product(const std::uint16_t* a, const std::uint16_t* b, bool b_transposed, float* c, std::int64_t m,
                               std::int64_t n, std::int64_t k);

MOEQUANT_API std::string_view compute_dtype_name(ComputeDtype dtype) noexcept;
MOEQUANT_API std::optional<ComputeDtype> compute_dtype_from_name(std::string_view name) noexcept;

}  // namespace moequant
