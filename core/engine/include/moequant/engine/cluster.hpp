// The ranks one run is spread over (`mpirun -np N moequant <command> ...`, docs/cluster.md).
// Every rank runs the same command on the same inputs; the engine deals out the work (layers,
// sample blocks, experts) and exchanges what the others need through this interface, always in
// rank order, so that the output's bytes do not depend on the number of ranks.
//
// A process not started by mpirun, or a build without MOEQUANT_WITH_MPI, is a cluster of one:
// rank 0 of 1, every exchange a copy. MPI is initialised only under mpirun, so a plain run
// behaves exactly as before.
#pragma once


#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace moequant {

class Error;

class Cluster {
public:
    virtual ~Cluster();

    // The process's cluster: MPI's world under mpirun (once start() ran), else one rank.
    static Cluster& world();
    // A cluster of one, whatever the process (what a job without a cluster runs in).
    static Cluster& alone();
    // Starts MPI when the process was launched by mpirun (Open MPI's or PMIx's environment) and
    // the build has it; Error(usage) when launched so by a build without it. Call once, first.
    static void start(int& argc, char**& argv);
    // Ends MPI cleanly (every rank must call it) ...
    static void stop() noexcept;
    // ... or ends every rank of the job at once with `exit_code` (after an error on one rank: the
    // others may be waiting for it in an exchange). In a cluster of one: std::exit.
    [[noreturn]] static void abort(int exit_code) noexcept;

    virtual int rank() const noexcept = 0;
    virtual int size() const noexcept = 0;
    bool root() const noexcept { return rank() == 0; }

    // Every rank's `mine` in rank order, passed to `take` one rank at a time (each buffer is
    // gone once `take` returns, so memory stays about two ranks' worth). Collective: every rank
    // calls it, with buffers of any size.
    virtual void share(std::string_view mine, const std::function<void(int rank, std::string_view bytes)>& take) = 0;
    // Rank `from`'s `bytes` on every rank.
    virtual void broadcast(std::string& bytes, int from) = 0;
    virtual void barrier() = 0;

    // Every rank's `mine`, in rank order.
    std::vector<std::string> all_gather(std::string_view mine);

    // A failure every rank found at the same point (a check on facts they all share): rank 0
    // throws `e`, the others RankExit with its exit code, and nobody aborts the job.
    [[noreturn]] void fail_together(const Error& e) const;
    // Whether this process is failing that way (main() then ends MPI cleanly).
    static bool failing_together() noexcept;

    // Bytes this rank has sent and received so far (what the cluster bench reports).
    std::uint64_t bytes_sent() const noexcept { return sent_; }
    std::uint64_t bytes_received() const noexcept { return received_; }

protected:
    std::uint64_t sent_ = 0, received_ = 0;
};

// Thrown on every rank but rank 0 when all of them found the same failure at the same point (a
// check every rank makes on shared facts): rank 0 reports it, the others end quietly with its
// exit code. main() catches it.
struct RankExit {
    int code = 0;
};

// The rank's place in messages: "rank 2 of 3", or "" in a cluster of one.
std::string rank_label(const Cluster& cluster);
// This machine's name, for messages naming a rank's host ("?" when it has none).
std::string host_name();

// [first, last) of `count` items in contiguous runs, one per rank, balanced by `weight` (the
// items' costs, e.g. tokens): the same split on every rank.
std::pair<std::size_t, std::size_t> rank_share(const std::vector<std::int64_t>& weight, int rank, int ranks);

}  // namespace moequant
