#include <moequant/compute_dtype.hpp>

#include "numeric/onednn_products.hpp"

#include <cpuid.h>

#include <atomic>

namespace moequant {

namespace {

constinit std::atomic<int> chosen{static_cast<int>(ComputeDtype::f32)};

// CPUID leaf 7: sub-leaf 1 EAX bit 5 is AVX512-BF16, sub-leaf 0 EDX bit 22 AMX-BF16 (the OS
// must also grant the AMX tile state; oneDNN asks for it before it uses AMX).
bool probe_bf16() noexcept {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool amx_bf16 = (edx & (1u << 22)) != 0;
    const bool has_subleaf_1 = eax >= 1;
    bool avx512_bf16 = false;
    if (has_subleaf_1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) avx512_bf16 = (eax & (1u << 5)) != 0;
    __builtin_cpu_init();
    return (avx512_bf16 && __builtin_cpu_supports("avx512f")) || amx_bf16;
}

}  // namespace

ComputeDtype compute_dtype() noexcept { return static_cast<ComputeDtype>(chosen.load(std::memory_order_relaxed)); }

void set_compute_dtype(ComputeDtype dtype) noexcept { chosen.store(static_cast<int>(dtype), std::memory_order_relaxed); }

bool cpu_has_bf16_products() noexcept {
    static const bool has = probe_bf16();
    return has;
}

bool bf16_products_available() {
    static const bool available = !detail::bf16_product_implementation(64, 64, 64, true).empty();
    return available;
}

std::string bf16_product_isa() {
    static const std::string isa = [] {
        const std::string impl = detail::bf16_product_implementation(256, 256, 256, true);
        return impl.empty() ? std::string("none") : impl;
    }();
    return isa;
}

void bf16_product(const std::uint16_t* a, const std::uint16_t* b, bool b_transposed, float* c, std::int64_t m, std::int64_t n,
                  std::int64_t k) {
    detail::bf16_product(a, b, b_transposed, c, m, n, k);
}

std::string_view compute_dtype_name(ComputeDtype dtype) noexcept { return dtype == ComputeDtype::bf16 ? "bf16" : "f32"; }

std::optional<ComputeDtype> compute_dtype_from_name(std::string_view name) noexcept {
    if (name == "f32" || name == "float32") return ComputeDtype::f32;
    if (name == "bf16" || name == "bfloat16") return ComputeDtype::bf16;
    return std::nullopt;
}

}  // namespace moequant
