#include <moequant/parallel.hpp>

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <stdexcept>
#include <vector>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(parallel)

BOOST_AUTO_TEST_CASE(chunks_cover_the_range_exactly_once) {
    std::vector<std::atomic<int>> hits(10007);
    parallel_for(0, hits.size(), 64, [&](std::size_t b, std::size_t e) {
        BOOST_REQUIRE(e - b <= 64);
        for (std::size_t i = b; i < e; ++i) hits[i]++;
    });
    for (auto& h : hits) BOOST_REQUIRE(h.load() == 1);
}

BOOST_AUTO_TEST_CASE(empty_and_tiny_ranges) {
    int calls = 0;
    parallel_for(5, 5, 1, [&](std::size_t, std::size_t) { ++calls; });
    BOOST_TEST(calls == 0);
    parallel_for(3, 4, 100, [&](std::size_t b, std::size_t e) {
        BOOST_TEST(b == 3u);
        BOOST_TEST(e == 4u);
        ++calls;
    });
    BOOST_TEST(calls == 1);
}

BOOST_AUTO_TEST_CASE(exceptions_reach_the_caller) {
    BOOST_CHECK_THROW(parallel_for(0, 1000, 10,
                                   [](std::size_t b, std::size_t) {
                                       if (b >= 500) throw std::runtime_error("chunk failed");
                                   }),
                      std::runtime_error);
}

BOOST_AUTO_TEST_CASE(thread_limit_can_be_set_and_reset) {
    set_max_threads(1);
    BOOST_TEST(max_threads() == 1u);
    std::atomic<int> sum{0};
    parallel_for(0, 100, 10, [&](std::size_t b, std::size_t e) { sum += static_cast<int>(e - b); });
    BOOST_TEST(sum.load() == 100);
    set_max_threads(0);
    BOOST_TEST(max_threads() >= 1u);
}

BOOST_AUTO_TEST_SUITE_END()
