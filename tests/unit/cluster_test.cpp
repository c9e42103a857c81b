// The cluster of one and the split of sample blocks to ranks (cluster.hpp): the parts of a run
// across ranks that need no mpirun. integration.cluster runs the ranks themselves.

#include <moequant/engine/cluster.hpp>

#include <boost/test/unit_test.hpp>

#include <numeric>

using namespace moequant;

BOOST_AUTO_TEST_SUITE(cluster)

BOOST_AUTO_TEST_CASE(a_process_alone_is_rank_0_of_1_and_shares_with_itself) {
    Cluster& one = Cluster::alone();
    BOOST_TEST(one.rank() == 0);
    BOOST_TEST(one.size() == 1);
    BOOST_TEST(one.root());
    BOOST_TEST(rank_label(one).empty());
    const std::vector<std::string> all = one.all_gather("abc");
    BOOST_TEST(all.size() == 1u);
    BOOST_TEST(all[0] == "abc");
    std::string bytes = "kept";
    one.broadcast(bytes, 0);
    BOOST_TEST(bytes == "kept");
    BOOST_TEST(one.bytes_sent() == 0u);
}

BOOST_AUTO_TEST_CASE(ranks_take_contiguous_runs_that_cover_every_block_once) {
    const std::vector<std::vector<std::int64_t>> cases = {
        {2048, 2048, 2048, 2048}, {100, 5000, 100, 100, 100}, {7}, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, {}, {300, 2048, 17, 900, 1200, 64}};
    for (const auto& weight : cases)
        for (int ranks = 1; ranks <= 5; ++ranks) {
            std::size_t next = 0;
            for (int r = 0; r < ranks; ++r) {
                const auto [first, last] = rank_share(weight, r, ranks);
                BOOST_TEST(first == next, "rank " << r << " of " << ranks << " starts at " << first << ", not " << next);
                BOOST_TEST(last >= first);
                next = last;
            }
            BOOST_TEST(next == weight.size());
        }
}

BOOST_AUTO_TEST_CASE(equal_blocks_are_shared_out_evenly) {
    const std::vector<std::int64_t> blocks(12, 2048);
    for (int ranks : {1, 2, 3, 4, 6}) {
        for (int r = 0; r < ranks; ++r) {
            const auto [first, last] = rank_share(blocks, r, ranks);
            BOOST_TEST(last - first == 12u / static_cast<unsigned>(ranks));
        }
    }
    // Unequal ones by their tokens: the long block alone on one rank.
    const auto [first, last] = rank_share({100, 5000, 100, 100}, 1, 2);
    BOOST_TEST(first == 2u);
    BOOST_TEST(last == 4u);
}

BOOST_AUTO_TEST_SUITE_END()
