#include "seams/write_budget.hpp"

#include <atomic>
#include <cerrno>

namespace moequant::seams {
namespace {

constexpr std::uint64_t unlimited = UINT64_MAX;
std::atomic<std::uint64_t> budget{unlimited};
std::atomic<std::uint64_t> written{0};

}  // namespace

void limit_output_writes(std::uint64_t bytes) { budget = bytes; }

bool output_write_allowed(std::size_t n) {
    const std::uint64_t limit = budget.load(std::memory_order_relaxed);
    if (limit == unlimited) return true;
    if (written.fetch_add(n) + n > limit) {
        errno = ENOSPC;
        return false;
    }
    return true;
}

}  // namespace moequant::seams
