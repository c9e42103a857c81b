// The SIGBUS handler for mapped inputs, in forked children: a fault inside a mapped file that
// shrank becomes one error line and exit 3, after removing what the run registered (its lock,
// partial files and folders: no destructor runs); any other SIGBUS keeps its default action.
// SIGTERM, SIGINT and SIGHUP remove the same and still end the process by the signal.
#include <moequant/engine/output_lock.hpp>
#include <moequant/fault_handler.hpp>
#include <moequant/output_file.hpp>
#include <moequant/safetensors_reader.hpp>

#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <algorithm>
#include <functional>

using namespace moequant;
using namespace moequant::test;

BOOST_AUTO_TEST_SUITE(fault_handler)

namespace {

struct Outcome {
    int status = 0;
    std::string err;
};

// Runs `body` in a child with the handler installed and its stderr in `err_file`.
Outcome in_child(const fs::path& err_file, const std::function<void()>& body) {
    const pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
        const int fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) ::_exit(100);
        install_mapped_file_fault_handler();
        body();
        ::_exit(0);
    }
    Outcome o;
    BOOST_REQUIRE(::waitpid(pid, &o.status, 0) == pid);
    o.err = read_text(err_file);
    return o;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_fault_in_a_truncated_mapping_names_the_file_and_exits_3) {
    TempDir dir;
    const fs::path file = dir / "shard.safetensors";
    write_bytes(file, safetensors_bytes(R"({"w":{"dtype":"U8","shape":[65536],"data_offsets":[0,65536]}})",
                                        std::vector<std::uint8_t>(65536, 7)));
    const SafetensorsFile shard = SafetensorsFile::open(file);
    const TensorView w = shard.view("w");  // maps the file
    BOOST_REQUIRE(w.data()[65535] == std::byte{7});
    fs::resize_file(file, 0);
    const Outcome o = in_child(dir / "err.txt", [&] {
        volatile std::byte last = w.data()[65535];  // beyond the end of the file now
        (void)last;
    });
    BOOST_TEST(WIFEXITED(o.status));
    BOOST_TEST(WEXITSTATUS(o.status) == 3);
    BOOST_TEST(o.err == "moequant: error: " + file.string() +
                            ": the file shrank or became unreadable while being read (FileTruncated)\n");
}

BOOST_AUTO_TEST_CASE(the_fault_removes_the_lock_and_partials_and_nothing_else) {
    TempDir dir;
    const fs::path file = dir / "shard.safetensors", out = dir / "out";
    write_bytes(file, safetensors_bytes(R"({"w":{"dtype":"U8","shape":[65536],"data_offsets":[0,65536]}})",
                                        std::vector<std::uint8_t>(65536, 7)));
    const SafetensorsFile shard = SafetensorsFile::open(file);
    const TensorView w = shard.view("w");
    fs::create_directories(out);
    write_text(out / "user-file.txt", "kept");
    fs::resize_file(file, 0);
    const Outcome o = in_child(dir / "err.txt", [&] {
        const OutputFolderLock lock(out);                       // .moequant.lock
        OutputFile committed(out / "done.bin");                 // committed: kept
        committed.append("done");
        committed.commit();
        OutputFile partial(out / "layer.safetensors");          // .layer.safetensors.moequant.partial
        partial.append("half a layer");
        const fs::path staging = out / "._layer_3.moequant.partial";  // a kt-tree layer folder
        fs::create_directories(staging / "_numa_0");
        write_text(staging / "_numa_0" / "INT4_up_0_.kt", "codes");
        write_text(staging / "top.kt", "codes");
        remove_on_fault(staging);
        const int kept = remove_on_fault(out / "user-file.txt");
        forget_on_fault(kept);  // registered, then released: not removed
        volatile std::byte last = w.data()[65535];
        (void)last;
    });
    BOOST_TEST(WIFEXITED(o.status));
    BOOST_TEST(WEXITSTATUS(o.status) == 3);
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    BOOST_TEST(left == (std::vector<std::string>{"done.bin", "user-file.txt"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_termination_signal_removes_the_registered_paths_and_still_ends_the_process) {
    TempDir dir;
    const fs::path out = dir / "out";
    fs::create_directories(out);
    for (const int signal : {SIGTERM, SIGINT, SIGHUP}) {
        BOOST_TEST_CONTEXT("signal " << signal) {
            const Outcome o = in_child(dir / "err.txt", [&] {
                install_termination_cleanup();
                const OutputFolderLock lock(out);
                OutputFile partial(out / "layer.safetensors");
                partial.append("half a layer");
                ::raise(signal);
            });
            BOOST_TEST(WIFSIGNALED(o.status));
            BOOST_TEST(WTERMSIG(o.status) == signal);
            BOOST_TEST(fs::is_empty(out));
        }
    }
}

BOOST_AUTO_TEST_CASE(a_sigbus_elsewhere_keeps_its_default_action) {
    TempDir dir;
    const Outcome o = in_child(dir / "err.txt", [] { ::raise(SIGBUS); });
    BOOST_TEST(WIFSIGNALED(o.status));
    BOOST_TEST(WTERMSIG(o.status) == SIGBUS);
    BOOST_TEST(o.err.empty());
}

BOOST_AUTO_TEST_SUITE_END()
