// The code grids of the GGUF types (ggml_types.hpp's CodeGrid), which GPTQ chooses
// codes on (gguf_gptq_quantizer.hpp), against ggml's own dequantizers (held to ggml's bytes by
// ggml_quants_golden): a block's grid gives back every value ggml decodes from it, writing its
// codes back gives its bytes, and any code of the range written into a block decodes, through
// ggml's arithmetic, to exactly the grid's value, step * level + offset, which GPTQ's loop assumed.

#include "ggml_types.hpp"

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace moequant::ggml_quants;

namespace {

constexpr std::int64_t row_values = 1024;

// Equal as values (+0 and -0 alike): ggml writes (level - half) * d where the grid adds +0.
bool same_value(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// The code whose grid value is `value`: the rounded quotient of a uniform grid, the table's
// entry that gives it for IQ4's (low - 1 when none does).
int code_of(const CodeGrid& grid, float step, float offset, float value) {
    if (!grid.table) return static_cast<int>(std::nearbyint((value - offset) / step));
    for (int code = grid.low; code <= grid.high; ++code)
        if (same_value(grid.value(step, offset, code), value)) return code;
    return grid.low - 1;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(ggml_code_grid)

BOOST_AUTO_TEST_CASE(grids_decode_and_encode_as_ggml_does) {
    std::mt19937 rng(20261206);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::uniform_real_distribution<float> uniform(0.05f, 2.f);
    int types = 0;
    for (const GgmlType& type : ggml_types()) {
        if (!type.grid) continue;
        ++types;
        const CodeGrid& grid = *type.grid;
        BOOST_TEST_CONTEXT("GGUF " << type.name) {
            BOOST_TEST(type.block % grid.group == 0);
            BOOST_TEST(grid.low < grid.high);
            const std::int64_t blocks = row_values / type.block, groups = type.block / grid.group;
            std::size_t values = 0, round_trips = 0, misread = 0;
            for (float scale : {1e-3f, 1.f, 1e3f})
                for (bool weighted : {false, true}) {
                    std::vector<float> x(row_values), importance(row_values), y(row_values), y2(row_values);
                    for (auto& v : x) v = scale * normal(rng);
                    for (auto& v : importance) v = uniform(rng);
                    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(type.row_bytes(row_values)));
                    type.quantize(x.data(), bytes.data(), row_values, weighted ? importance.data() : nullptr);
                    type.dequantize(bytes.data(), y.data(), row_values);
                    std::vector<std::uint8_t> rewritten = bytes, random_codes = bytes;
                    std::vector<int> codes(static_cast<std::size_t>(type.block)), drawn(row_values);
                    std::vector<float> step(static_cast<std::size_t>(groups)), offset(step.size());
                    std::uniform_int_distribution<int> any_code(grid.low, grid.high);
                    for (std::int64_t b = 0; b < blocks; ++b) {
                        std::uint8_t* block = bytes.data() + b * type.block_bytes;
                        grid.read(block, step.data(), offset.data());
                        bool recoverable = true;
                        for (int e = 0; e < type.block; ++e) {
                            const auto g = static_cast<std::size_t>(e / grid.group);
                            const float value = y[static_cast<std::size_t>(b * type.block + e)];
                            ++values;
                            if (step[g] == 0) {
                                misread += !same_value(value, offset[g]);
                                recoverable = false;
                                continue;
                            }
                            const int code = code_of(grid, step[g], offset[g], value);
                            misread += code < grid.low || code > grid.high || !same_value(grid.value(step[g], offset[g], code), value);
                            codes[static_cast<std::size_t>(e)] = code;
                        }
                        if (recoverable) {
                            grid.write(codes.data(), rewritten.data() + b * type.block_bytes);
                            ++round_trips;
                        }
                        int* block_codes = drawn.data() + b * type.block;
                        for (int e = 0; e < type.block; ++e) block_codes[e] = any_code(rng);
                        block_codes[0] = grid.low;  // both ends of the range
                        block_codes[1] = grid.high;
                        grid.write(block_codes, random_codes.data() + b * type.block_bytes);
                    }
                    BOOST_TEST((rewritten == bytes), "codes written back change the bytes");
                    // Any codes: ggml's dequantizer gives exactly the grid's value of each.
                    type.dequantize(random_codes.data(), y2.data(), row_values);
                    std::size_t differ = 0;
                    for (std::int64_t b = 0; b < blocks; ++b) {
                        grid.read(random_codes.data() + b * type.block_bytes, step.data(), offset.data());
                        for (int e = 0; e < type.block; ++e) {
                            const auto g = static_cast<std::size_t>(e / grid.group);
                            const auto i = static_cast<std::size_t>(b * type.block + e);
                            differ += !same_value(grid.value(step[g], offset[g], drawn[i]), y2[i]);
                        }
                    }
                    BOOST_TEST(differ == 0u);
                }
            BOOST_TEST(values == static_cast<std::size_t>(6 * row_values));
            BOOST_TEST(misread == 0u, misread << " values not on their block's grid");
            BOOST_TEST(round_trips > 0u);
        }
    }
    BOOST_TEST(types == 12);  // every type but F16, BF16 and MXFP4
}

BOOST_AUTO_TEST_SUITE_END()
