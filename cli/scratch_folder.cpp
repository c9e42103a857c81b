#include "scratch_folder.hpp"

#include "human_format.hpp"

#include <moequant/error.hpp>
#include <moequant/fault_handler.hpp>
#include <moequant/printable.hpp>

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace moequant::cli {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void refuse(const std::string& folder, const std::string& what, const char* code) {
    throw Error(ErrorKind::io, "the temporary folder " + what,
                {.file = folder, .code = code,
                 .hint = "set TMPDIR to a writable folder with room for the run's scratch files (or unset it for /tmp)"});
}

}  // namespace

fs::path checked_temporary_folder(std::uint64_t needed_bytes) {
    const char* set = std::getenv("TMPDIR");
    if (set && !*set) refuse("TMPDIR", "is set but empty (TMPDIR=)", "BadTmpdir");
    const std::string folder = set ? set : "/tmp";
    const std::string named = (set ? "TMPDIR " : "") + printable_name(folder);
    struct stat st {};
    if (::stat(folder.c_str(), &st) != 0)
        refuse(folder, named + " cannot be used: " + std::strerror(errno), "BadTmpdir");
    if (!S_ISDIR(st.st_mode)) refuse(folder, named + " is not a folder", "BadTmpdir");
    if (::access(folder.c_str(), W_OK | X_OK) != 0) refuse(folder, named + " is not writable by this process", "BadTmpdir");
    struct statvfs fsinfo {};
    if (needed_bytes > 0 && ::statvfs(folder.c_str(), &fsinfo) == 0) {
        const auto free = static_cast<unsigned __int128>(fsinfo.f_bavail) * fsinfo.f_frsize;
        if (free < needed_bytes)
            refuse(folder,
                   named + " has " + human_bytes(static_cast<std::uint64_t>(free)) + " free, the run's scratch files need " +
                       human_bytes(needed_bytes),
                   "NoScratchSpace");
    }
    return folder;
}

std::uint64_t scratch_bytes(std::int64_t tokens, std::int64_t hidden, bool layer_inputs, int mapped_copies) {
    const auto rows = static_cast<std::uint64_t>(std::max<std::int64_t>(tokens, 0)) * static_cast<std::uint64_t>(hidden) * sizeof(float);
    return rows * (static_cast<std::uint64_t>(layer_inputs) + static_cast<std::uint64_t>(mapped_copies));
}

ScratchFolder::ScratchFolder(std::uint64_t needed_bytes) {
    // mkdtemp: a new folder only this process made (0700), never one planted under a guessed name.
    std::string pattern = (checked_temporary_folder(needed_bytes) / "moequant-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
        throw Error(ErrorKind::io, std::string("cannot create a scratch folder: ") + std::strerror(errno),
                    {.file = pattern, .code = "ScratchFailed", .hint = "set TMPDIR to a writable folder"});
    path_ = pattern;
    fault_slot_ = remove_on_fault(path_);  // also when a fault or a signal ends the run
}

ScratchFolder::~ScratchFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
    forget_on_fault(fault_slot_);
}

}  // namespace moequant::cli
