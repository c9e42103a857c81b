// Quantize throughput of the amx plugin on one 2048 x 7168 BF16 matrix (an expert's gate or
// up projection of DeepSeek-V3), single-threaded and with 2 threads, as a ratio to this
// machine's single-thread memory read bandwidth measured in the same run (kt-kernel's own
// packing routine reaches about 0.24 of it on the reference machine class, shared/perf).
// Usage: moequant_amx_quantize_bench [plugin-dir]

#include "bench_timing.hpp"

#include <moequant/cpu_isa.hpp>
#include <moequant/engine/plugin_registry.hpp>
#include <moequant/parallel.hpp>

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

using namespace moequant;
using moequant::bench::best_seconds;

namespace {

// Single-thread read bandwidth: sum 512 MiB with 256-bit loads (AVX2 when the CPU has it),
// four independent accumulators, so the loop is limited by memory, not by the adds.
__attribute__((target("avx2"))) std::uint64_t sum_avx2(const std::uint64_t* p, std::size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (std::size_t i = 0; i < n; i += 16) {
        a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
        b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
        c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
        d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
    }
    alignas(32) std::uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

std::uint64_t sum_scalar(const std::uint64_t* p, std::size_t n) {
    std::uint64_t a = 0, b = 0, c = 0, d = 0;
    for (std::size_t i = 0; i < n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    return a + b + c + d;
}

double read_bandwidth() {
    const std::size_t words = 64u << 20;
    auto* buffer = static_cast<std::uint64_t*>(std::aligned_alloc(64, words * 8));
    for (std::size_t i = 0; i < words; ++i) buffer[i] = i;
    const bool avx2 = detected_isa() >= Isa::avx2;
    volatile std::uint64_t sink = 0;
    double t = best_seconds(5, [&] { sink = avx2 ? sum_avx2(buffer, words) : sum_scalar(buffer, words); });
    (void)sink;
    std::free(buffer);
    return static_cast<double>(words * 8) / t / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
    Registry registry;
    std::filesystem::path dir = argc > 1 ? std::filesystem::path(argv[1]) : default_plugin_dir();
    registry.load_file(dir / "moequant-quantizer-amx.so", PluginOrigin::explicit_file);
    if (!registry.rejections().empty()) {
        std::fprintf(stderr, "cannot load the amx plugin: %s\n", registry.rejections().front().reason.c_str());
        return 1;
    }
    const std::int64_t n = 2048, k = 7168;
    std::vector<std::uint16_t> weight(static_cast<std::size_t>(n * k));
    std::uint64_t state = 1;
    for (auto& w : weight) {  // BF16 values of about N(0, 0.02)
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        w = static_cast<std::uint16_t>(0x3C00 + ((state >> 33) & 0x3FF) + (((state >> 60) & 1) << 15));
    }
    TensorView view{DType::BF16, {n, k}, std::as_bytes(std::span<const std::uint16_t>(weight))};
    const double input_gb = static_cast<double>(weight.size() * 2) / 1e9;

    const double bandwidth = read_bandwidth();
    std::printf("reference: single-thread memory read %.1f GB/s\n", bandwidth);
    for (const char* id : {"amx-int8", "amx-int4"}) {
        const Quantizer* q = registry.quantizer(id);
        for (Isa isa : available_isas()) {
            set_isa_limit(isa);
            set_max_threads(1);
            const double one = input_gb / best_seconds(5, [&] { q->quantize(view); });
            set_max_threads(2);
            const double two = input_gb / best_seconds(5, [&] { q->quantize(view); });
            std::printf("%s %-7s 1 thread %6.2f GB/s = %.2f x read bandwidth; 2 threads %6.2f GB/s = %.2f x 1 thread\n",
                        id, std::string(isa_name(isa)).c_str(), one, one / bandwidth, two, two / one);
        }
    }
    return 0;
}
