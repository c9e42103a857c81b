// The importance statistics `record --imatrix` writes and `convert --calibrate --format gguf`
// weighs by (column_squares.hpp): each column's sum of squares and sum, and the row count, as
// llama-imatrix collects them; and mean squares computed as llama-quantize computes them from
// the file written of those statistics, bit for bit — which is what makes the two commands
// quantize alike.
#include "gguf_imatrix.hpp"

#include "test_support.hpp"

#include <moequant/engine/column_squares.hpp>

#include <boost/test/unit_test.hpp>

#include <random>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::test;

namespace {

std::vector<float> random_rows(std::int64_t rows, std::int64_t cols, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> value(0.0f, 3.0f);
    std::vector<float> out(static_cast<std::size_t>(rows * cols));
    for (float& v : out) v = value(rng);
    return out;
}

// The statistics as the file stores them: F32 sums and counts.
ImatrixStatistics as_file_entry(const std::string& name, const std::vector<ColumnStatistics>& matrices) {
    ImatrixStatistics out{.name = name, .cols = static_cast<std::int64_t>(matrices.front().squares.size())};
    for (const auto& m : matrices) {
        for (double s : m.squares) out.sums.push_back(static_cast<float>(s));
        for (double s : m.sums) out.input_sums.push_back(static_cast<float>(s));
        out.counts.push_back(static_cast<float>(m.tokens));
    }
    return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(column_squares)

BOOST_AUTO_TEST_CASE(sums_squares_and_values_of_every_column_over_the_rows) {
    const std::int64_t cols = 5;
    const std::vector<float> rows = random_rows(7, cols, 1);
    ColumnSquares whole(cols), in_parts(cols);
    whole.add(rows.data(), 7);
    in_parts.add(rows.data(), 3);  // chunks add up to the same statistics
    in_parts.add(rows.data() + 3 * cols, 4);
    for (std::int64_t c = 0; c < cols; ++c) {
        double squares = 0, sums = 0;
        for (std::int64_t r = 0; r < 7; ++r) {
            const double v = rows[static_cast<std::size_t>(r * cols + c)];
            squares += v * v;
            sums += v;
        }
        BOOST_TEST(whole.statistics().squares[static_cast<std::size_t>(c)] == squares);
        BOOST_TEST(whole.statistics().sums[static_cast<std::size_t>(c)] == sums);
        BOOST_TEST(in_parts.statistics().squares[static_cast<std::size_t>(c)] == squares);
    }
    BOOST_TEST(whole.statistics().tokens == 7);
    BOOST_TEST(in_parts.statistics().tokens == 7);
}

BOOST_AUTO_TEST_CASE(mean_squares_are_what_llama_quantize_reads_from_the_written_file) {
    TempDir dir;
    const std::int64_t cols = 64;
    std::vector<ColumnStatistics> experts;
    for (std::int64_t rows : {37, 0, 1, 1000}) {  // expert 1 saw no token
        ColumnSquares squares(cols);
        const std::vector<float> values = random_rows(rows, cols, static_cast<unsigned>(rows) + 2);
        squares.add(values.data(), rows);
        experts.push_back(squares.take());
    }
    ImatrixRecord record{.weights = {as_file_entry("blk.0.ffn_gate_exps.weight", experts)}, .datasets = {"t"}, .chunk_count = 1, .chunk_size = 1000};
    write_imatrix_gguf(dir / "i.gguf", record);
    ImatrixFile file = ImatrixFile::open(dir / "i.gguf");
    file.check_contents();
    const auto entry = file.entry_for("blk.0.ffn_gate_exps.weight", cols, 4);
    BOOST_REQUIRE(entry.has_value());
    for (std::size_t e = 0; e < experts.size(); ++e) {
        const ColumnImportance measured = mean_squares(experts[e]);
        const ColumnImportance read = file.matrix(*entry, static_cast<std::int64_t>(e));
        BOOST_TEST(measured.tokens == experts[e].tokens);
        BOOST_TEST(read.tokens == experts[e].tokens);
        BOOST_TEST((measured.weights == read.weights), "expert " << e);  // bit for bit
    }
    BOOST_TEST((mean_squares(experts[1]).weights == std::vector<float>(static_cast<std::size_t>(cols), 1.0f)));
}

BOOST_AUTO_TEST_SUITE_END()
