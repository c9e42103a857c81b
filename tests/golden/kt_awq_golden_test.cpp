// kt-awq's re-layout of AutoAWQ words against kt-kernel's own functions
// (tests/golden/data/kt-awq: convert_cpu_weights.py's unpack_reverse_awq_interleaving and
// pack_column_major_1d on random words; tests/golden/reference/kt_awq made them). The whole
// converter's output, tensor for tensor, is compared in docs/kt-awq.md.

#include "awq_relayout.hpp"
#include "test_support.hpp"

#include <moequant/safetensors_reader.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <vector>

using namespace moequant;
using namespace moequant::test;
namespace json = boost::json;

namespace {

const fs::path vectors = fs::path(MOEQUANT_SOURCE_DIR) / "tests/golden/data/kt-awq";

std::vector<std::int32_t> words(const SafetensorsFile& file, const std::string& name, const Shape& shape) {
    const TensorView v = file.view(name);
    BOOST_REQUIRE_MESSAGE(v.dtype == DType::I32 && v.shape == shape, name << " is not I32 " << shape_to_string(shape));
    std::vector<std::int32_t> out(v.bytes.size() / 4);
    std::memcpy(out.data(), v.bytes.data(), v.bytes.size());
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kt_awq_golden)

BOOST_AUTO_TEST_CASE(weights_and_zero_points_match_kt_kernel_word_for_word) {
    const SafetensorsFile file = SafetensorsFile::open(vectors / "relayout.safetensors");
    const auto manifest = json::parse(read_text(vectors / "cases.json")).as_object();
    const auto& all = manifest.at("cases").as_array();
    BOOST_TEST(all.size() >= 3u);
    for (const auto& value : all) {
        const auto& c = value.as_object();
        const std::string name(c.at("name").as_string());
        const std::int64_t k = c.at("k").to_number<std::int64_t>(), n = c.at("n").to_number<std::int64_t>(),
                           groups = c.at("groups").to_number<std::int64_t>();
        BOOST_TEST_CONTEXT("case " << name) {
            const std::vector<std::int32_t> qweight = words(file, name + ".qweight", {k, n / 8});
            const std::vector<std::int32_t> qzeros = words(file, name + ".qzeros", {groups, n / 8});
            std::vector<std::int32_t> weight(static_cast<std::size_t>(n * k / 8)), zeros(qzeros.size());
            kt_awq::relay_awq_weight(reinterpret_cast<const std::byte*>(qweight.data()), k, n, weight.data());
            kt_awq::relay_awq_zeros(reinterpret_cast<const std::byte*>(qzeros.data()), groups, n, zeros.data());
            const std::vector<std::int32_t> kt_weight = words(file, name + ".weight", {n, k / 8});
            const std::vector<std::int32_t> kt_zeros = words(file, name + ".zeros", {groups, n / 8});
            BOOST_TEST(weight == kt_weight, boost::test_tools::per_element());
            BOOST_TEST(zeros == kt_zeros, boost::test_tools::per_element());
            // The values themselves: column c of output row r is AutoAWQ's (row c, column r).
            BOOST_TEST(kt_awq::kt_nibble(weight.data(), k, n - 1, k - 1) ==
                       static_cast<int>((static_cast<std::uint32_t>(qweight[static_cast<std::size_t>((k - 1) * (n / 8) + (n - 1) / 8)]) >>
                                         (4 * 7)) & 0xF));  // column 8j+7 sits in AWQ's nibble 7
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
