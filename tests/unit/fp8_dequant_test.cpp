// FP8 block dequantization against a straightforward reference written here, on every ISA,
// for shapes that are not multiples of the block, every scale dtype, and the error cases.
#include <moequant/cpu_isa.hpp>
#include <moequant/dtype_convert.hpp>
#include <moequant/error.hpp>
#include <moequant/fp8_dequant.hpp>
#include <moequant/parallel.hpp>

#include "isa_limit_restorer.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace moequant;

namespace {

// Tensor bytes placed one byte past an aligned address (safetensors data can start anywhere),
// in a buffer of exactly the needed size so a sanitizer catches any over-read.
struct Bytes {
    DType dtype;
    Shape shape;
    std::vector<std::byte> storage;  // [0] is padding

    TensorView view() const { return TensorView{dtype, shape, std::span<const std::byte>(storage).subspan(1)}; }
    std::byte* data() { return storage.data() + 1; }
};

Bytes make_bytes(DType dtype, Shape shape) {
    const auto size = dtype_byte_size(dtype, shape_elements(shape).value()).value();
    return Bytes{dtype, std::move(shape), std::vector<std::byte>(size + 1)};
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Random FP8 weight bytes (every code, NaN included).
Bytes random_weight(DType dtype, std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
    Bytes w = make_bytes(dtype, {rows, cols});
    for (std::size_t i = 0; i + 1 < w.storage.size(); ++i) w.data()[i] = static_cast<std::byte>(rng());
    return w;
}

// Random scales of the given dtype; F32/BF16 scales span small and tiny magnitudes so some
// products are subnormal, E8M0 covers 2^-127 .. 2^0.
Bytes random_scale(DType dtype, std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
    Bytes s = make_bytes(dtype, {rows, cols});
    const auto n = static_cast<std::size_t>(rows * cols);
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    std::uniform_int_distribution<int> exponent(-140, 2);
    for (std::size_t i = 0; i < n; ++i) {
        const float value = std::ldexp(mantissa(rng), exponent(rng));
        if (dtype == DType::F32) {
            std::memcpy(s.data() + 4 * i, &value, 4);
        } else if (dtype == DType::BF16) {
            const std::uint16_t bits = f32_to_bf16(value);
            std::memcpy(s.data() + 2 * i, &bits, 2);
        } else {
            s.data()[i] = static_cast<std::byte>(std::uniform_int_distribution<int>(0, 127)(rng));
        }
    }
    return s;
}

float scale_at(const Bytes& s, std::size_t index) {
    const std::byte* p = s.storage.data() + 1;
    if (s.dtype == DType::F32) {
        float f;
        std::memcpy(&f, p + 4 * index, 4);
        return f;
    }
    if (s.dtype == DType::BF16) {
        std::uint16_t b;
        std::memcpy(&b, p + 2 * index, 2);
        return bf16_to_f32(b);
    }
    return f8_e8m0_to_f32(static_cast<std::uint8_t>(p[index]));
}

// The definition, element by element: bf16(f32(W[i][j]) * S[i / bh][j / bw]).
std::vector<std::uint16_t> reference(const Bytes& w, const Bytes& s, BlockSize block) {
    const std::int64_t rows = w.shape[0], cols = w.shape[1];
    const std::int64_t scale_cols = ceil_div(cols, block.cols);
    std::vector<std::uint16_t> out(static_cast<std::size_t>(rows * cols));
    for (std::int64_t i = 0; i < rows; ++i) {
        for (std::int64_t j = 0; j < cols; ++j) {
            const auto byte = static_cast<std::uint8_t>(w.storage[1 + static_cast<std::size_t>(i * cols + j)]);
            const float weight = w.dtype == DType::F8_E4M3 ? f8_e4m3_to_f32(byte) : f8_e5m2_to_f32(byte);
            const float scale = scale_at(s, static_cast<std::size_t>((i / block.rows) * scale_cols + j / block.cols));
            const float product = weight * scale;
            out[static_cast<std::size_t>(i * cols + j)] = f32_to_bf16(product);
        }
    }
    return out;
}

std::vector<std::uint16_t> values_of(const Tensor& t) {
    std::vector<std::uint16_t> v(t.elements());
    if (!v.empty()) std::memcpy(v.data(), t.data(), v.size() * 2);
    return v;
}

// Position of the first difference, or -1.
std::int64_t first_difference(const std::vector<std::uint16_t>& a, const std::vector<std::uint16_t>& b) {
    if (a.size() != b.size()) return 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return static_cast<std::int64_t>(i);
    return -1;
}

using moequant::test::IsaLimitRestorer;

struct Case {
    std::int64_t rows, cols;
    BlockSize block;
};

// Every ISA, every weight and scale dtype: the whole-tensor result equals the reference.
void check_against_reference(const Case& c, std::mt19937& rng,
                             std::initializer_list<DType> weight_dtypes = {DType::F8_E4M3, DType::F8_E5M2},
                             std::initializer_list<DType> scale_dtypes = {DType::F32, DType::BF16, DType::F8_E8M0}) {
    IsaLimitRestorer restore;
    for (DType wd : weight_dtypes) {
        for (DType sd : scale_dtypes) {
            const Bytes w = random_weight(wd, c.rows, c.cols, rng);
            const Bytes s = random_scale(sd, ceil_div(c.rows, c.block.rows), ceil_div(c.cols, c.block.cols), rng);
            const auto want = reference(w, s, c.block);
            for (Isa isa : available_isas()) {
                set_isa_limit(isa);
                const auto got = values_of(dequantize_fp8_block(w.view(), s.view(), c.block));
                const auto at = first_difference(got, want);
                BOOST_TEST(at == -1, "[" << c.rows << "," << c.cols << "] block [" << c.block.rows << ","
                                         << c.block.cols << "] " << dtype_name(wd) << " scale " << dtype_name(sd)
                                         << " isa " << isa_name(isa) << ": first difference at " << at);
            }
        }
    }
}

bool input_error_saying(const Error& e, const std::string& text) {
    const bool ok = e.kind() == ErrorKind::input && std::string(e.what()).find(text) != std::string::npos;
    if (!ok) BOOST_TEST_MESSAGE("message was: " << e.what());
    return ok;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fp8_dequant)

BOOST_AUTO_TEST_CASE(known_values) {
    IsaLimitRestorer restore;
    for (Isa isa : available_isas()) {
        set_isa_limit(isa);
        // One row, blocks of 2 columns: W = 1.0, -1.0 | 1.875, NaN | 448 with scales 0.5 |
        // 1 + 2^-8 | 2^-8.
        Bytes w = make_bytes(DType::F8_E4M3, {1, 5});
        const std::uint8_t codes[] = {0x38, 0xB8, 0x3F, 0x7F, 0x7E};
        std::memcpy(w.data(), codes, 5);
        Bytes s = make_bytes(DType::F32, {1, 3});
        const float scales[] = {0.5f, 1.0f + std::ldexp(1.0f, -8), std::ldexp(1.0f, -8)};
        std::memcpy(s.data(), scales, sizeof scales);
        const auto got = values_of(dequantize_fp8_block(w.view(), s.view(), {1, 2}));
        // 1.0*0.5 = 0.5; -1*0.5; 1.875*(1+2^-8) = 1.8823242 -> rounds up to 0x3FF1; NaN stays
        // quiet NaN; 448*2^-8 = 1.75.
        const std::vector<std::uint16_t> want{0x3F00, 0xBF00, 0x3FF1, 0x7FC0, 0x3FE0};
        BOOST_TEST(got == want, boost::test_tools::per_element());
    }
}

BOOST_AUTO_TEST_CASE(deepseek_kv_a_proj_shape_576x7168) {
    std::mt19937 rng(1);
    check_against_reference({576, 7168, {128, 128}}, rng, {DType::F8_E4M3}, {DType::F32});
}

BOOST_AUTO_TEST_CASE(small_and_partial_blocks) {
    std::mt19937 rng(2);
    const Case cases[] = {
        {5, 3, {2, 2}},     {130, 260, {128, 128}}, {5, 3, {128, 128}}, {1, 1, {1, 1}},
        {37, 450, {3, 7}},  {64, 1000, {16, 33}},   {10, 1000, {4, 200}}, {3, 47, {5, 1}},
        {17, 129, {1, 128}}, {2, 33, {2, 16}},      {0, 5, {2, 2}},      {4, 0, {2, 2}},
    };
    for (const auto& c : cases) check_against_reference(c, rng);
}

BOOST_AUTO_TEST_CASE(result_does_not_depend_on_thread_count) {
    std::mt19937 rng(3);
    const Bytes w = random_weight(DType::F8_E4M3, 1000, 700, rng);
    const Bytes s = random_scale(DType::F32, ceil_div(1000, 128), ceil_div(700, 128), rng);
    const auto parallel = values_of(dequantize_fp8_block(w.view(), s.view(), {128, 128}));
    set_max_threads(1);
    const auto serial = values_of(dequantize_fp8_block(w.view(), s.view(), {128, 128}));
    set_max_threads(0);
    BOOST_TEST(first_difference(parallel, serial) == -1);
    BOOST_TEST(first_difference(parallel, reference(w, s, {128, 128})) == -1);
}

BOOST_AUTO_TEST_CASE(row_ranges_agree_with_the_whole_tensor) {
    std::mt19937 rng(4);
    IsaLimitRestorer restore;
    const BlockSize block{7, 33};
    const Bytes w = random_weight(DType::F8_E4M3, 50, 100, rng);
    const Bytes s = random_scale(DType::F8_E8M0, ceil_div(50, 7), ceil_div(100, 33), rng);
    for (Isa isa : available_isas()) {
        set_isa_limit(isa);
        const auto whole = values_of(dequantize_fp8_block(w.view(), s.view(), block));
        // Pieces that start and end inside blocks, an empty piece, and a single row.
        const std::int64_t cuts[] = {0, 3, 3, 4, 20, 49, 50};
        std::vector<std::uint16_t> pieces;
        for (std::size_t k = 0; k + 1 < std::size(cuts); ++k) {
            std::vector<std::uint16_t> part(static_cast<std::size_t>((cuts[k + 1] - cuts[k]) * 100));
            dequantize_fp8_block_rows(w.view(), s.view(), block, cuts[k], cuts[k + 1], part);
            pieces.insert(pieces.end(), part.begin(), part.end());
        }
        BOOST_TEST(first_difference(pieces, whole) == -1, "isa " << isa_name(isa));
    }
}

BOOST_AUTO_TEST_CASE(row_range_and_output_size_are_checked) {
    std::mt19937 rng(5);
    const Bytes w = random_weight(DType::F8_E4M3, 4, 8, rng);
    const Bytes s = random_scale(DType::F32, 1, 1, rng);
    std::vector<std::uint16_t> out(16);
    BOOST_CHECK_THROW(dequantize_fp8_block_rows(w.view(), s.view(), {128, 128}, 3, 5, out), Error);
    BOOST_CHECK_THROW(dequantize_fp8_block_rows(w.view(), s.view(), {128, 128}, 2, 1, out), Error);
    BOOST_CHECK_THROW(dequantize_fp8_block_rows(w.view(), s.view(), {128, 128}, -1, 1, out), Error);
    BOOST_CHECK_THROW(dequantize_fp8_block_rows(w.view(), s.view(), {128, 128}, 0, 1, out), Error);
    dequantize_fp8_block_rows(w.view(), s.view(), {128, 128}, 1, 3, out);
}

BOOST_AUTO_TEST_CASE(wrong_scale_shape_names_the_expected_shape) {
    const Bytes w = make_bytes(DType::F8_E4M3, {576, 7168});
    const Bytes s = make_bytes(DType::F32, {4, 56});  // what shape-inferred block sizes would give
    ErrorContext context;
    context.tensor = "model.layers.0.self_attn.kv_a_proj_with_mqa.weight";
    BOOST_CHECK_EXCEPTION(dequantize_fp8_block(w.view(), s.view(), {128, 128}, context), Error, [](const Error& e) {
        return input_error_saying(e, "weight_scale_inv has shape [4,56] but weight [576,7168] with block "
                                     "[128,128] needs [5,56]") &&
               input_error_saying(e, "kv_a_proj_with_mqa.weight");
    });
    const Bytes transposed = make_bytes(DType::F32, {56, 5});
    BOOST_CHECK_EXCEPTION(check_fp8_block_inputs(w.view(), transposed.view(), {128, 128}), Error,
                          [](const Error& e) { return input_error_saying(e, "needs [5,56]"); });
}

BOOST_AUTO_TEST_CASE(wrong_dtypes_ranks_and_block_sizes_are_input_errors) {
    const Bytes w = make_bytes(DType::F8_E4M3, {4, 8});
    const Bytes s = make_bytes(DType::F32, {1, 1});
    BOOST_CHECK_NO_THROW(check_fp8_block_inputs(w.view(), s.view(), {128, 128}));

    const Bytes bf16_weight = make_bytes(DType::BF16, {4, 8});
    BOOST_CHECK_EXCEPTION(check_fp8_block_inputs(bf16_weight.view(), s.view(), {128, 128}), Error,
                          [](const Error& e) { return input_error_saying(e, "weight has dtype BF16"); });
    const Bytes f16_scale = make_bytes(DType::F16, {1, 1});
    BOOST_CHECK_EXCEPTION(check_fp8_block_inputs(w.view(), f16_scale.view(), {128, 128}), Error,
                          [](const Error& e) { return input_error_saying(e, "weight_scale_inv has dtype F16"); });
    const Bytes rank3 = make_bytes(DType::F8_E4M3, {2, 2, 8});
    BOOST_CHECK_EXCEPTION(check_fp8_block_inputs(rank3.view(), s.view(), {128, 128}), Error,
                          [](const Error& e) { return input_error_saying(e, "[2,2,8]"); });
    const Bytes rank1_scale = make_bytes(DType::F32, {1});
    BOOST_CHECK_EXCEPTION(check_fp8_block_inputs(w.view(), rank1_scale.view(), {128, 128}), Error,
                          [](const Error& e) { return input_error_saying(e, "weight_scale_inv has shape [1]"); });
    for (BlockSize bad : {BlockSize{0, 128}, BlockSize{128, 0}, BlockSize{-1, 128}})
        BOOST_CHECK_EXCEPTION(check_fp8_block_inputs(w.view(), s.view(), bad), Error,
                              [](const Error& e) { return input_error_saying(e, "block size"); });
    // A view with fewer bytes than its shape needs is refused (no over-read).
    TensorView short_weight = w.view();
    short_weight.bytes = short_weight.bytes.first(31);
    BOOST_CHECK_EXCEPTION(check_fp8_block_inputs(short_weight, s.view(), {128, 128}), Error,
                          [](const Error& e) { return input_error_saying(e, "needs 32"); });
    BOOST_CHECK_THROW(dequantize_fp8_block(rank3.view(), s.view(), {128, 128}), Error);
}

BOOST_AUTO_TEST_SUITE_END()
