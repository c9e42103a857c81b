#include "onednn_products.hpp"

#include <moequant/error.hpp>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace moequant::detail {

namespace {

// One BF16 product's shape, layout and scaling: what a compiled oneDNN matmul is specific to.
struct Shape {
    bool a_transposed = false, b_transposed = false;
    std::int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
    float alpha = 1, beta = 0;
    auto tied() const { return std::tie(a_transposed, b_transposed, m, n, k, lda, ldb, ldc, alpha, beta); }
    bool operator<(const Shape& o) const { return tied() < o.tied(); }
};

// Caps this thread's OpenMP team at one: Debian's oneDNN threads with OpenMP, and the caller's
// fixed blocks are the parallelism. Looked up in the OpenMP runtime oneDNN loaded (so the SDK
// needs no OpenMP of its own compiler); nothing to cap when oneDNN threads otherwise.
void single_threaded() {
    using SetThreads = void (*)(int);
    static const SetThreads set = [] {
        void* gomp = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD);  // oneDNN's, already loaded
        void* symbol = gomp ? dlsym(gomp, "omp_set_num_threads") : dlsym(RTLD_DEFAULT, "omp_set_num_threads");
        return reinterpret_cast<SetThreads>(symbol);
    }();
    if (set) set(1);
}

// op(X) of a row-major X with row stride ld: X itself, or X^T read with swapped strides.
dnnl::memory::desc operand(std::int64_t rows, std::int64_t cols, bool transposed, std::int64_t ld, dnnl::memory::data_type type) {
    return dnnl::memory::desc({rows, cols}, type, transposed ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
}

dnnl::matmul::primitive_desc describe(const dnnl::engine& engine, const Shape& s) {
    using dt = dnnl::memory::data_type;
    const auto a = operand(s.m, s.k, s.a_transposed, s.lda, dt::bf16);
    const auto b = operand(s.k, s.n, s.b_transposed, s.ldb, dt::bf16);
    const auto c = operand(s.m, s.n, false, s.ldc, dt::f32);
    dnnl::primitive_attr attr;
    if (s.alpha != 1) attr.set_output_scales(0, {s.alpha});
    if (s.beta != 0) {
        dnnl::post_ops sum;
        sum.append_sum(s.beta);
        attr.set_post_ops(sum);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), attr, engine);
}

// One engine, stream and set of compiled products per thread: products of a shape seen before
// skip oneDNN's descriptor work.
struct Compiled {
    dnnl::matmul product;
    dnnl::memory::desc a, b, c;
};

// Compiled products kept per thread, and in oneDNN's own cache (shared by the threads): few, as
// each holds JIT code and the experts' row counts make most shapes one-offs (measured: 512 per
// thread grew a small preset's peak memory by 17 MB, 32 by 4 MB over none).
constexpr std::size_t kept_per_thread = 8, kept_by_onednn = 32;

struct ThreadProducts {
    ThreadProducts() {
        static const bool capped = [] {
            dnnl::set_primitive_cache_capacity(static_cast<int>(kept_by_onednn));
            return true;
        }();
        (void)capped;
    }
    dnnl::engine engine{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream{engine};
    std::map<Shape, Compiled> compiled;

    Compiled& product(const Shape& shape) {
        auto it = compiled.find(shape);
        if (it != compiled.end()) return it->second;
        if (compiled.size() >= kept_per_thread) compiled.clear();
        const dnnl::matmul::primitive_desc pd = describe(engine, shape);
        return compiled.emplace(shape, Compiled{dnnl::matmul(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc()}).first->second;
    }
};

ThreadProducts& products() {
    thread_local ThreadProducts p;
    return p;
}

// C (m x n, row stride ldc) scaled by beta: what a product over an empty sum leaves.
void scale_only(float* c, std::int64_t m, std::int64_t n, std::int64_t ldc, float beta) {
    for (std::int64_t r = 0; r < m; ++r) {
        float* row = c + r * ldc;
        if (beta == 0)
            std::fill_n(row, n, 0.0f);
        else
            std::transform(row, row + n, row, [beta](float v) { return beta * v; });
    }
}

std::string_view isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
        case dnnl_cpu_isa_sse41: return "sse41";
        case dnnl_cpu_isa_avx: return "avx";
        case dnnl_cpu_isa_avx2: return "avx2";
        case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
        case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
        case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
        case dnnl_cpu_isa_avx512_core: return "avx512_core";
        case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
        case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
        case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
        default: return "no JIT (reference code)";
    }
}

}  // namespace

void bf16_gemm(bool a_transposed, bool b_transposed, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const std::uint16_t* a, std::int64_t lda, const std::uint16_t* b, std::int64_t ldb, float beta, float* c,
               std::int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {  // an empty sum
        scale_only(c, m, n, ldc, beta);
        return;
    }
    single_threaded();
    try {
        ThreadProducts& p = products();
        Compiled& compiled = p.product(Shape{a_transposed, b_transposed, m, n, k, lda, ldb, ldc, alpha, beta});
        dnnl::memory am(compiled.a, p.engine, const_cast<std::uint16_t*>(a));
        dnnl::memory bm(compiled.b, p.engine, const_cast<std::uint16_t*>(b));
        dnnl::memory cm(compiled.c, p.engine, c);
        compiled.product.execute(p.stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        p.stream.wait();
    } catch (const dnnl::error& e) {
        throw Error(ErrorKind::internal, std::string("oneDNN BF16 product failed: ") + e.what());
    }
}

void bf16_product(const std::uint16_t* a, const std::uint16_t* b, bool b_transposed, float* c, std::int64_t m, std::int64_t n,
                  std::int64_t k) {
    bf16_gemm(false, b_transposed, m, n, k, 1.0f, a, k, b, b_transposed ? k : n, 0.0f, c, n);
}

std::string bf16_product_implementation(std::int64_t m, std::int64_t n, std::int64_t k, bool b_transposed) {
    single_threaded();
    try {
        return describe(products().engine, Shape{false, b_transposed, m, n, k, k, b_transposed ? k : n, n, 1.0f, 0.0f})
            .impl_info_str();
    } catch (const dnnl::error&) {  // no implementation: oneDNN 2.x needs AVX-512 for BF16
        return {};
    }
}

void f32_gemm(bool a_transposed, bool b_transposed, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
              std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        scale_only(c, m, n, ldc, beta);
        return;
    }
    single_threaded();
    const dnnl_status_t status = dnnl_sgemm(a_transposed ? 'T' : 'N', b_transposed ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                            beta, c, ldc);
    if (status != dnnl_success)
        throw Error(ErrorKind::internal, "oneDNN's sgemm failed (status " + std::to_string(static_cast<int>(status)) + ")");
}

std::string f32_gemm_kernels() {
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " sgemm, " +
           std::string(isa_name(dnnl_get_effective_cpu_isa()));
}

}  // namespace moequant::detail
