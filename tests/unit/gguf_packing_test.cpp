// How packed GGUF output cuts its tensors into parts (gguf-split's rule), reads its bounds, and
// orders the tensors (model order).
#include "gguf_packing.hpp"

#include <moequant/error.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>

using namespace moequant;
using namespace moequant::formats;

namespace {

Options options(std::initializer_list<std::pair<const char*, const char*>> values) {
    Options o;
    for (const auto& [k, v] : values) o.set(k, v);
    return o;
}

bool usage_error(const Options& o) {
    try {
        read_gguf_packing(o);
    } catch (const Error& e) {
        return e.kind() == ErrorKind::usage;
    }
    return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_packing)

BOOST_AUTO_TEST_CASE(sizes_read_in_gguf_splits_decimal_units) {
    BOOST_TEST(!read_gguf_packing(Options{}).packed());
    BOOST_TEST(read_gguf_packing(options({{"split_max_size", "50G"}})).max_bytes == 50'000'000'000ull);
    BOOST_TEST(read_gguf_packing(options({{"split_max_size", "128M"}})).max_bytes == 128'000'000ull);
    BOOST_TEST(read_gguf_packing(options({{"split_max_size", "300K"}})).max_bytes == 300'000ull);
    BOOST_TEST(read_gguf_packing(options({{"split_max_size", "4096"}})).max_bytes == 4096ull);
    BOOST_TEST(read_gguf_packing(options({{"split_max_tensors", "128"}})).max_tensors == 128);
    BOOST_TEST(read_gguf_packing(options({{"single_file", "true"}})).single_file);
    for (const char* bad : {"0", "0G", "-5G", "5X", "5GB", "G", "", "99999999999999999999G", "18446744073709551615G"})
        BOOST_TEST(usage_error(options({{"split_max_size", bad}})), bad);
    for (const char* bad : {"0", "-1", "ten", "10 "}) BOOST_TEST(usage_error(options({{"split_max_tensors", bad}})), bad);
    BOOST_TEST(usage_error(options({{"single_file", "true"}, {"split_max_size", "1G"}})));
    BOOST_TEST(usage_error(options({{"split_max_tensors", "3"}, {"split_max_size", "1G"}})));
}

BOOST_AUTO_TEST_CASE(parts_end_before_the_tensor_that_would_pass_the_bound) {
    const GgufPacking by_size{.max_bytes = 100};
    // 40+40 | 40+60 | 120 (alone: larger than the bound) | 100 | 1
    const std::vector<std::size_t> starts = gguf_part_starts({40, 40, 40, 60, 120, 100, 1}, by_size);
    BOOST_TEST((starts == std::vector<std::size_t>{0, 2, 4, 5, 6}));
    // A first tensor larger than the bound opens the first part (gguf-split would refuse it).
    BOOST_TEST((gguf_part_starts({500, 10}, by_size) == std::vector<std::size_t>{0, 1}));
    // Exactly the bound stays in one part.
    BOOST_TEST((gguf_part_starts({50, 50, 50}, by_size) == std::vector<std::size_t>{0, 2}));
    const GgufPacking by_count{.max_tensors = 3};
    BOOST_TEST((gguf_part_starts({1, 1, 1, 1, 1, 1, 1}, by_count) == std::vector<std::size_t>{0, 3, 6}));
    BOOST_TEST((gguf_part_starts({1, 1, 1, 1}, GgufPacking{.single_file = true}) == std::vector<std::size_t>{0}));
    BOOST_TEST((gguf_part_starts({}, by_size) == std::vector<std::size_t>{0}));
}

BOOST_AUTO_TEST_CASE(tensors_go_in_model_order) {
    std::vector<std::string> names = {"output.weight",         "blk.10.attn_q.weight",      "blk.2.ffn_down_exps.weight",
                                      "blk.2.ffn_gate_exps.weight", "blk.2.attn_norm.weight", "token_embd.weight",
                                      "blk.2.ffn_up_exps.weight",   "output_norm.weight",    "blk.2.ffn_norm.weight"};
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return gguf_tensor_order(a) < gguf_tensor_order(b); });
    const std::vector<std::string> expected = {"token_embd.weight",          "blk.2.attn_norm.weight",   "blk.2.ffn_norm.weight",
                                               "blk.2.ffn_gate_exps.weight", "blk.2.ffn_up_exps.weight", "blk.2.ffn_down_exps.weight",
                                               "blk.10.attn_q.weight",       "output.weight",            "output_norm.weight"};
    BOOST_TEST(names == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
