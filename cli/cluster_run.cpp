#include "cluster_run.hpp"
#include "human_format.hpp"

#include <moequant/engine/cluster.hpp>
#include <moequant/error.hpp>

#include <iostream>
#include <streambuf>

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

void refuse_dry_run_across_ranks() {
    const Cluster& cluster = Cluster::world();
    if (cluster.size() == 1) return;
    cluster.fail_together(Error(ErrorKind::usage, "--dry-run plans a run of one process; run it without mpirun", {.code = "BadOption"}));
}

std::string cluster_traffic(const ConversionResult& result) {
    const Cluster& cluster = Cluster::world();
    if (cluster.size() == 1) return "";
    const std::size_t layers = result.layers_written;
    const std::uint64_t moved = cluster.bytes_sent() + cluster.bytes_received();
    return ", across " + std::to_string(cluster.size()) + " ranks (rank 0 sent " + human_bytes(cluster.bytes_sent()) +
           " and received " + human_bytes(cluster.bytes_received()) +
           (layers ? ", " + human_bytes(moved / layers) + " a layer" : std::string()) + ")";
}

}  // namespace moequant::cli
