#include "mapped_ranges.hpp"

#include "fault_cleanup.hpp"

#include <moequant/error.hpp>
#include <moequant/fault_handler.hpp>

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

namespace moequant::detail {
namespace {

// A slot is claimed through `used`, then filled; `name` is published last (release), so the
// handler, which reads `name` first (acquire), sees a complete range or none.
struct Slot {
    std::atomic<bool> used{false};
    std::atomic<std::uintptr_t> begin{0}, end{0};
    std::atomic<const char*> name{nullptr};
};

// More than any model's shard count plus activations and outputs read back (DeepSeek-V3 has 163).
constexpr int slot_count = 4096;
Slot slots[slot_count];

void write_all(const char* text, std::size_t length) noexcept {
    while (length > 0) {
        const ssize_t n = ::write(STDERR_FILENO, text, length);
        if (n <= 0) return;
        text += n;
        length -= static_cast<std::size_t>(n);
    }
}

void write_text(const char* text) noexcept { write_all(text, std::strlen(text)); }

// Async-signal-safe: atomics, write(2), _exit(2), sigaction(2) and raise(3) only.
void on_sigbus(int signal, siginfo_t* info, void*) {
    // si_addr means something only for a fault the kernel raised (si_code > 0), not for kill().
    if (const char* name = info->si_code > 0 ? mapped_file_at(info->si_addr) : nullptr) {
        for (const char* part : {"moequant: error: ", name, ": ", truncated_input_reason, " (", truncated_input_code, ")\n"})
            write_text(part);
        remove_registered_paths();  // what the unwinding would have removed: the lock, temporaries
        ::_exit(exit_code(ErrorKind::input));
    }
    // Not a mapped input: the default action, as if no handler were installed. A fault repeats
    // when the handler returns; a SIGBUS sent with kill() is delivered once unblocked.
    raise_with_default_action(signal);
}

}  // namespace

int add_mapped_range(const void* begin, std::size_t size, const char* name) noexcept {
    for (int i = 0; i < slot_count; ++i) {
        bool expected = false;
        if (!slots[i].used.compare_exchange_strong(expected, true, std::memory_order_acquire)) continue;
        const auto b = reinterpret_cast<std::uintptr_t>(begin);
        slots[i].begin.store(b, std::memory_order_relaxed);
        slots[i].end.store(b + size, std::memory_order_relaxed);
        slots[i].name.store(name, std::memory_order_release);
        return i;
    }
    return -1;
}

const char* mapped_file_at(const void* address) noexcept {
    const auto a = reinterpret_cast<std::uintptr_t>(address);
    for (const Slot& s : slots) {
        const char* name = s.name.load(std::memory_order_acquire);
        if (name && a >= s.begin.load(std::memory_order_relaxed) && a < s.end.load(std::memory_order_relaxed)) return name;
    }
    return nullptr;
}

void remove_mapped_range(int slot) noexcept {
    if (slot < 0) return;
    slots[slot].name.store(nullptr, std::memory_order_release);
    slots[slot].used.store(false, std::memory_order_release);
}

}  // namespace moequant::detail

namespace moequant {

void install_mapped_file_fault_handler() {
    struct sigaction action{};
    action.sa_sigaction = &detail::on_sigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, nullptr);
}

}  // namespace moequant
