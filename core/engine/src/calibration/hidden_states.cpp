#include "hidden_states.hpp"

#include <moequant/error.hpp>

#include <cerrno>
#include <cstring>
#include <new>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace moequant::detail {

HiddenStates::HiddenStates(std::int64_t tokens, std::int64_t hidden, const std::filesystem::path& file)
    : tokens_(tokens), hidden_(hidden), file_(file) {
    const auto bytes = static_cast<std::size_t>(tokens * hidden) * sizeof(float);
    if (file.empty() || bytes == 0) {
        // More than the machine has would end in the kernel's OOM killer or a bare bad_alloc.
        const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
        const double physical = pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
        const auto too_large = [&] {
            return Error(ErrorKind::usage,
                         "the calibration samples' hidden states need " + std::to_string(bytes >> 20) +
                             " MiB of memory, more than this machine has",
                         {.code = "OutOfMemory",
                          .hint = "pass --max-memory GB: beyond half of it the hidden states go to a mapped scratch file"});
        };
        if (physical > 0 && static_cast<double>(bytes) > physical) throw too_large();
        try {
            memory_.assign(static_cast<std::size_t>(tokens * hidden), 0.0f);
        } catch (const std::bad_alloc&) {
            throw too_large();
        }
        data_ = memory_.data();
        return;
    }
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    auto fail = [&](const char* what) {
        const int e = errno;
        if (fd >= 0) ::close(fd);
        throw Error(ErrorKind::io, std::string(what) + ": " + std::strerror(e), {.file = file.string(), .code = "ScratchFailed"});
    };
    if (fd < 0) fail("cannot create the hidden-state scratch file");
    // Allocated, not just sized: a sparse file on a full disk would fault (SIGBUS) on first touch.
    if (const int e = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); e != 0) {
        errno = e;
        fail(e == ENOSPC ? "no room for the hidden-state scratch file (set TMPDIR or --max-memory)"
                         : "cannot allocate the hidden-state scratch file");
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) fail("cannot map the hidden-state scratch file");
    ::close(fd);
    data_ = static_cast<float*>(p);
    mapped_ = true;
}

HiddenStates::~HiddenStates() {
    if (mapped_) {
        ::munmap(data_, static_cast<std::size_t>(tokens_ * hidden_) * sizeof(float));
        std::error_code ec;
        std::filesystem::remove(file_, ec);
    }
}

}  // namespace moequant::detail
