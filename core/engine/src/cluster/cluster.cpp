#include "cluster/single_cluster.hpp"
#ifdef MOEQUANT_WITH_MPI
#include "cluster/mpi_cluster.hpp"
#endif

#include <moequant/engine/cluster.hpp>
#include <moequant/error.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <numeric>

#include <unistd.h>

namespace moequant {

namespace {

std::unique_ptr<Cluster>& world_slot() {
    static std::unique_ptr<Cluster> world = std::make_unique<detail::SingleCluster>();
    return world;
}
bool mpi_started = false;
bool agreed_failure = false;

// The rank count mpirun (Open MPI, or any PMIx launcher) gave this process, or 0 when it was
// started some other way.
int launched_ranks() {
    for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
        if (const char* v = std::getenv(name)) return std::atoi(v);
    return std::getenv("PMIX_RANK") ? 1 : 0;
}

}  // namespace

Cluster::~Cluster() = default;

Cluster& Cluster::world() { return *world_slot(); }

Cluster& Cluster::alone() {
    static detail::SingleCluster one;
    return one;
}

void Cluster::start(int& argc, char**& argv) {
    const int ranks = launched_ranks();
    if (ranks <= 0) return;
#ifdef MOEQUANT_WITH_MPI
    world_slot() = detail::start_mpi_cluster(argc, argv);
    mpi_started = true;
#else
    (void)argc, (void)argv;
    if (ranks > 1)
        throw Error(ErrorKind::usage,
                    "this moequant was built without MPI, but mpirun started it as one of " + std::to_string(ranks) + " ranks",
                    {.code = "NoMpi", .hint = "rebuild with -DMOEQUANT_WITH_MPI=ON (Open MPI), or run one process without mpirun"});
#endif
}

void Cluster::stop() noexcept {
#ifdef MOEQUANT_WITH_MPI
    if (mpi_started) detail::stop_mpi();
#endif
}

void Cluster::abort(int exit_code) noexcept {
#ifdef MOEQUANT_WITH_MPI
    if (mpi_started && world().size() > 1) detail::abort_mpi(exit_code);
#endif
    std::exit(exit_code);
}

std::vector<std::string> Cluster::all_gather(std::string_view mine) {
    std::vector<std::string> all;
    share(mine, [&](int, std::string_view bytes) { all.emplace_back(bytes); });
    return all;
}

void Cluster::fail_together(const Error& e) const {
    agreed_failure = true;
    if (root()) throw e;
    throw RankExit{exit_code(e.kind())};
}

bool Cluster::failing_together() noexcept { return agreed_failure; }

std::string host_name() {
    char name[256] = {};
    return ::gethostname(name, sizeof name - 1) == 0 ? name : "?";
}

std::string rank_label(const Cluster& cluster) {
    if (cluster.size() == 1) return "";
    return "rank " + std::to_string(cluster.rank()) + " of " + std::to_string(cluster.size());
}

std::pair<std::size_t, std::size_t> rank_share(const std::vector<std::int64_t>& weight, int rank, int ranks) {
    // Item i goes to the rank its weight's midpoint falls in, of `ranks` equal slices of the
    // total: non-decreasing in i, so every rank's items are contiguous.
    const std::int64_t total = std::accumulate(weight.begin(), weight.end(), std::int64_t{0});
    std::vector<int> owner(weight.size());
    std::int64_t before = 0;
    for (std::size_t i = 0; i < weight.size(); ++i) {
        const std::int64_t mid2 = 2 * before + weight[i];  // twice the midpoint
        owner[i] = total > 0 ? static_cast<int>(std::min<std::int64_t>(ranks - 1, mid2 * ranks / (2 * total)))
                             : static_cast<int>(i * static_cast<std::size_t>(ranks) / weight.size());
        before += weight[i];
    }
    auto first_of = [&](int r) {
        return static_cast<std::size_t>(std::lower_bound(owner.begin(), owner.end(), r) - owner.begin());
    };
    return {first_of(rank), first_of(rank + 1)};
}

}  // namespace moequant
