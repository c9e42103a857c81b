#include <moequant/parallel.hpp>

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <memory>
#include <mutex>

namespace moequant {
namespace {

std::mutex control_mutex;
// Kept for the process lifetime: TBB honours the limit while the control object lives.
std::unique_ptr<tbb::global_control>& thread_limit() {
    static auto* limit = new std::unique_ptr<tbb::global_control>();
    return *limit;
}

}  // namespace

void parallel_for(std::size_t begin, std::size_t end, std::size_t grain,
                  const std::function<void(std::size_t, std::size_t)>& body) {
    if (begin >= end) return;
    grain = std::max<std::size_t>(grain, 1);
    if (end - begin <= grain || max_threads() == 1) {
        body(begin, end);
        return;
    }
    tbb::parallel_for(tbb::blocked_range<std::size_t>(begin, end, grain),
                      [&](const tbb::blocked_range<std::size_t>& r) { body(r.begin(), r.end()); },
                      tbb::simple_partitioner());
}

void set_max_threads(std::size_t threads) {
    std::lock_guard lock(control_mutex);
    if (threads == 0) {
        thread_limit().reset();
        return;
    }
    // Beyond the cores the default arena gets no more workers, but TBB sizes bookkeeping by the
    // cap: --threads 100000000000 ran out of memory.
    const auto cores = static_cast<std::size_t>(std::max(1, tbb::info::default_concurrency()));
    thread_limit() = std::make_unique<tbb::global_control>(
        tbb::global_control::max_allowed_parallelism, std::min(threads, cores));
}

std::size_t max_threads() noexcept {
    return tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism);
}

}  // namespace moequant
