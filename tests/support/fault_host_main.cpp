// moequant-fault-host: the moequant host with faults injected from the environment, built with
// the tests only and never installed. The release host reads none of these variables.
//   MOEQUANT_TEST_ENOSPC_AFTER_BYTES=N    output writes fail with ENOSPC past N bytes in total
//   MOEQUANT_TEST_FREE_BYTES=N            the free space the disk check (and --dry-run) sees
//   MOEQUANT_TEST_PAUSE_AFTER_LAYER_MS=N  sleep N ms after each layer a rank converted
//   MOEQUANT_TEST_KILL_RANK=R:N           rank R kills itself (SIGKILL) after its Nth layer

#include "host_main.hpp"
#include "seams/engine_faults.hpp"
#include "seams/write_budget.hpp"

#include <chrono>
#include <cstdlib>

namespace {

void inject_faults_from_environment() {
    using namespace moequant::seams;
    if (const char* v = std::getenv("MOEQUANT_TEST_ENOSPC_AFTER_BYTES")) limit_output_writes(std::strtoull(v, nullptr, 10));
    EngineFaults& faults = engine_faults();
    if (const char* v = std::getenv("MOEQUANT_TEST_FREE_BYTES"); v && *v) faults.free_bytes = std::strtoull(v, nullptr, 10);
    if (const char* v = std::getenv("MOEQUANT_TEST_PAUSE_AFTER_LAYER_MS"))
        faults.pause_after_layer = std::chrono::milliseconds(std::strtol(v, nullptr, 10));
    if (const char* v = std::getenv("MOEQUANT_TEST_KILL_RANK")) {
        char* rest = nullptr;
        const long rank = std::strtol(v, &rest, 10);
        if (rest && *rest == ':') faults.kill_rank = RankKill{static_cast<int>(rank), std::strtol(rest + 1, nullptr, 10)};
    }
}

}  // namespace

int main(int argc, char** argv) {
    inject_faults_from_environment();
    return moequant::cli::host_main(argc, argv);
}
