#include "bf16_products.hpp"

#include <moequant/error.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace moequant::detail {

namespace {

using Shape = std::tuple<std::int64_t, std::int64_t, std::int64_t, bool>;

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

dnnl::matmul::primitive_desc describe(const dnnl::engine& engine, const Shape& shape) {
    const auto [m, n, k, transposed] = shape;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc a({m, k}, dt::bf16, dnnl::memory::dims{k, 1});
    const dnnl::memory::desc b({k, n}, dt::bf16, transposed ? dnnl::memory::dims{1, k} : dnnl::memory::dims{n, 1});
    const dnnl::memory::desc c({m, n}, dt::f32, dnnl::memory::dims{n, 1});
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), engine);
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

}  // namespace

void bf16_product(const std::uint16_t* a, const std::uint16_t* b, bool b_transposed, float* c, std::int64_t m, std::int64_t n,
                  std::int64_t k) {
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {  // an empty sum
        std::fill_n(c, m * n, 0.0f);
        return;
    }
    single_threaded();
    try {
        ThreadProducts& p = products();
        const Shape shape{m, n, k, b_transposed};
        Compiled& compiled = p.product(shape);
        dnnl::memory am(compiled.a, p.engine, const_cast<std::uint16_t*>(a));
        dnnl::memory bm(compiled.b, p.engine, const_cast<std::uint16_t*>(b));
        dnnl::memory cm(compiled.c, p.engine, c);
        compiled.product.execute(p.stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
        p.stream.wait();
    } catch (const dnnl::error& e) {
        throw Error(ErrorKind::internal, std::string("oneDNN BF16 product failed: ") + e.what());
    }
}

std::string bf16_product_implementation(std::int64_t m, std::int64_t n, std::int64_t k, bool b_transposed) {
    single_threaded();
    try {
        return describe(products().engine, {m, n, k, b_transposed}).impl_info_str();
    } catch (const dnnl::error&) {  // no implementation: oneDNN 2.x needs AVX-512 for BF16
        return {};
    }
}

}  // namespace moequant::detail
