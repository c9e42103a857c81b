// Whether a path still names the file an open descriptor refers to. Locks are taken on open
// descriptors; between the open and the lock, another run may have unlinked or replaced the
// name, and a lock on a file no longer under its name excludes nobody.
#pragma once

#include <sys/stat.h>

#include <filesystem>

namespace moequant {

inline bool names_same_file(int fd, const std::filesystem::path& path) noexcept {
    struct stat held {}, named {};
    return ::fstat(fd, &held) == 0 && ::lstat(path.c_str(), &named) == 0 && held.st_ino == named.st_ino &&
           held.st_dev == named.st_dev;
}

}  // namespace moequant
