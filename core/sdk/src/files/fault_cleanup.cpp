#include "fault_cleanup.hpp"

#include <moequant/fault_handler.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>

namespace moequant {
namespace detail {
namespace {

// A slot is claimed (free -> filling), its path copied, then published (ready, release); the
// handler reads ready slots only (acquire). forget_on_fault() frees it again.
enum : int { free_slot = 0, filling = 1, ready = 2 };

struct Slot {
    std::atomic<int> state{free_slot};
    char path[PATH_MAX];
};

// More than the temporary files and folders a run holds at once: one per writing thread and layer.
constexpr int slot_count = 256;
Slot slots[slot_count];

// What getdents64(2) returns, one entry; declared here because glibc 2.36 does not.
struct DirectoryEntry {
    unsigned long long inode;
    long long next;
    unsigned short length;
    unsigned char type;
    char name[1];
};

// Removes what is in the open folder `dir` (depth levels at most), then nothing else.
void empty_folder(int dir, int depth) noexcept {
    alignas(8) char buffer[4096];
    for (;;) {
        const long n = ::syscall(SYS_getdents64, dir, buffer, sizeof buffer);
        if (n <= 0) return;
        bool removed = false;
        for (long at = 0; at < n;) {
            const auto* e = reinterpret_cast<const DirectoryEntry*>(buffer + at);
            at += e->length;
            if (std::strcmp(e->name, ".") == 0 || std::strcmp(e->name, "..") == 0) continue;
            if (::unlinkat(dir, e->name, 0) == 0) {
                removed = true;
                continue;
            }
            if (depth <= 0) continue;
            const int child = ::openat(dir, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (child < 0) continue;
            empty_folder(child, depth - 1);
            ::close(child);
            removed = ::unlinkat(dir, e->name, AT_REMOVEDIR) == 0 || removed;
        }
        // Entries were removed while listed: list again from the start.
        if (removed) ::lseek(dir, 0, SEEK_SET);
    }
}

void remove_path(const char* path) noexcept {
    if (::unlink(path) == 0) return;
    const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir < 0) return;
    empty_folder(dir, 3);
    ::close(dir);
    ::rmdir(path);
}

// Async-signal-safe: removes the registered paths, then the signal's default action.
void on_termination(int signal) {
    remove_registered_paths();
    raise_with_default_action(signal);
}

}  // namespace

void raise_with_default_action(int signal) noexcept {
    struct sigaction fallback{};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    ::sigaction(signal, &fallback, nullptr);
    ::raise(signal);
}

void remove_registered_paths() noexcept {
    for (Slot& s : slots)
        if (s.state.load(std::memory_order_acquire) == ready) remove_path(s.path);
}

}  // namespace detail

void install_termination_cleanup() {
    for (const int signal : {SIGTERM, SIGINT, SIGHUP}) {
        struct sigaction current{};
        if (::sigaction(signal, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) continue;  // nohup keeps it ignored
        struct sigaction action{};
        action.sa_handler = &detail::on_termination;
        sigemptyset(&action.sa_mask);
        ::sigaction(signal, &action, nullptr);
    }
}

int remove_on_fault(const std::filesystem::path& path) noexcept {
    const std::string& text = path.native();
    if (text.size() >= PATH_MAX) return -1;
    for (int i = 0; i < detail::slot_count; ++i) {
        int expected = detail::free_slot;
        if (!detail::slots[i].state.compare_exchange_strong(expected, detail::filling, std::memory_order_acquire)) continue;
        std::memcpy(detail::slots[i].path, text.c_str(), text.size() + 1);
        detail::slots[i].state.store(detail::ready, std::memory_order_release);
        return i;
    }
    return -1;
}

void forget_on_fault(int slot) noexcept {
    if (slot >= 0 && slot < detail::slot_count) detail::slots[slot].state.store(detail::free_slot, std::memory_order_release);
}

}  // namespace moequant
