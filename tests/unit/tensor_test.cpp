#include <moequant/error.hpp>
#include <moequant/tensor.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(tensor)

BOOST_AUTO_TEST_CASE(shape_elements_and_spelling) {
    BOOST_TEST(shape_elements({}).value() == 1u);
    BOOST_TEST(shape_elements({2, 3, 4}).value() == 24u);
    BOOST_TEST(shape_elements({2, 0}).value() == 0u);
    BOOST_TEST(!shape_elements({-1, 2}).has_value());
    BOOST_TEST(!shape_elements({INT64_MAX, 3}).has_value());
    BOOST_TEST(shape_to_string({}) == "[]");
    BOOST_TEST(shape_to_string({576, 7168}) == "[576,7168]");
}

BOOST_AUTO_TEST_CASE(owning_tensor_is_aligned_and_zeroed) {
    Tensor t(DType::BF16, {3, 5});
    BOOST_TEST(t.size_bytes() == 30u);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(t.data()) % Tensor::alignment == 0u);
    for (auto b : t.bytes()) BOOST_TEST(static_cast<int>(b) == 0);
    TensorView v = t.view();
    BOOST_TEST(v.elements() == 15u);
    BOOST_TEST(v.size_bytes() == 30u);
    BOOST_TEST((v.dtype == DType::BF16));
}

BOOST_AUTO_TEST_CASE(copy_of_a_view_is_deep) {
    std::uint8_t raw[4] = {1, 2, 3, 4};
    TensorView v{DType::U8, {2, 2}, std::as_bytes(std::span<std::uint8_t>(raw))};
    Tensor t = Tensor::copy_of(v);
    raw[0] = 9;
    BOOST_TEST(t.data_as<std::uint8_t>()[0] == 1);
    BOOST_TEST(t.data_as<std::uint8_t>()[3] == 4);
}

BOOST_AUTO_TEST_CASE(invalid_shapes_are_refused) {
    BOOST_CHECK_THROW(Tensor(DType::F4, {3}), Error);
    BOOST_CHECK_THROW(Tensor(DType::F32, {-2}), Error);
    std::uint8_t raw[3] = {};
    TensorView bad{DType::U8, {2, 2}, std::as_bytes(std::span<std::uint8_t>(raw))};
    BOOST_CHECK_THROW(Tensor::copy_of(bad), Error);
}

BOOST_AUTO_TEST_CASE(uninitialized_tensor_has_the_same_geometry) {
    Tensor t = Tensor::uninitialized(DType::I8, {1000});
    BOOST_TEST(t.size_bytes() == 1000u);
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(t.data()) % Tensor::alignment == 0u);
    BOOST_TEST((t.shape() == Shape{1000}));
}

BOOST_AUTO_TEST_CASE(empty_tensor_has_no_bytes) {
    Tensor t(DType::F32, {0, 4});
    BOOST_TEST(t.size_bytes() == 0u);
    BOOST_TEST(t.view().bytes.empty());
}

// Blocks of 16 MiB or more are mapped on their own (huge pages where allowed): they must be as
// zeroed, aligned and writable as the small ones, and each kind must go back to its own allocator
// whatever the order of the frees.
BOOST_AUTO_TEST_CASE(large_tensors_are_zeroed_aligned_and_freed_in_any_order) {
    const std::int64_t large = (std::int64_t{20} << 20) + 3;  // not a whole number of pages
    std::vector<Tensor> held;
    for (int i = 0; i < 3; ++i) {
        Tensor zeroed(DType::U8, {large});
        BOOST_TEST(zeroed.size_bytes() == static_cast<std::size_t>(large));
        BOOST_TEST(reinterpret_cast<std::uintptr_t>(zeroed.data()) % Tensor::alignment == 0u);
        const auto b = zeroed.bytes();
        BOOST_TEST(std::all_of(b.begin(), b.end(), [](std::byte x) { return x == std::byte{0}; }));
        Tensor written = Tensor::uninitialized(DType::U8, {large});
        std::memset(written.data(), 0x5a, written.size_bytes());
        BOOST_TEST(static_cast<int>(written.data_as<std::uint8_t>()[large - 1]) == 0x5a);
        Tensor copy = Tensor::copy_of(written.view());
        BOOST_TEST(std::memcmp(copy.data(), written.data(), copy.size_bytes()) == 0);
        held.push_back(std::move(written));
        held.emplace_back(DType::F32, Shape{7});
        held.push_back(std::move(zeroed));
    }
    // Moved-to tensors free their blocks once; small and large ones interleaved, freed from the
    // middle out.
    held.erase(held.begin() + 2, held.begin() + 6);
    Tensor moved = std::move(held.front());
    held.clear();
    BOOST_TEST(moved.size_bytes() == static_cast<std::size_t>(large));
}

BOOST_AUTO_TEST_SUITE_END()
