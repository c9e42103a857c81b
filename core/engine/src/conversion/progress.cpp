#include <moequant/engine/progress.hpp>
#include <moequant/printable.hpp>

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>

namespace moequant {
namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string duration_text(double seconds) {
    char buf[32];
    if (seconds < 60) std::snprintf(buf, sizeof buf, "%.0fs", seconds);
    else if (seconds < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds) / 60, static_cast<int>(seconds) % 60);
    else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(seconds) / 3600, static_cast<int>(seconds) % 3600 / 60);
    return buf;
}

// The terminal's width in columns (80 when it does not say).
std::size_t terminal_columns(std::FILE* stream) {
    winsize size{};
    if (::ioctl(::fileno(stream), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
    return 80;
}

}  // namespace

ProgressSink::~ProgressSink() = default;

StreamProgress::StreamProgress(std::FILE* stream)
    : stream_(stream), terminal_(::isatty(::fileno(stream)) != 0), start_(now_seconds()) {}

void StreamProgress::step(std::size_t done, std::size_t total, const std::string& label, std::uint64_t bytes_done,
                          std::uint64_t bytes_total) {
    const double elapsed = now_seconds() - start_;
    char buf[256];
    if (bytes_total > 0) {
        const double rate = elapsed > 0 ? static_cast<double>(bytes_done) / elapsed : 0;
        const double eta = rate > 0 ? static_cast<double>(bytes_total - bytes_done) / rate : 0;
        std::snprintf(buf, sizeof buf, "%s %zu/%zu  %.2f/%.2f GB  %.2f GB/s  ETA %s", printable_text(label).c_str(), done, total,
                      static_cast<double>(bytes_done) / 1e9, static_cast<double>(bytes_total) / 1e9, rate / 1e9,
                      duration_text(eta).c_str());
    } else {
        const double per_step = done > 0 ? elapsed / static_cast<double>(done) : 0;
        std::snprintf(buf, sizeof buf, "%s %zu/%zu  %.1f s each  ETA %s", printable_text(label).c_str(), done, total, per_step,
                      duration_text(per_step * static_cast<double>(total - done)).c_str());
    }
    show(buf);
}

void StreamProgress::status(const std::string& line) { show(printable_text(line)); }

void StreamProgress::show(const std::string& line) {
    if (terminal_) {
        // One line that never wraps, or the next \r would rewrite only its tail.
        const std::size_t width = terminal_columns(stream_) - 1;
        std::fprintf(stream_, "\r\033[K%s", line.substr(0, width).c_str());
        line_open_ = true;
    } else {
        std::fprintf(stream_, "%s\n", line.c_str());
    }
    std::fflush(stream_);
}

void StreamProgress::note(const std::string& line) {
    if (line_open_) std::fputc('\n', stream_);
    line_open_ = false;
    std::fprintf(stream_, "%s\n", printable_text(line).c_str());  // notes quote names and paths
    std::fflush(stream_);
}

void StreamProgress::finish() {
    if (line_open_) std::fputc('\n', stream_);
    line_open_ = false;
    std::fflush(stream_);
}

}  // namespace moequant
