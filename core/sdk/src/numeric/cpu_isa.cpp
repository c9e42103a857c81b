#include <moequant/cpu_isa.hpp>
#include <moequant/printable.hpp>

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace moequant {
namespace {

// F16C straight from CPUID (leaf 1, ECX bit 29): clang's __builtin_cpu_supports has no "f16c".
bool cpu_has_f16c() noexcept {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}

// __builtin_cpu_supports also checks that the OS saves the YMM / ZMM state (XGETBV), which
// F16C needs as well (it is part of the AVX tier, so the avx2 check covers it).
Isa probe_cpu() noexcept {
    __builtin_cpu_init();
    const bool avx2_tier = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    const bool avx512_tier = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    // The AVX-512 kernels also use AVX2/F16C instructions, so that tier needs both.
    if (avx2_tier && avx512_tier) return Isa::avx512;
    if (avx2_tier) return Isa::avx2;
    return Isa::scalar;
}

// MOEQUANT_ISA, read on first use (never during static initialisation, so a program can set it
// before calling into moequant). An unknown value is reported once and ignored.
Isa environment_limit() noexcept {
    static const Isa limit = [] {
        const char* text = std::getenv("MOEQUANT_ISA");
        if (text == nullptr || *text == '\0') return Isa::avx512;
        if (auto isa = isa_from_name(text)) return *isa;
        std::fprintf(stderr, "moequant: ignoring MOEQUANT_ISA='%s' (expected scalar, avx2 or avx512)\n",
                     printable_name(text).c_str());
        return Isa::avx512;
    }();
    return limit;
}

// The one piece of mutable global state: the limit set by set_isa_limit (-1: none set, then
// MOEQUANT_ISA applies). Constant-initialised.
constinit std::atomic<int> explicit_limit{-1};

}  // namespace

Isa detected_isa() noexcept {
    static const Isa detected = probe_cpu();
    return detected;
}

Isa active_isa() noexcept {
    const int explicit_value = explicit_limit.load(std::memory_order_relaxed);
    const Isa limit = explicit_value < 0 ? environment_limit() : static_cast<Isa>(explicit_value);
    return std::min(detected_isa(), limit);
}

void set_isa_limit(Isa limit) noexcept {
    explicit_limit.store(static_cast<int>(limit), std::memory_order_relaxed);
}

std::vector<Isa> available_isas() {
    std::vector<Isa> isas;
    for (int i = 0; i <= static_cast<int>(detected_isa()); ++i) isas.push_back(static_cast<Isa>(i));
    return isas;
}

std::string_view isa_name(Isa isa) noexcept {
    switch (isa) {
        case Isa::scalar: return "scalar";
        case Isa::avx2: return "avx2";
        case Isa::avx512: return "avx512";
    }
    return "unknown";
}

std::optional<Isa> isa_from_name(std::string_view name) noexcept {
    for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512})
        if (isa_name(isa) == name) return isa;
    return std::nullopt;
}

}  // namespace moequant
