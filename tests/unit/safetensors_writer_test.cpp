// The streaming writer: byte-identical to the reference writer, atomic, bounded, strict.

#include <moequant/error.hpp>
#include <moequant/output_file.hpp>
#include <moequant/safetensors_reader.hpp>
#include <moequant/safetensors_writer.hpp>

#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <csignal>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace moequant;
using namespace moequant::test;

namespace {

// Rewrites every tensor of `source` with our writer (same metadata) and returns the bytes.
std::vector<std::uint8_t> rewrite(const fs::path& source, const TempDir& dir) {
    auto in = SafetensorsFile::open(source);
    std::vector<TensorSpec> specs;
    for (const auto& t : in.tensors()) specs.push_back({t.name, t.dtype, t.shape});
    // Write in reverse name order to show that the writer, not the caller, fixes the layout.
    std::reverse(specs.begin(), specs.end());
    auto out_path = dir / source.filename().string();
    SafetensorsWriter writer(out_path, specs, in.header().metadata);
    for (auto it = specs.rbegin(); it != specs.rend(); ++it) writer.write(it->name, in.view(it->name));
    writer.finish();
    return read_bytes(out_path);
}

std::span<const std::byte> bytes_of(const std::vector<std::uint8_t>& v) {
    return std::as_bytes(std::span<const std::uint8_t>(v));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors_writer)

BOOST_AUTO_TEST_CASE(rewriting_reference_files_reproduces_them_byte_for_byte) {
    const char* files[] = {
        "safetensors_jl_testdata/non_sharded/model.numpy.safetensors",
        "safetensors_jl_testdata/non_sharded/model.safetensors",
        "safetensors_jl_testdata/non_sharded/model.with_metadata.safetensors",
        "safetensors_jl_testdata/sharded/model-00001-of-00006.safetensors",
        "safetensors_jl_testdata/sharded/model-00003-of-00006.safetensors",
        "safetensors_jl_testdata/sharded/model-00005-of-00006.safetensors",
        "safetensors_cpp_testdata/gen/model.safetensors",
    };
    TempDir dir;
    for (const char* f : files) {
        auto original = read_bytes(fixtures_dir() / f);
        auto ours = rewrite(fixtures_dir() / f, dir);
        BOOST_TEST(ours == original, f);
    }
}

BOOST_AUTO_TEST_CASE(layout_orders_by_descending_dtype_then_name_and_pads_to_8) {
    auto [header, layout] = plan_safetensors_layout(
        {{"b", DType::BF16, {2}}, {"a", DType::BF16, {1}}, {"z", DType::U8, {3}}, {"f", DType::F32, {1}}}, {});
    BOOST_TEST_REQUIRE(layout.size() == 4u);
    BOOST_TEST(layout[0].name == "f");
    BOOST_TEST(layout[1].name == "a");
    BOOST_TEST(layout[2].name == "b");
    BOOST_TEST(layout[3].name == "z");
    BOOST_TEST(layout[1].begin == 4u);
    BOOST_TEST(layout[3].end == 13u);
    BOOST_TEST(header.size() % 8 == 0u);
    BOOST_TEST(header.rfind("{\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(empty_file_matches_the_reference_sizes) {
    // The reference writes "{}" + 6 spaces for nothing, and N = 40 for {"framework":"pt"}.
    BOOST_TEST(plan_safetensors_layout({}, {}).first == "{}      ");
    BOOST_TEST(plan_safetensors_layout({}, {{"framework", "pt"}}).first.size() == 40u);
}

BOOST_AUTO_TEST_CASE(names_are_escaped_like_serde_json) {
    auto header = plan_safetensors_layout({{"q\"\\\n\x01\xc3\xa9", DType::U8, {1}}}, {}).first;
    BOOST_TEST(header.find(R"("q\"\\\n\u0001)" "\xc3\xa9\"") != std::string::npos);
    TempDir dir;
    {
        SafetensorsWriter w(dir / "x.safetensors", {{"q\"\\\n\x01\xc3\xa9", DType::U8, {1}}}, {});
        std::uint8_t one = 1;
        w.write("q\"\\\n\x01\xc3\xa9", std::as_bytes(std::span<std::uint8_t>(&one, 1)));
        w.finish();
    }
    BOOST_TEST(SafetensorsFile::open(dir / "x.safetensors").contains("q\"\\\n\x01\xc3\xa9"));
}

BOOST_AUTO_TEST_CASE(chunks_in_any_tensor_order_produce_the_same_file) {
    TempDir dir;
    std::vector<std::uint8_t> a(1000), b(333);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint8_t>(i * 7);
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 3 + 1);
    std::vector<TensorSpec> specs = {{"a", DType::U8, {1000}}, {"b", DType::I8, {333}}};
    {
        SafetensorsWriter w(dir / "one.safetensors", specs);
        w.write("a", bytes_of(a));
        w.write("b", bytes_of(b));
        w.finish();
    }
    {
        SafetensorsWriter w(dir / "two.safetensors", specs);
        auto bb = bytes_of(b);
        w.write_chunk("b", bb.subspan(0, 100));
        auto ab = bytes_of(a);
        for (std::size_t off = 0; off < a.size(); off += 64) w.write_chunk("a", ab.subspan(off, std::min<std::size_t>(64, a.size() - off)));
        w.write_chunk("b", bb.subspan(100));
        w.finish();
    }
    BOOST_TEST(read_bytes(dir / "one.safetensors") == read_bytes(dir / "two.safetensors"));
    auto f = SafetensorsFile::open(dir / "two.safetensors");
    BOOST_TEST(f.metadata("format").value() == "pt");
    auto v = f.view("a");
    BOOST_TEST(std::equal(a.begin(), a.end(), reinterpret_cast<const std::uint8_t*>(v.data())));
}

BOOST_AUTO_TEST_CASE(the_file_has_its_final_name_only_after_finish) {
    TempDir dir;
    auto final_path = dir / "model-00001-of-00002.safetensors";
    std::vector<std::uint8_t> data(16, 1);
    SafetensorsWriter w(final_path, {{"w", DType::F32, {4}}});
    BOOST_TEST(fs::exists(dir / ".model-00001-of-00002.safetensors.moequant.partial"));
    BOOST_TEST(!fs::exists(final_path));
    BOOST_TEST(partial_path_for(final_path).extension() == ".partial");
    w.write("w", bytes_of(data));
    w.finish();
    BOOST_TEST(fs::exists(final_path));
    BOOST_TEST(!fs::exists(dir / ".model-00001-of-00002.safetensors.moequant.partial"));
}

BOOST_AUTO_TEST_CASE(an_unfinished_writer_leaves_nothing_behind) {
    TempDir dir;
    {
        SafetensorsWriter w(dir / "x.safetensors", {{"w", DType::F32, {4}}, {"v", DType::F32, {1}}});
        std::vector<std::uint8_t> data(16, 1);
        w.write("w", bytes_of(data));
        BOOST_CHECK_THROW(w.finish(), Error);  // "v" was never written
    }
    BOOST_TEST(fs::is_empty(dir.path()));
}

BOOST_AUTO_TEST_CASE(misuse_is_reported_with_the_tensor_name) {
    TempDir dir;
    BOOST_CHECK_THROW(SafetensorsWriter(dir / "d.safetensors", {{"w", DType::U8, {1}}, {"w", DType::U8, {2}}}), Error);
    BOOST_CHECK_THROW(SafetensorsWriter(dir / "m.safetensors", {{"__metadata__", DType::U8, {1}}}), Error);
    BOOST_CHECK_THROW(SafetensorsWriter(dir / "f4.safetensors", {{"w", DType::F4, {3}}}), Error);
    SafetensorsWriter w(dir / "ok.safetensors", {{"w", DType::U8, {4}}});
    std::vector<std::uint8_t> three(3), five(5);
    try {
        w.write("w", bytes_of(three));
        BOOST_FAIL("a short tensor was accepted");
    } catch (const Error& e) {
        BOOST_TEST(e.context().tensor == "w");
    }
    BOOST_CHECK_THROW(w.write("undeclared", bytes_of(three)), Error);
    BOOST_CHECK_THROW(w.write_chunk("w", bytes_of(five)), Error);
}

// A file-size limit (RLIMIT_FSIZE) must become an Error naming the file, with no file left.
// Run in a child process so the limit does not touch the test runner.
BOOST_AUTO_TEST_CASE(file_size_limit_is_a_clean_io_error) {
    TempDir dir;
    pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
        std::signal(SIGXFSZ, SIG_IGN);
        struct rlimit limit{4096, 4096};
        ::setrlimit(RLIMIT_FSIZE, &limit);
        int status = 10;
        try {
            std::vector<std::uint8_t> data(65536, 7);
            SafetensorsWriter w(dir / "big.safetensors", {{"w", DType::U8, {65536}}});
            w.write("w", bytes_of(data));
            w.finish();
            status = 11;
        } catch (const Error& e) {
            bool named = std::string(e.what()).find("big.safetensors") != std::string::npos;
            status = (e.code() == "FileTooLarge" && e.kind() == ErrorKind::io && named) ? 0 : 12;
        }
        if (status == 0 && !fs::is_empty(dir.path())) status = 13;
        ::_exit(status);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    BOOST_TEST(WIFEXITED(status));
    BOOST_TEST(WEXITSTATUS(status) == 0, "child status " << WEXITSTATUS(status)
                                                         << " (11: no error, 12: wrong error, 13: file left)");
}

BOOST_AUTO_TEST_SUITE_END()
