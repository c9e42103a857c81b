#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

#include "error_code_of.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <chrono>
#include <future>

using namespace moequant;
using namespace moequant::test;

BOOST_AUTO_TEST_SUITE(input_file)

namespace {

template <typename F>
std::string code_of(F&& f) {
    return error_code_of(std::forward<F>(f), ErrorKind::input);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_small_regular_file_or_a_link_to_one_is_read_whole) {
    TempDir dir;
    write_text(dir / "config.json", "{\"a\": 1}");
    fs::create_symlink(dir / "config.json", dir / "link.json");
    BOOST_TEST(read_small_file(dir / "config.json", 8) == "{\"a\": 1}");
    BOOST_TEST(read_small_file(dir / "link.json", 64) == "{\"a\": 1}");
    write_text(dir / "empty.json", "");
    BOOST_TEST(read_small_file(dir / "empty.json", 0).empty());
}

BOOST_AUTO_TEST_CASE(a_file_over_its_limit_is_refused_with_the_limit_named) {
    TempDir dir;
    write_text(dir / "big.json", std::string(100, ' '));
    try {
        read_small_file(dir / "big.json", 99);
        BOOST_FAIL("no error");
    } catch (const Error& e) {
        BOOST_TEST(e.code() == "FileTooLarge");
        BOOST_TEST(e.context().file == (dir / "big.json").string());
        BOOST_TEST(e.message().find("limit of 99 bytes") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_CASE(folders_devices_and_fifos_are_refused_without_blocking) {
    TempDir dir;
    fs::create_directory(dir / "tokenizer.json");
    BOOST_REQUIRE(::mkfifo((dir / "fifo.json").c_str(), 0600) == 0);
    // A FIFO without a writer would block a plain open() forever: run it aside with a deadline.
    auto fifo = std::async(std::launch::async, [&] { return code_of([&] { read_small_file(dir / "fifo.json", 64); }); });
    BOOST_REQUIRE_MESSAGE(fifo.wait_for(std::chrono::seconds(10)) == std::future_status::ready, "reading a FIFO blocked");
    BOOST_TEST(fifo.get() == "NotARegularFile");
    BOOST_TEST(code_of([&] { read_small_file(dir / "tokenizer.json", 64); }) == "NotARegularFile");
    BOOST_TEST(code_of([&] { read_small_file("/dev/zero", 64); }) == "NotARegularFile");
    BOOST_TEST(code_of([&] { require_regular_file("/dev/null"); }) == "NotARegularFile");
    BOOST_TEST(code_of([&] { require_regular_file(dir / "absent.json"); }) == "NotFound");
    write_text(dir / "ok.json", "{}");
    BOOST_TEST(code_of([&] { require_regular_file(dir / "ok.json"); }).empty());
}

BOOST_AUTO_TEST_CASE(input_files_read_at_offsets_and_name_a_short_file) {
    TempDir dir;
    write_text(dir / "data.bin", "0123456789");
    const InputFile f = InputFile::open(dir / "data.bin");
    BOOST_TEST(f.size() == 10u);
    char got[4] = {};
    f.read_at(got, 4, 3);
    BOOST_TEST(std::string(got, 4) == "3456");
    BOOST_TEST(code_of([&] { f.read_at(got, 4, 8); }) == "ReadFailed");
}

BOOST_AUTO_TEST_SUITE_END()
