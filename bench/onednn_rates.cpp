#include "onednn_rates.hpp"

#include "bench_timing.hpp"

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace moequant::bench {
namespace {

// oneDNN's OpenMP team size for this thread, set in the runtime oneDNN loaded.
void set_openmp_threads(int threads) {
    using SetThreads = void (*)(int);
    void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);
    auto set = reinterpret_cast<SetThreads>(gomp ? dlsym(gomp, "omp_set_num_threads") : dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    if (set) set(threads);
}

double sgemm_rate(std::int64_t n, int repeats) {
    std::vector<float> a(static_cast<std::size_t>(n * n)), b(a.size()), c(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        a[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
        b[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
    }
    const double t = best_seconds(repeats, [&] {
        if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n) != dnnl_success) {
            std::fprintf(stderr, "dnnl_sgemm failed\n");
            std::exit(1);
        }
    });
    return static_cast<double>(n) * n * n / t;
}

double bf16_rate(std::int64_t n, int repeats, std::string& kernel) {
    using dt = dnnl::memory::data_type;
    const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const dnnl::memory::desc a_desc({n, n}, dt::bf16, dnnl::memory::format_tag::ab);
    const dnnl::memory::desc b_desc({n, n}, dt::bf16, dnnl::memory::format_tag::ab);
    const dnnl::memory::desc c_desc({n, n}, dt::f32, dnnl::memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_desc, b_desc, c_desc), engine);
    kernel = pd.impl_info_str();
    const dnnl::matmul product(pd);
    std::vector<std::uint16_t> a(static_cast<std::size_t>(n * n), 0x3f80), b(a.size(), 0x3f00);  // 1.0, 0.5
    std::vector<float> c(a.size());
    dnnl::memory am(a_desc, engine, a.data()), bm(b_desc, engine, b.data()), cm(c_desc, engine, c.data());
    const double t = best_seconds(repeats, [&] {
        product.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        stream.wait();
    });
    return static_cast<double>(n) * n * n / t;
}

}  // namespace

OnednnRates onednn_rates(std::int64_t n, int threads, int repeats) {
    set_openmp_threads(threads);
    OnednnRates r;
    r.f32 = sgemm_rate(n, repeats);
    try {
        r.bf16 = bf16_rate(n, repeats, r.bf16_kernel);
    } catch (const dnnl::error&) {  // oneDNN 2.x has no BF16 products below AVX-512
        r.bf16_kernel = "none";
    }
    set_openmp_threads(1);
    return r;
}

TimedStep time_against_reference(int repeats, int threads, const std::function<void()>& step) {
    TimedStep timed;
    auto measure = [&] {
        const OnednnRates r = onednn_rates(2048, threads, 2);
        timed.reference.f32 = std::max(timed.reference.f32, r.f32);
        timed.reference.bf16 = std::max(timed.reference.bf16, r.bf16);
        timed.reference.bf16_kernel = r.bf16_kernel;
    };
    timed.seconds = 1e30;
    for (int i = 0; i < std::max(repeats, 1); ++i) {
        measure();
        timed.seconds = std::min(timed.seconds, best_seconds(1, step));
    }
    measure();
    return timed;
}

}  // namespace moequant::bench
