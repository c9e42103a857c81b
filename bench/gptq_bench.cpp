// GPTQ's cost on DeepSeek-V3-sized expert projections, as fractions of this machine's own
// matrix-product rates measured in the same run: oneDNN's FP32 GEMM (dnnl_sgemm) for the FP32
// steps, its BF16 matmul for the BF16 ones (onednn_rates.hpp; both pick kernels by ISA):
//   1. one 2048 x 7168 weight (out x in) with 4096 calibration tokens (two samples of 2048),
//      W4A16 group 128, actorder static, dampening 0.1: the Hessian (HessianAccumulator) with
//      FP32 and with BF16 tiles, the preparation (prepare_inverse_hessian: order, damping,
//      Cholesky, triangular inverse) and the column loop (run_gptq), each timed on its own,
//      and one expert's down_proj calibration (gate/up products, act * up, Hessian) in FP32 and
//      in BF16;
//   2. one layer of E experts whose gate and up projections share one Hessian: the inverse
//      Hessian prepared once for all 2E matrices versus once per matrix (what a per-Linear
//      flow such as upstream llm-compressor does), through the plugin's Quantizer interface.
// Targets (issue 40): FP32 Hessian >= 0.7, preparation (K^3/3 multiply-adds) >= 0.5, FP32
// down_proj calibration >= 0.7 of oneDNN's FP32 rate; BF16 Hessian >= 0.6, BF16 down_proj
// calibration >= 0.75 of its BF16 rate. The torch reference's times are printed for orientation.
// The plugin's sources are compiled into this program (as tests/golden does) so that the
// preparation and the loop can be timed apart.
//
// Usage: moequant_gptq_bench [threads] [--threads N] [--rows N] [--cols K] [--tokens T]
//                            [--samples S] [--experts E | --full] [--repeats R] [--json]
//   defaults: 2 threads, N=2048, K=7168, T=4096, S=2, E=8 (--full: E=32, the size;
//   --experts 0 skips part 2), R=2 (best of R runs for the timings of part 1, each step against
//   oneDNN's rates measured next to it: onednn_rates.hpp). --json prints, as the last line,
//   one JSON object with the shapes, each step's seconds and the reference rates.
//   On the 2-core reference machine class: part 1 takes about 20 s, part 2 about a minute
//   with E=8.

#include "bench_timing.hpp"
#include "onednn_rates.hpp"
#include "torch_times.hpp"

#include "gptq_scheme.hpp"
#include "gptq_solver.hpp"
#include "integer_mapping.hpp"
#include "integer_quantizer.hpp"
#include "inverse_hessian.hpp"

#include <moequant/blas_kernels.hpp>
#include <moequant/compute_dtype.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/gated_activation.hpp>
#include <moequant/engine/hessian.hpp>
#include <moequant/matrix_products.hpp>
#include <moequant/parallel.hpp>
#include <moequant/splitmix64.hpp>
#include <moequant/tensor.hpp>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

using namespace moequant;
using moequant::bench::best_seconds;

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// BF16 weights of about N(0, 0.02), [rows, cols] row-major.
std::vector<std::uint16_t> random_weight(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
    SplitMix64 d(seed);
    std::vector<std::uint16_t> w(static_cast<std::size_t>(rows * cols));
    for (auto& v : w) v = f32_to_bf16(static_cast<float>(0.02 * d.irwin_hall<4, 24>()));
    return w;
}

// BF16-exact activations [tokens, cols] with per-channel scales (powers of two from 1/4 to 4,
// 2% of the channels 16x larger) and offsets, like `synth --activations`.
std::vector<float> random_activations(std::int64_t tokens, std::int64_t cols, std::uint64_t seed) {
    SplitMix64 d(seed);
    std::vector<double> scale(cols), offset(cols);
    for (std::int64_t c = 0; c < cols; ++c) {
        scale[c] = std::ldexp(d.uniform<24>() < 0.02 ? 16.0 : 1.0, static_cast<int>(std::floor(d.uniform<24>() * 5)) - 2);
        offset[c] = 0.25 * d.irwin_hall<4, 24>();
    }
    std::vector<float> x(static_cast<std::size_t>(tokens * cols));
    for (std::int64_t i = 0; i < tokens * cols; ++i)
        x[i] = bf16_to_f32(f32_to_bf16(static_cast<float>((d.irwin_hall<4, 24>() + offset[i % cols]) * scale[i % cols])));
    return x;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// For orientation: C = A B for n x n float matrices, in multiply-adds per second, through the
// same Eigen products (BLAS-backed) moequant uses. With one thread one product; with more,
// moequant::parallel_for over column blocks of B and C (one or four blocks per thread, the
// faster of the two: the serial BLAS packs all of A for every block).
double eigen_sgemm_rate(std::int64_t n, std::size_t threads, int repeats) {
    Matrix a = Matrix::Random(n, n), b = Matrix::Random(n, n), c = Matrix::Zero(n, n);
    double t;
    if (threads == 1) {
        t = best_seconds(repeats, [&] { c.noalias() = a * b; });
    } else {
        t = 1e300;
        for (const std::int64_t per_thread : {1, 4}) {
            const std::int64_t blocks = static_cast<std::int64_t>(threads) * per_thread;
            const std::int64_t width = (n + blocks - 1) / blocks;
            t = std::min(t, best_seconds(repeats, [&] {
                parallel_for(0, static_cast<std::size_t>(blocks), 1, [&](std::size_t first, std::size_t last) {
                    for (std::size_t i = first; i < last; ++i) {
                        const std::int64_t c0 = static_cast<std::int64_t>(i) * width, cn = std::min(width, n - c0);
                        if (cn > 0) c.middleCols(c0, cn).noalias() = a * b.middleCols(c0, cn);
                    }
                });
            }));
        }
    }
    volatile float sink = c(n - 1, n - 1);
    (void)sink;
    return static_cast<double>(n) * n * n / t;
}

struct LoopInputs {
    std::vector<float> scales;          // F32 values of the BF16 observer scales, [rows, groups]
    std::vector<std::int32_t> group_of; // group of permuted position j
    std::int64_t groups = 0;
};

// What IntegerQuantizer::quantize_calibrated builds before run_gptq with actorder static:
// BF16 min-max scales over the original contiguous groups, group_of[j] = order[j] / group.
LoopInputs loop_inputs(const std::vector<float>& w, std::int64_t rows, std::int64_t cols, const gptq::InverseHessian& p,
                       const gptq::Scheme& scheme) {
    LoopInputs in;
    const std::int64_t group = scheme.group_size ? scheme.group_size : cols;
    in.groups = cols / group;
    in.scales.resize(static_cast<std::size_t>(rows * in.groups));
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t g = 0; g < in.groups; ++g) {
            float absmax = 0;
            for (std::int64_t c = g * group; c < (g + 1) * group; ++c) absmax = std::max(absmax, std::fabs(w[r * cols + c]));
            in.scales[r * in.groups + g] = bf16_to_f32(gptq::observer_scale(absmax, scheme));
        }
    in.group_of.resize(static_cast<std::size_t>(cols));
    for (std::int64_t j = 0; j < cols; ++j) in.group_of[j] = static_cast<std::int32_t>(p.order[j] / group);
    return in;
}

struct Args {
    std::size_t threads = 2;
    std::int64_t rows = 2048, cols = 7168, tokens = 4096, samples = 2, experts = 8;
    int repeats = 2;
    bool json = false;
    std::string torch;  // bench/torch_reference.py's JSON, measured in the same run
};

// The torch times of the same run (bench/compare_with_torch.sh), or none.
struct TorchTimes {
    double hessian = 0, quantize = 0;
};
TorchTimes torch_gptq_times(const std::string& file) {
    TorchTimes t;
    if (file.empty()) return t;
    const boost::json::value v = bench::read_torch_times(file);
    t.hessian = v.at("gptq").at("hessian_s").to_number<double>();
    t.quantize = v.at("gptq").at("quantize_s").to_number<double>();
    return t;
}

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "%s\nusage: moequant_gptq_bench [threads] [--threads N] [--rows N] [--cols K] [--tokens T] [--samples S]\n"
                 "                            [--experts E | --full] [--repeats R] [--json] [--torch TIMES.json]\n",
                 why);
    std::exit(2);
}

Args parse_args(int argc, char** argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto number = [&]() -> std::int64_t {
            if (i + 1 >= argc) usage(("missing value after " + arg).c_str());
            char* end = nullptr;
            const long long v = std::strtoll(argv[++i], &end, 10);
            if (*end != '\0' || v < 0) usage(("bad value for " + arg + ": " + argv[i]).c_str());
            return v;
        };
        if (arg == "--threads")
            a.threads = static_cast<std::size_t>(number());
        else if (arg == "--rows")
            a.rows = number();
        else if (arg == "--cols")
            a.cols = number();
        else if (arg == "--tokens")
            a.tokens = number();
        else if (arg == "--samples")
            a.samples = number();
        else if (arg == "--experts")
            a.experts = number();
        else if (arg == "--full")
            a.experts = 32;
        else if (arg == "--repeats")
            a.repeats = static_cast<int>(number());
        else if (arg == "--json")
            a.json = true;
        else if (arg == "--torch" && i + 1 < argc)
            a.torch = argv[++i];
        else if (arg == "-h" || arg == "--help")
            usage("GPTQ timings as fractions of oneDNN's FP32 and BF16 product rates");
        else if (i == 1 && !arg.empty() && arg.find_first_not_of("0123456789") == std::string::npos)
            a.threads = static_cast<std::size_t>(std::stoll(arg));
        else
            usage(("unknown argument " + arg).c_str());
    }
    if (a.threads < 1 || a.rows < 1 || a.cols < 128 || a.cols % 128 != 0 || a.tokens < 1 || a.samples < 1 ||
        a.repeats < 1)
        usage("need threads, rows, tokens, samples, repeats >= 1 and cols a positive multiple of 128");
    return a;
}

}  // namespace

int main(int argc, char** argv) {
    const auto start = std::chrono::steady_clock::now();
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows when piped (the run takes minutes)
    const Args args = parse_args(argc, argv);
    const std::int64_t n = args.rows, k = args.cols, tokens = args.tokens;
    const std::size_t threads = args.threads;
    set_max_threads(threads);

    gptq::Scheme scheme;  // W4A16, group 128, actorder static, dampening 0.1
    scheme.bits = 4;
    scheme.group_size = 128;
    scheme.actorder = gptq::ActOrder::static_order;
    scheme.dampening_frac = 0.1;

    std::printf("GPTQ %s group %lld, actorder static, dampening %.2g: weight N=%lld rows (out) x K=%lld cols (in), "
                "T=%lld calibration tokens in %lld samples, %zu threads\n",
                scheme.name().c_str(), static_cast<long long>(scheme.group_size), scheme.dampening_frac,
                static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(tokens),
                static_cast<long long>(args.samples), threads);
    std::printf("random data: BF16 weights ~N(0, 0.02); BF16-exact activations with per-channel scales and offsets\n");

    // ---- reference ----
    const std::int64_t gemm_n = 2048;
    const bench::OnednnRates onednn_start = bench::onednn_rates(gemm_n, static_cast<int>(threads), 5);
    const double blis_t = eigen_sgemm_rate(gemm_n, threads, 5);
    std::printf("\nreference: oneDNN on %zu threads, %lld^3 products: FP32 GEMM (dnnl_sgemm) %.1f, BF16 matmul (%s) %.1f "
                "G multiply-add/s\n",
                threads, static_cast<long long>(gemm_n), onednn_start.f32 / 1e9, onednn_start.bf16_kernel.c_str(),
                onednn_start.bf16 / 1e9);
    std::printf("  moequant's FP32 products (Eigen through %s, chosen by %s): %.1f = %.2f of oneDNN's\n",
                blas_kernels().c_str(), blas_kernels_chosen_by().c_str(), blis_t / 1e9, blis_t / onednn_start.f32);
    std::printf("  fractions below = useful multiply-adds / time / oneDNN's rate of the same dtype, measured next to the step\n"
                "  (before each of its %d runs and after the last; the fastest of those)\n", args.repeats);
    const int threads_n = static_cast<int>(threads);

    // ---- data ----
    const std::vector<std::uint16_t> weight_bf16 = random_weight(n, k, 1);
    std::vector<float> weight(weight_bf16.size());
    convert_bf16_to_f32(weight_bf16.data(), weight.data(), weight.size());
    const std::vector<float> x = random_activations(tokens, k, 2);

    // ---- 1a. Hessian ----
    const std::int64_t per_sample = (tokens + args.samples - 1) / args.samples;
    // The whole X^T X as one product (what a GEMM does, twice the distinct entries), the
    // lower-triangle tiles in FP32, and the same tiles as BF16 products (exact for these inputs).
    const double t_full = best_seconds(args.repeats, [&] {
        using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        RowMajor h = RowMajor::Zero(k, k);
        for (std::int64_t t = 0; t < tokens; t += per_sample) {
            const std::int64_t rows = std::min(per_sample, tokens - t);
            const RowMajor a = Eigen::Map<const RowMajor>(x.data() + t * k, rows, k) * std::sqrt(2.0f);
            parallel_for(0, static_cast<std::size_t>((k + 511) / 512), 1, [&](std::size_t first, std::size_t last) {
                for (std::size_t b = first; b < last; ++b) {
                    const std::int64_t c0 = static_cast<std::int64_t>(b) * 512, cn = std::min<std::int64_t>(512, k - c0);
                    h.middleCols(c0, cn).noalias() += a.transpose() * a.middleCols(c0, cn);
                }
            });
        }
    });
    set_compute_dtype(ComputeDtype::bf16);
    const bench::TimedStep s_hessian_bf16 = bench::time_against_reference(args.repeats, threads_n, [&] {
        HessianAccumulator acc(k);
        for (std::int64_t t = 0; t < tokens; t += per_sample) acc.add(x.data() + t * k, std::min(per_sample, tokens - t));
        (void)acc.finish(args.samples);
    });
    const double t_hessian_bf16 = s_hessian_bf16.seconds;
    set_compute_dtype(ComputeDtype::f32);
    double t_add = 0, t_finish = 0;
    Tensor hessian;
    const bench::TimedStep s_hessian = bench::time_against_reference(args.repeats, threads_n, [&] {
        const auto t0 = std::chrono::steady_clock::now();
        HessianAccumulator acc(k);
        for (std::int64_t t = 0; t < tokens; t += per_sample) acc.add(x.data() + t * k, std::min(per_sample, tokens - t));
        const double added = seconds_since(t0);
        hessian = acc.finish(args.samples);
        const double total = seconds_since(t0);
        if (t_add == 0 || total < t_add + t_finish) {
            t_add = added;
            t_finish = total - added;
        }
    });
    const double t_hessian = s_hessian.seconds;
    const double mac_hessian = static_cast<double>(k) * (k + 1) / 2 * tokens;
    std::printf("\n1a. Hessian (HessianAccumulator(K), add() per sample, finish(%lld)):\n", static_cast<long long>(args.samples));
    std::printf("  useful multiply-adds K(K+1)/2*T = %.3g (H is symmetric: only its distinct entries are needed)\n", mac_hessian);
    std::printf("  %.2f s (construct+add %.2f s, finish %.2f s) = %.3f of oneDNN FP32   [target >= 0.7; torch 2.7-3.4 s]\n",
                t_hessian, t_add, t_finish, mac_hessian / t_hessian / s_hessian.reference.f32);
    std::printf("  the same tiles as BF16 products (compute dtype bf16; oneDNN %s): %.2f s = %.3f of oneDNN BF16 "
                "[target >= 0.6]\n",
                bf16_product_isa().c_str(), t_hessian_bf16, mac_hessian / t_hessian_bf16 / s_hessian_bf16.reference.bf16);
    std::printf("  the whole X^T X as one FP32 GEMM: %.2f s; lower tiles FP32 %.2fx, BF16 %.2fx of its time\n",
                t_full, t_hessian / t_full, t_hessian_bf16 / t_full);

    // ---- 1b. quantize step ----
    gptq::InverseHessian prepared;
    const bench::TimedStep s_prepare =
        bench::time_against_reference(args.repeats, threads_n, [&] { prepared = gptq::prepare_inverse_hessian(hessian, scheme); });
    const double t_prepare = s_prepare.seconds;
    if (!prepared.factored) std::printf("  WARNING: H was not positive definite; GPTQ fell back to rounding\n");
    LoopInputs in;
    const double t_setup = best_seconds(args.repeats, [&] { in = loop_inputs(weight, n, k, prepared, scheme); });
    gptq::GptqResult result;
    const bench::TimedStep s_loop = bench::time_against_reference(args.repeats, threads_n, [&] {
        result = gptq::run_gptq(weight.data(), n, prepared, scheme, in.scales, in.groups, in.group_of);
    });
    const double t_loop = s_loop.seconds;
    const double mac_prepare = static_cast<double>(k) * k * k / 3;
    const double mac_loop_lazy = static_cast<double>(n) * k * k / 2;
    const double mac_loop_block = static_cast<double>(n) * k * 128 / 2;
    const double mac_loop = mac_loop_lazy + mac_loop_block;
    const double t_quantize = t_prepare + t_loop;
    std::printf("\n1b. quantize step (prepare_inverse_hessian, then run_gptq):\n");
    std::printf("  useful multiply-adds: prepare K^3/3 = %.3g (Cholesky K^3/6 + triangular inverse K^3/6);\n", mac_prepare);
    std::printf("    loop N*K^2/2 + N*K*128/2 = %.3g + %.3g (lazy block updates + in-block rank-1 updates)\n", mac_loop_lazy,
                mac_loop_block);
    std::printf("  prepare          %6.2f s = %.3f of oneDNN FP32   [target >= 0.5]\n", t_prepare, mac_prepare / t_prepare / s_prepare.reference.f32);
    std::printf("  column loop      %6.2f s = %.3f of oneDNN FP32   (loss %.4g)\n", t_loop, mac_loop / t_loop / s_loop.reference.f32, result.loss);
    std::printf("  prepare + loop   %6.2f s = %.3f of oneDNN FP32   [torch 8.0-10.7 s]\n", t_quantize,
                (mac_prepare + mac_loop) / t_quantize / std::max(s_prepare.reference.f32, s_loop.reference.f32));
    std::printf("  (not counted above: scales and group_of before the loop %.3f s)\n", t_setup);

    // For comparison: Eigen's own (single-threaded) LLT of the same damped matrix, which
    // prepare_inverse_hessian replaces with a blocked parallel Cholesky.
    {
        Matrix m = Eigen::Map<const Matrix>(hessian.data_as<float>(), k, k);
        double diagonal = 0;
        for (std::int64_t i = 0; i < k; ++i) diagonal += m(i, i) == 0 ? 1.0f : m(i, i);
        const float damp = static_cast<float>(scheme.dampening_frac) * static_cast<float>(diagonal / k);
        for (std::int64_t i = 0; i < k; ++i) m(i, i) = (m(i, i) == 0 ? 1.0f : m(i, i)) + damp;
        Matrix work(k, k);
        double t_llt = 1e30;
        for (int r = 0; r < args.repeats; ++r) {
            work = m;
            const auto t0 = std::chrono::steady_clock::now();
            Eigen::LLT<Eigen::Ref<Matrix>> llt(work);
            t_llt = std::min(t_llt, seconds_since(t0));
            if (llt.info() != Eigen::Success) std::printf("  WARNING: LLT failed\n");
        }
        const double mac_llt = static_cast<double>(k) * k * k / 6;
        std::printf("  for comparison, Eigen's single-threaded LLT alone (K^3/6): %.2f s = %.0f%% of the whole prepare,"
                    " %.3f of oneDNN FP32\n",
                    t_llt, 100 * t_llt / t_prepare, mac_llt / t_llt / s_prepare.reference.f32);
    }

    // The same matrix through the plugin's interface: BF16 decoding, scales, loop and packing.
    gptq::IntegerQuantizer quantizer(true, scheme);
    const TensorView gate_view{DType::BF16, {n, k}, std::as_bytes(std::span<const std::uint16_t>(weight_bf16))};
    const double t_calibrated =
        best_seconds(args.repeats, [&] { quantizer.quantize_calibrated(gate_view, prepared); });
    std::printf("  IntegerQuantizer::quantize_calibrated (decode, scales, loop, packing) %.2f s = loop + %.2f s\n",
                t_calibrated, t_calibrated - t_loop);

    // ---- 1c. one expert's down_proj calibration ----
    // What calibrated_layer's down_proj_hessian does for an expert that sees all T tokens of
    // BF16-exact inputs (recorded activations, or the BF16 forward's rounded MoE inputs): its
    // gate and up products (the N x K weight above as both), act(gate x) * up x in BF16 steps,
    // and the Hessian of those N-wide rows; FP32 products against BF16 ones (exact operands).
    const std::vector<std::uint16_t> up_bf16 = random_weight(n, k, 3);
    std::vector<float> up(up_bf16.size());
    convert_bf16_to_f32(up_bf16.data(), up.data(), up.size());
    auto down_inputs = [&](ComputeDtype dtype) {
        set_compute_dtype(dtype);
        using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        HessianAccumulator acc(n);
        constexpr std::int64_t chunk = 1024;
        std::vector<std::uint16_t> xb;
        for (std::int64_t t0 = 0; t0 < tokens; t0 += chunk) {
            const std::int64_t rows = std::min(chunk, tokens - t0);
            RowMajor g(rows, n), u(rows, n);
            // One task per half of the rows: the products on both threads, as the layer's experts run.
            parallel_for(0, 2, 1, [&](std::size_t first, std::size_t last) {
                for (std::size_t part = first; part < last; ++part) {
                    const std::int64_t r0 = static_cast<std::int64_t>(part) * rows / 2, rn = rows / 2 + (part ? rows % 2 : 0);
                    if (dtype == ComputeDtype::bf16) {
                        std::vector<std::uint16_t> xp(static_cast<std::size_t>(rn * k));
                        convert_f32_to_bf16(x.data() + (t0 + r0) * k, xp.data(), xp.size());
                        bf16_product(xp.data(), weight_bf16.data(), true, g.data() + r0 * n, rn, n, k);
                        bf16_product(xp.data(), up_bf16.data(), true, u.data() + r0 * n, rn, n, k);
                    } else {
                        f32_gemm(false, true, rn, n, k, 1.0f, x.data() + (t0 + r0) * k, k, weight.data(), k, 0.0f,
                                 g.data() + r0 * n, n);
                        f32_gemm(false, true, rn, n, k, 1.0f, x.data() + (t0 + r0) * k, k, up.data(), k, 0.0f,
                                 u.data() + r0 * n, n);
                    }
                }
            });
            // act(gate, up) in BF16 steps (the engine's call), each thread on its half of the rows
            // as each would on its own expert.
            parallel_for(0, 2, 1, [&](std::size_t first, std::size_t last) {
                for (std::size_t part = first; part < last; ++part) {
                    const std::int64_t r0 = static_cast<std::int64_t>(part) * rows / 2, rn = rows / 2 + (part ? rows % 2 : 0);
                    apply_gated_activation_bf16({}, g.data() + r0 * n, u.data() + r0 * n, rn * n);
                }
            });
            acc.add(g.data(), rows);
        }
        (void)acc.finish(args.samples);
        set_compute_dtype(ComputeDtype::f32);
    };
    const bench::TimedStep s_down_f32 = bench::time_against_reference(args.repeats, threads_n, [&] { down_inputs(ComputeDtype::f32); });
    const bench::TimedStep s_down_bf16 =
        bench::time_against_reference(args.repeats, threads_n, [&] { down_inputs(ComputeDtype::bf16); });
    const double t_down_f32 = s_down_f32.seconds, t_down_bf16 = s_down_bf16.seconds;
    const double mac_down = (2.0 * n * k + static_cast<double>(n) * (n + 1) / 2) * tokens;
    std::printf("\n1c. one expert's down_proj calibration on all T tokens (gate and up products %lldx%lld, act * up in BF16 "
                "steps, Hessian of %lld columns):\n", static_cast<long long>(n), static_cast<long long>(k), static_cast<long long>(n));
    std::printf("  FP32 products %.2f s = %.3f of oneDNN FP32 [target >= 0.7]; BF16 products %.2f s = %.3f of oneDNN BF16 "
                "[target >= 0.75]\n",
                t_down_f32, mac_down / t_down_f32 / s_down_f32.reference.f32, t_down_bf16, mac_down / t_down_bf16 / s_down_bf16.reference.bf16);

    // ---- 2. shared gate/up Hessian vs per-Linear ----
    double speedup = 0, ideal_speedup = 0;
    if (args.experts > 0) {
        const std::int64_t e = args.experts, matrices = 2 * e;
        // Two distinct weights (gate and up) stand for every expert's: the time does not depend
        // on the values, and 2E distinct matrices would not fit in memory at the size.
        const std::vector<std::uint16_t> up_bf16 = random_weight(n, k, 3);
        const TensorView views[2] = {
            gate_view, TensorView{DType::BF16, {n, k}, std::as_bytes(std::span<const std::uint16_t>(up_bf16))}};
        std::printf("\n2. one layer of E=%lld experts: 2E=%lld gate/up matrices of %lldx%lld seeing the same inputs "
                    "(IntegerQuantizer prepare_calibration + quantize_calibrated, scales and packing included)\n",
                    static_cast<long long>(e), static_cast<long long>(matrices), static_cast<long long>(n),
                    static_cast<long long>(k));

        // (a) one shared preparation.
        double shared_prep = 0, shared_quant = 0;
        {
            auto t0 = std::chrono::steady_clock::now();
            auto calibration = quantizer.prepare_calibration(hessian);
            shared_prep = seconds_since(t0);
            t0 = std::chrono::steady_clock::now();
            for (std::int64_t m = 0; m < matrices; ++m) quantizer.quantize_calibrated(views[m % 2], *calibration);
            shared_quant = seconds_since(t0);
        }
        const double shared = shared_prep + shared_quant;
        std::printf("  (a) shared: prepare once %.2f s + %lld quantizes %.2f s = %.2f s\n", shared_prep,
                    static_cast<long long>(matrices), shared_quant, shared);

        // (b) per-Linear: a preparation for every matrix.
        double per_prep = 0, per_quant = 0;
        for (std::int64_t m = 0; m < matrices; ++m) {
            auto t0 = std::chrono::steady_clock::now();
            auto calibration = quantizer.prepare_calibration(hessian);
            per_prep += seconds_since(t0);
            t0 = std::chrono::steady_clock::now();
            quantizer.quantize_calibrated(views[m % 2], *calibration);
            per_quant += seconds_since(t0);
        }
        const double per_linear = per_prep + per_quant;
        std::printf("  (b) per-Linear: %lld x (prepare + quantize) = %.2f s (prepare %.2f s, quantize %.2f s)\n",
                    static_cast<long long>(matrices), per_linear, per_prep, per_quant);

        // Ideal ratio from the mean measured prepare and per-matrix quantize times.
        const double prep = (shared_prep + per_prep) / (1 + matrices);
        const double quant = (shared_quant + per_quant) / (2 * matrices);
        const double ideal = (matrices * (prep + quant)) / (prep + matrices * quant);
        std::printf("  speed-up of shared over per-Linear: %.2fx; ideal 2E(prep+loop)/(prep+2E*loop) = %.2fx "
                    "(mean prep %.2f s, mean quantize %.2f s per matrix)\n",
                    per_linear / shared, ideal, prep, quant);
        speedup = per_linear / shared;
        ideal_speedup = ideal;
    }

    // The machines are noisy (a VM; the 2-thread rate was seen between 1.5x and 2x the 1-thread
    // rate on an idle guest): measure the reference again, so a drift shows.
    const bench::OnednnRates onednn_end = bench::onednn_rates(gemm_n, static_cast<int>(threads), 5);
    std::printf("\nreference again at the end: oneDNN FP32 %.1f, BF16 %.1f G multiply-add/s (start: %.1f, %.1f)%s\n",
                onednn_end.f32 / 1e9, onednn_end.bf16 / 1e9, onednn_start.f32 / 1e9, onednn_start.bf16 / 1e9,
                std::fabs(onednn_end.f32 / onednn_start.f32 - 1) > 0.1 ? "; over 10% apart: the machine was noisy" : "");

    // Summary: each step against the reference measured next to it (the fastest of its
    // measurements: the conservative figure).
    const double best = std::max(onednn_start.f32, onednn_end.f32), best_bf16 = std::max(onednn_start.bf16, onednn_end.bf16);
    auto verdict = [](double fraction, double target) { return fraction >= target ? "met" : "NOT MET"; };
    const double f_hessian = mac_hessian / t_hessian / s_hessian.reference.f32;
    const double f_hessian_bf16 = mac_hessian / t_hessian_bf16 / s_hessian_bf16.reference.bf16;
    const double f_prepare = mac_prepare / t_prepare / s_prepare.reference.f32, f_loop = mac_loop / t_loop / s_loop.reference.f32;
    const double f_down = mac_down / t_down_f32 / s_down_f32.reference.f32;
    const double f_down_bf16 = mac_down / t_down_bf16 / s_down_bf16.reference.bf16;
    std::printf("\nsummary (best of %d runs; fractions of the %zu-thread oneDNN rate of the step's dtype measured next to it,\n"
                "G multiply-add/s in brackets; the rates of the whole run ranged FP32 %.1f-%.1f, BF16 %.1f-%.1f):\n",
                args.repeats, threads, std::min(onednn_start.f32, onednn_end.f32) / 1e9, best / 1e9,
                std::min(onednn_start.bf16, onednn_end.bf16) / 1e9, best_bf16 / 1e9);
    auto line = [&](const char* name, double seconds, double fraction, double reference, double target, const char* extra) {
        std::printf("  %-22s %6.2f s  %.3f [%5.1f]", name, seconds, fraction, reference / 1e9);
        if (target > 0) std::printf("  target >= %.2f  %s", target, verdict(fraction, target));
        std::printf("%s\n", extra);
    };
    line("Hessian FP32", t_hessian, f_hessian, s_hessian.reference.f32, 0.7, "  (torch 2.7-3.4 s)");
    line("Hessian BF16", t_hessian_bf16, f_hessian_bf16, s_hessian_bf16.reference.bf16, 0.6, "");
    line("preparation", t_prepare, f_prepare, s_prepare.reference.f32, 0.5, "");
    line("column loop", t_loop, f_loop, s_loop.reference.f32, 0, "");
    line("down_proj calib. FP32", t_down_f32, f_down, s_down_f32.reference.f32, 0.7, "");
    line("down_proj calib. BF16", t_down_bf16, f_down_bf16, s_down_bf16.reference.bf16, 0.75, "");
    if (speedup > 0)
        std::printf("  shared gate/up Hessian, E=%lld: %.2fx faster than per-Linear (ideal %.2fx)\n",
                    static_cast<long long>(args.experts), speedup, ideal_speedup);
    // A projection, from these times scaled by their work: DeepSeek-V3's 58 MoE layers of 256
    // experts (gate/up 2048 x 7168, down 7168 x 2048), every expert seeing all 512 x 2048 tokens.
    if (n == 2048 && k == 7168) {
        const double all_tokens = 512.0 * 2048, per = all_tokens / static_cast<double>(tokens);
        // Per layer: one shared gate/up Hessian, 256 down_proj calibrations, 256 x 3 quantize steps
        // (down's K is 2048: its preparation and loop cost about (2048/7168)^2 of gate's; counted as gate's, an upper bound).
        const double layer_bf16 = per * t_hessian_bf16 + 256 * per * t_down_bf16 + 256 * 3 * t_quantize;
        const double layer_f32 = per * t_hessian + 256 * per * t_down_f32 + 256 * 3 * t_quantize;
        std::printf("  projection, DeepSeek-V3 GPTQ of 58 MoE layers x 256 experts on 512 x 2048 tokens, every expert seeing all\n"
                    "  of them, %zu threads, without the forward: BF16 products %.0f h, FP32 %.0f h (per layer %.1f h / %.1f h;\n"
                    "  down_proj calibration %.0f%% of it)\n",
                    threads, 58 * layer_bf16 / 3600, 58 * layer_f32 / 3600, layer_bf16 / 3600, layer_f32 / 3600,
                    100 * 256 * per * t_down_bf16 / layer_bf16);
    }
    const TorchTimes torch = torch_gptq_times(args.torch);
    if (torch.hessian > 0) {
        std::printf("  vs torch in this run (bench/torch_reference.py, llm-compressor's algorithm, %zu threads):\n", threads);
        std::printf("    Hessian        torch %.2f s: %.2fx faster with BF16 tiles, %.2fx with FP32 tiles (target >= 3)\n",
                    torch.hessian, torch.hessian / t_hessian_bf16, torch.hessian / t_hessian);
        std::printf("    quantize step  torch %.2f s: %.2fx faster (target >= 3)\n", torch.quantize, torch.quantize / t_quantize);
    } else {
        std::printf("  torch: run bench/compare_with_torch.sh for its times in the same run\n");
    }
    std::printf("total run time %.1f s\n", seconds_since(start));
    if (args.json) {
        boost::json::object o{{"K", k}, {"N", n}, {"T", tokens}, {"threads", threads},
                              {"onednn_f32_macs_per_s", best}, {"onednn_bf16_macs_per_s", best_bf16},
                              {"fp32_products", blas_kernels()}, {"bf16_products", bf16_product_isa()},
                              {"hessian_f32_s", t_hessian}, {"hessian_bf16_s", t_hessian_bf16},
                              {"prepare_s", t_prepare}, {"loop_s", t_loop},
                              {"down_calibration_f32_s", t_down_f32}, {"down_calibration_bf16_s", t_down_bf16},
                              {"reference_f32_macs_per_s", boost::json::object{{"hessian", s_hessian.reference.f32},
                                                                              {"prepare", s_prepare.reference.f32},
                                                                              {"loop", s_loop.reference.f32},
                                                                              {"down_calibration", s_down_f32.reference.f32}}},
                              {"reference_bf16_macs_per_s", boost::json::object{{"hessian", s_hessian_bf16.reference.bf16},
                                                                               {"down_calibration", s_down_bf16.reference.bf16}}},
                              {"hessian_f32_fraction", f_hessian}, {"hessian_bf16_fraction", f_hessian_bf16},
                              {"prepare_fraction", f_prepare}, {"loop_fraction", f_loop},
                              {"down_calibration_f32_fraction", f_down}, {"down_calibration_bf16_fraction", f_down_bf16}};
        if (speedup > 0) o["shared_hessian_speedup"] = speedup;
        std::printf("%s\n", boost::json::serialize(o).c_str());
    }
    return 0;
}
