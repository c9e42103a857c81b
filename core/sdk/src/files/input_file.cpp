#include <moequant/error.hpp>
#include <moequant/input_file.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace moequant {
namespace {

[[noreturn]] void refuse(const std::filesystem::path& path, const std::string& message, const char* code) {
    throw Error(ErrorKind::input, message, {.file = path.string(), .code = code});
}

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

}  // namespace

InputFile InputFile::open(const std::filesystem::path& path) {
    InputFile f;
    f.path_ = path;
    do f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    while (f.fd_ < 0 && errno == EINTR);
    if (f.fd_ < 0) {
        const int e = errno;
        if (e == ENOENT) refuse(path, "no such file", "NotFound");
        refuse(path, std::string("cannot open: ") + std::strerror(e), "ReadFailed");
    }
    struct stat st{};
    if (::fstat(f.fd_, &st) != 0) refuse(path, std::string("cannot stat: ") + std::strerror(errno), "ReadFailed");
    if (!S_ISREG(st.st_mode))
        refuse(path, std::string("is ") + kind_of(st.st_mode) + ", not a regular file; inputs are read only from regular files",
               "NotARegularFile");
    f.size_ = static_cast<std::uint64_t>(st.st_size);
    return f;
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
        size_ = other.size_;
        path_ = std::move(other.path_);
    }
    return *this;
}

void InputFile::read_at(void* buffer, std::size_t size, std::uint64_t offset) const {
    auto* p = static_cast<char*>(buffer);
    while (size > 0) {
        const ssize_t n = ::pread(fd_, p, size, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) refuse(path_, std::string("cannot read: ") + std::strerror(errno), "ReadFailed");
        if (n == 0) refuse(path_, "ends early: it shrank while being read", "ReadFailed");
        p += n;
        size -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
}

void require_regular_file(const std::filesystem::path& path) { InputFile::open(path); }

namespace {

[[noreturn]] void refuse_too_large(const std::filesystem::path& path, std::uint64_t bytes, std::uint64_t max_bytes) {
    refuse(path, "holds " + std::to_string(bytes) + " bytes or more, over the limit of " + std::to_string(max_bytes) +
                     " bytes for this file",
           "FileTooLarge");
}

}  // namespace

void require_small_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
    const InputFile f = InputFile::open(path);
    if (f.size() > max_bytes) refuse_too_large(path, f.size(), max_bytes);
}

std::string read_small_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
    const InputFile f = InputFile::open(path);
    auto too_large = [&](std::uint64_t bytes) { refuse_too_large(path, bytes, max_bytes); };
    if (f.size() > max_bytes) too_large(f.size());
    // Read to the end rather than trusting the size: a file that grows is still bounded.
    std::string text;
    text.reserve(static_cast<std::size_t>(f.size()));
    char chunk[65536];
    for (;;) {
        const ssize_t n = ::read(f.fd(), chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) refuse(path, std::string("cannot read: ") + std::strerror(errno), "ReadFailed");
        if (n == 0) break;
        if (text.size() + static_cast<std::uint64_t>(n) > max_bytes) too_large(text.size() + static_cast<std::uint64_t>(n));
        text.append(chunk, static_cast<std::size_t>(n));
    }
    return text;
}

}  // namespace moequant
