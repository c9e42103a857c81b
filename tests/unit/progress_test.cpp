// StreamProgress as a user sees it: on a terminal (a pseudo-terminal here) one status line
// rewritten in place and never wider than the terminal, notes on lines of their own, the line
// closed at the end; into a file or pipe, one plain line per step or status.
#include <moequant/engine/progress.hpp>

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace moequant;

namespace {

// Everything readable from a pseudo-terminal's master side now.
std::string drain(int master) {
    std::string out;
    char buf[4096];
    for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    return out;
}

std::size_t count(const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
}

// What a run shows: step 1 of `total`, a status, a note, step 2 (with bytes when given), the end.
void play(std::FILE* stream, std::size_t total, const std::string& status, const std::string& note, std::uint64_t bytes_done,
          std::uint64_t bytes_total) {
    StreamProgress progress(stream);
    progress.step(1, total, "layer", 0, 0);
    progress.status(status);
    progress.note(note);
    progress.step(2, total, "layer", bytes_done, bytes_total);
    progress.finish();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(progress)

BOOST_AUTO_TEST_CASE(a_terminal_gets_one_status_line_cut_to_its_width) {
    const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
    BOOST_REQUIRE(master >= 0);
    BOOST_REQUIRE(::grantpt(master) == 0 && ::unlockpt(master) == 0);
    const int slave = ::open(::ptsname(master), O_RDWR | O_NOCTTY);
    BOOST_REQUIRE(slave >= 0);
    termios raw{};
    BOOST_REQUIRE(::tcgetattr(slave, &raw) == 0);
    ::cfmakeraw(&raw);  // no "\n" -> "\r\n" translation: the bytes as written
    BOOST_REQUIRE(::tcsetattr(slave, TCSANOW, &raw) == 0);
    winsize size{};
    size.ws_col = 40;
    size.ws_row = 24;
    BOOST_REQUIRE(::ioctl(slave, TIOCSWINSZ, &size) == 0);
    ::fcntl(master, F_SETFL, O_NONBLOCK);
    std::FILE* stream = ::fdopen(slave, "w");
    BOOST_REQUIRE(stream);
    play(stream, 3, "layer 1: expert 7 quantized (2/8), a status much longer than forty columns", "a fact to keep", 10, 30);
    std::fclose(stream);
    const std::string out = drain(master);
    ::close(master);
    BOOST_TEST(count(out, "\r\033[K") == 3u, out);
    BOOST_TEST(out.find("\r\033[Klayer 1/3  ") != std::string::npos, out);
    BOOST_TEST(out.find("s each  ETA ") != std::string::npos, out);
    BOOST_TEST(out.find("\r\033[Klayer 1: expert 7 quantized (2/8), a st\n") != std::string::npos, out);  // 39 columns
    BOOST_TEST(out.find("\na fact to keep\n") != std::string::npos, out);
    BOOST_TEST(out.find("\r\033[Klayer 2/3  0.00/0.00 GB") != std::string::npos, out);
    BOOST_TEST(out.back() == '\n', out);
}

BOOST_AUTO_TEST_CASE(a_file_gets_plain_lines) {
    std::FILE* stream = std::tmpfile();
    BOOST_REQUIRE(stream);
    play(stream, 2, "layer 0: expert 1 quantized (1/8)", "kept", 0, 0);
    std::rewind(stream);
    std::string out;
    for (int c; (c = std::fgetc(stream)) != EOF;) out += static_cast<char>(c);
    std::fclose(stream);
    BOOST_TEST(out.find('\r') == std::string::npos, out);
    BOOST_TEST(count(out, "\n") == 4u, out);
    BOOST_TEST(out.rfind("layer 1/2  ", 0) == 0u, out);
    BOOST_TEST(out.find("\nlayer 0: expert 1 quantized (1/8)\nkept\nlayer 2/2  ") != std::string::npos, out);
}

BOOST_AUTO_TEST_SUITE_END()
