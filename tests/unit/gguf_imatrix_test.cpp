// llama.cpp's importance matrix files: what write_imatrix_gguf()/write_imatrix_legacy() write
// reads back through ImatrixFile with llama-quantize's arithmetic (sum / count, 1 for a matrix
// that saw no token; value / ncall), entries are shaped to a tensor as llama-quantize slices
// them (and a size it would refuse is refused), and damaged or hostile files are refused with
// an input error naming the file, never a crash. llama.cpp's own tools on these files:
// docs/gguf-imatrix.md.
#include "gguf_container.hpp"
#include "gguf_imatrix.hpp"

#include "test_support.hpp"

#include <moequant/error.hpp>

#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <limits>

using namespace moequant;
using namespace moequant::formats;
using namespace moequant::test;

namespace {

// Two weights: stacked experts (3 matrices, the middle one never routed) and a dense one.
ImatrixRecord sample_record() {
    ImatrixRecord r;
    r.datasets = {"wiki.train.raw"};
    r.chunk_count = 7;
    r.chunk_size = 512;
    ImatrixStatistics experts{.name = "blk.0.ffn_down_exps.weight", .cols = 4};
    experts.counts = {10, 0, 1300};
    for (int m = 0; m < 3; ++m)
        for (int c = 0; c < 4; ++c) experts.sums.push_back(m == 1 ? 0.0f : 0.37f * static_cast<float>((m + 1) * (c + 2)));
    ImatrixStatistics dense{.name = "blk.0.attn_q.weight", .cols = 8, .counts = {2600}};
    for (int c = 0; c < 8; ++c) dense.sums.push_back(1.0f + 0.5f * static_cast<float>(c));
    r.weights = {experts, dense};
    return r;
}

std::int64_t error_code_of(const std::function<void()>& body, std::string& what) {
    try {
        body();
    } catch (const Error& e) {
        what = e.what();
        return static_cast<std::int64_t>(e.kind());
    }
    return -1;
}

void expect_refused(const fs::path& file, const std::string& needle) {
    std::string what;
    const auto kind = error_code_of(
        [&] {
            ImatrixFile f = ImatrixFile::open(file);
            f.check_contents();
        },
        what);
    BOOST_TEST(kind == static_cast<std::int64_t>(ErrorKind::input), what);
    BOOST_TEST(contains(what, file.filename().string()), what);
    BOOST_TEST(contains(what, needle), what);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_imatrix)

BOOST_AUTO_TEST_CASE(gguf_form_reads_back_as_llama_quantize_computes_it) {
    TempDir dir;
    const ImatrixRecord record = sample_record();
    write_imatrix_gguf(dir / "imatrix.gguf", record);
    ImatrixFile f = ImatrixFile::open(dir / "imatrix.gguf");
    f.check_contents();
    BOOST_TEST((f.form() == ImatrixFile::Form::gguf));
    BOOST_TEST(f.entries() == 2u);
    BOOST_TEST(f.chunk_count() == 7);
    BOOST_TEST(f.datasets().at(0) == "wiki.train.raw");
    BOOST_TEST(contains(f.identity(), "GGUF imatrix"));

    const ImatrixEntry* e = f.find("blk.0.ffn_down_exps.weight");
    BOOST_REQUIRE(e);
    BOOST_TEST(e->cols == 4);
    BOOST_TEST(e->matrices == 3);
    const auto& sums = record.weights[0].sums;
    for (std::int64_t m : {0, 2}) {
        const ColumnImportance one = f.matrix(*e, m);
        BOOST_TEST(one.tokens == static_cast<std::int64_t>(record.weights[0].counts[static_cast<std::size_t>(m)]));
        for (std::size_t c = 0; c < 4; ++c)
            BOOST_TEST(one.weights[c] == sums[static_cast<std::size_t>(m) * 4 + c] / record.weights[0].counts[static_cast<std::size_t>(m)]);
    }
    const ColumnImportance unseen = f.matrix(*e, 1);
    BOOST_TEST(unseen.tokens == 0);
    BOOST_TEST((unseen.weights == std::vector<float>(4, 1.0f)));  // llama.cpp's stand-in
    BOOST_TEST(f.weights(*f.find("blk.0.attn_q.weight")).size() == 8u);
}

// llama-imatrix also writes each weight's input sums (NAME.in_sum, after in_sum2 and counts) for
// its statistics; llama-quantize pairs only in_sum2 with counts, and so does the reader.
BOOST_AUTO_TEST_CASE(input_sums_are_written_as_llama_imatrix_writes_them_and_ignored_when_read) {
    TempDir dir;
    ImatrixRecord record = sample_record();
    for (float s : record.weights[0].sums) record.weights[0].input_sums.push_back(-s);
    write_imatrix_gguf(dir / "imatrix.gguf", record);
    const GgufFile header = read_gguf_file_header((dir / "imatrix.gguf").string());
    std::vector<std::string> names;
    for (const auto& t : header.tensors) names.push_back(t.name);
    const std::vector<std::string> expected = {"blk.0.attn_q.weight.in_sum2", "blk.0.attn_q.weight.counts",
                                               "blk.0.ffn_down_exps.weight.in_sum2", "blk.0.ffn_down_exps.weight.counts",
                                               "blk.0.ffn_down_exps.weight.in_sum"};
    BOOST_TEST(names == expected, boost::test_tools::per_element());
    const GgufTensorInfo& in_sum = *header.tensor("blk.0.ffn_down_exps.weight.in_sum");
    BOOST_TEST((in_sum.ne == std::vector<std::int64_t>{4, 3}));
    BOOST_TEST(in_sum.type == 0u);  // F32
    ImatrixFile f = ImatrixFile::open(dir / "imatrix.gguf");
    f.check_contents();
    BOOST_TEST(f.entries() == 2u);
    BOOST_TEST(f.matrix(*f.find("blk.0.ffn_down_exps.weight"), 0).weights[0] == record.weights[0].sums[0] / 10.0f);

    record.weights[0].input_sums.pop_back();  // not one per sum: refused before any file
    BOOST_CHECK_THROW(write_imatrix_gguf(dir / "bad.gguf", record), Error);
    BOOST_TEST(!fs::exists(dir / "bad.gguf"));
}

BOOST_AUTO_TEST_CASE(legacy_form_reads_back_as_llama_quantize_computes_it) {
    TempDir dir;
    ImatrixRecord record = sample_record();
    record.weights.push_back({.name = "blk.1.ffn_up_exps.weight", .cols = 2, .sums = {1, 2, 3, 4}, .counts = {0, 0}});
    write_imatrix_legacy(dir / "imatrix.dat", record);
    ImatrixFile f = ImatrixFile::open(dir / "imatrix.dat");
    f.check_contents();
    BOOST_TEST((f.form() == ImatrixFile::Form::legacy));
    BOOST_TEST(f.entries() == 2u);  // the weight no token reached is not written
    BOOST_TEST(f.chunk_count() == 7);
    BOOST_TEST(f.datasets().at(0) == "wiki.train.raw");
    // Legacy entries are flat; the tensor's row length splits them into its experts.
    const auto entry = f.entry_for("blk.0.ffn_down_exps.weight", 4, 3);
    BOOST_REQUIRE(entry.has_value());
    const auto& w = record.weights[0];
    const float ncall = std::ceil(1300.0f / 512.0f);
    for (std::int64_t m = 0; m < 3; ++m) {
        const ColumnImportance one = f.matrix(*entry, m);
        BOOST_TEST(one.tokens == -1);  // the legacy form does not say
        for (std::size_t c = 0; c < 4; ++c) {
            const std::size_t i = static_cast<std::size_t>(m) * 4 + c;
            const float stored = (w.counts[static_cast<std::size_t>(m)] > 0 ? w.sums[i] / w.counts[static_cast<std::size_t>(m)] : 1.0f) * ncall;
            BOOST_TEST(one.weights[c] == stored / ncall);
        }
    }
}

BOOST_AUTO_TEST_CASE(entries_are_shaped_to_their_tensor_as_llama_quantize_checks_them) {
    TempDir dir;
    ImatrixRecord record = sample_record();
    record.weights.push_back({.name = "token_embd.weight", .cols = 3, .sums = {1, 1, 1}, .counts = {1}});
    write_imatrix_gguf(dir / "i.gguf", record);
    const ImatrixFile f = ImatrixFile::open(dir / "i.gguf");
    BOOST_TEST(!f.entry_for("blk.9.attn_q.weight", 8, 1).has_value());      // none: quantized without
    BOOST_TEST(!f.entry_for("token_embd.weight", 16, 1).has_value());       // llama-quantize skips a mismatched token_embd
    BOOST_TEST(f.entry_for("blk.0.attn_q.weight", 8, 1)->matrices == 1);
    std::string what;
    error_code_of([&] { f.entry_for("blk.0.attn_q.weight", 16, 1); }, what);
    BOOST_TEST(contains(what, "entry blk.0.attn_q.weight holds 8 values; the tensor needs 16 per matrix x 1 matrices"), what);
}

// llama-quantize checks only an entry's size against the tensor's (ne[0] x ne[2]); each value is
// divided by the count of its group in the file. llama-imatrix merges the equal counts of a 3-D
// weight ggml_mul_mat multiplies per head (deepseek2's attn_k_b) into one: one count, all values.
BOOST_AUTO_TEST_CASE(a_gguf_entry_grouped_otherwise_than_its_tensor_keeps_its_counts) {
    TempDir dir;
    const ImatrixRecord record = sample_record();
    write_imatrix_gguf(dir / "i.gguf", record);
    const ImatrixFile f = ImatrixFile::open(dir / "i.gguf");
    // attn_q's 8 values over its one count (2600), as 2 matrices of 4 (attn_k_b's heads).
    const auto heads = f.entry_for("blk.0.attn_q.weight", 4, 2);
    BOOST_REQUIRE(heads.has_value());
    const auto& dense = record.weights[1];
    for (std::int64_t m = 0; m < 2; ++m) {
        const ColumnImportance one = f.matrix(*heads, m);
        BOOST_TEST(one.tokens == 2600);
        for (std::size_t c = 0; c < 4; ++c) BOOST_TEST(one.weights[c] == dense.sums[static_cast<std::size_t>(m) * 4 + c] / 2600.0f);
    }
    // The experts' 3 x 4 values as 6 x 2: matrices 2 and 3 are the unseen expert's (weight 1).
    const auto pairs = f.entry_for("blk.0.ffn_down_exps.weight", 2, 6);
    BOOST_REQUIRE(pairs.has_value());
    const auto& experts = record.weights[0];
    const std::vector<float> flat = f.weights(*pairs);
    BOOST_REQUIRE(flat.size() == 12u);
    for (std::size_t i = 0; i < 12; ++i) {
        const float count = experts.counts[i / 4];
        BOOST_TEST(flat[i] == (count > 0 ? experts.sums[i] / count : 1.0f), i);
    }
    BOOST_TEST(f.matrix(*pairs, 2).tokens == 0);
    BOOST_TEST(f.matrix(*pairs, 5).tokens == 1300);
}

BOOST_AUTO_TEST_CASE(damaged_and_hostile_files_are_refused_naming_the_file) {
    TempDir dir;
    const ImatrixRecord record = sample_record();
    write_imatrix_legacy(dir / "good.dat", record);
    const std::vector<std::uint8_t> good = read_bytes(dir / "good.dat");
    // Every truncation inside the entries: refused, never read past the end.
    const std::size_t entries_end = good.size() - 8 - record.datasets[0].size();  // then the trailer
    for (std::size_t cut = 0; cut < entries_end; cut += 3) {
        write_bytes(dir / "cut.dat", std::vector<std::uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)));
        std::string what;
        const auto kind = error_code_of([&] { ImatrixFile::open(dir / "cut.dat"); }, what);
        BOOST_TEST(kind == static_cast<std::int64_t>(ErrorKind::input), "cut at " << cut << ": " << what);
    }
    auto poked = [&](std::size_t at, std::int32_t value) {
        std::vector<std::uint8_t> bytes = good;
        std::memcpy(bytes.data() + at, &value, 4);
        write_bytes(dir / "poked.dat", bytes);
        return dir / "poked.dat";
    };
    expect_refused(poked(0, 1 << 30), "entry count");
    expect_refused(poked(4, -5), "has a name of -5 bytes");
    const std::size_t first_name = 8, first_values = first_name + record.weights[1].name.size() + 8;  // names sort: attn_q first
    expect_refused(poked(first_values - 4, 1 << 28), "past the file's end");
    expect_refused(poked(first_values, 0x7fc00000), "non-finite weight");  // a NaN value

    // GGUF: the keys llama-quantize requires, paired tensors, a model GGUF given by mistake.
    ImatrixRecord bad = record;
    bad.weights[0].sums[1] = std::numeric_limits<float>::infinity();
    bad.weights[0].sums[5] = std::numeric_limits<float>::infinity();  // matrix 1 saw no token: weighs 1, as in llama.cpp
    write_imatrix_gguf(dir / "inf.gguf", bad);
    expect_refused(dir / "inf.gguf", "entry blk.0.ffn_down_exps.weight has a non-finite weight at matrix 0, column 1");
    write_bytes(dir / "empty.gguf", {'G', 'G', 'U', 'F'});
    expect_refused(dir / "empty.gguf", "empty.gguf");
}

BOOST_AUTO_TEST_SUITE_END()
