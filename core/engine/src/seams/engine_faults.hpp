// Test seams of the engine: faults the test build of the host (tests/support/fault_host_main.cpp)
// injects, so the tests reach on demand what a real run meets only by bad luck: a disk too
// small, a second run arriving mid-way, a rank lost. The release host never sets them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace moequant::seams {

// A rank that kills itself (SIGKILL, as the OOM killer would) once it has converted
// `after_layers` layers.
struct RankKill {
    int rank = 0;
    long after_layers = 0;
};

struct EngineFaults {
    std::optional<std::uint64_t> free_bytes;         // stands in for free_bytes_at()'s answer
    std::chrono::milliseconds pause_after_layer{0};  // a sleep after each layer a rank converted
    std::optional<RankKill> kill_rank;
};

// The faults in effect: none unless the test host set them before the run.
inline EngineFaults& engine_faults() {
    static EngineFaults faults;
    return faults;
}

}  // namespace moequant::seams
