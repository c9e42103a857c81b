// Timing helper shared by the benchmarks: the best of several runs (the machines are noisy, so
// the minimum is the most repeatable figure).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>

namespace moequant::bench {

inline double best_seconds(int repeats, const std::function<void()>& fn) {
    double best = 1e30;
    for (int i = 0; i < repeats; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        fn();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

}  // namespace moequant::bench
