#include "cluster_run.hpp"
#include "human_format.hpp"
#include "saturated_rows_warning.hpp"

#include <moequant/engine/cluster.hpp>
#include <moequant/engine/source_reads.hpp>
#include <moequant/error.hpp>

#include <cstdio>
#include <iostream>
#include <streambuf>
#include <string_view>

namespace moequant::cli {

namespace {

class NullBuffer final : public std::streambuf {
protected:
    int overflow(int c) override { return c; }
    std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

NullBuffer null_buffer;
std::streambuf* saved_out = nullptr;
std::streambuf* saved_err = nullptr;

}  // namespace

bool runs_across_ranks(const std::string& command) {
    return command == "convert" || command == "gptq" || command == "gpu" || command == "record" || command == "eval";
}

void quiet_other_ranks() {
    if (Cluster::world().root() || saved_err) return;
    saved_out = std::cout.rdbuf(&null_buffer);
    saved_err = std::cerr.rdbuf(&null_buffer);
}

void restore_rank_output() {
    if (!saved_err) return;
    std::cout.rdbuf(saved_out);
    std::cerr.rdbuf(saved_err);
    saved_out = saved_err = nullptr;
}

void agree_on_the_command(const std::string& command, const std::vector<std::string>& args) {
    Cluster& cluster = Cluster::world();
    if (cluster.size() == 1) return;
    bool dry_run = false;
    for (const auto& a : args)  // as the option parser takes it: --dry-run or an unambiguous start of it
        dry_run = dry_run || (a.size() >= 5 && std::string_view("--dry-run").starts_with(a));
    const std::vector<std::string> all = cluster.all_gather(command + (dry_run ? " --dry-run" : ""));
    for (std::size_t r = 1; r < all.size(); ++r)
        if (all[r] != all[0])
            cluster.fail_together(Error(ErrorKind::usage,
                                        "rank " + std::to_string(r) + " runs '" + all[r] + "' where rank 0 runs '" + all[0] + "'",
                                        {.code = "RankJobDiffers", .hint = "give every rank the same command"}));
    if (!runs_across_ranks(command))
        cluster.fail_together(Error(ErrorKind::usage,
                                    "'" + command + "' runs in one process; under mpirun only convert, gptq, record and eval share the work",
                                    {.code = "NotAcrossRanks", .hint = "run it without mpirun"}));
    if (dry_run)
        cluster.fail_together(Error(ErrorKind::usage, "--dry-run plans a run of one process; run it without mpirun",
                                    {.code = "NotAcrossRanks"}));
}

void warn_about_saturated_rows_of_every_rank(const SaturatedRowLog& log) {
    Cluster& cluster = Cluster::world();
    if (cluster.size() == 1) return warn_about_saturated_rows(log);
    const std::vector<std::string> all = cluster.all_gather(log.size() ? log.warning() : "");
    if (!cluster.root()) return;
    std::cout.flush();
    for (std::size_t r = 0; r < all.size(); ++r)
        if (!all[r].empty()) std::cerr << "moequant: warning: (rank " << r << "'s layers) " << all[r] << "\n";
}

std::string cluster_traffic(const ConversionResult& result) {
    const Cluster& cluster = Cluster::world();
    if (cluster.size() == 1) return "";
    const std::size_t layers = result.layers_written;
    const std::uint64_t moved = cluster.bytes_sent() + cluster.bytes_received();
    // What proving the ranks' reads cost rank 0 (source_reads.hpp): the digests it took.
    const DigestCost digests = digest_cost();
    char cost[64];
    std::snprintf(cost, sizeof cost, " of source in %.3f s, %.1f%% of the run", digests.seconds,
                  result.seconds > 0 ? 100.0 * digests.seconds / result.seconds : 0.0);
    return ", across " + std::to_string(cluster.size()) + " ranks (rank 0 sent " + human_bytes(cluster.bytes_sent()) +
           " and received " + human_bytes(cluster.bytes_received()) +
           (layers ? ", " + human_bytes(moved / layers) + " a layer" : std::string()) + "; digested " +
           human_bytes(digests.bytes) + cost + ")";
}

}  // namespace moequant::cli
