#include "cluster/mpi_cluster.hpp"

#include <moequant/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdlib>

namespace moequant::detail {

namespace {

// MPI counts are ints: large buffers go in pieces of at most 1 GiB.
constexpr std::uint64_t piece_bytes = std::uint64_t{1} << 30;

void check(int status, const char* what) {
    if (status != MPI_SUCCESS) throw Error(ErrorKind::internal, std::string("MPI ") + what + " failed");
}

void broadcast_bytes(char* data, std::uint64_t size, int from) {
    for (std::uint64_t at = 0; at < size; at += piece_bytes) {
        const int n = static_cast<int>(std::min(piece_bytes, size - at));
        check(MPI_Bcast(data + at, n, MPI_BYTE, from, MPI_COMM_WORLD), "broadcast");
    }
}

class MpiCluster final : public Cluster {
public:
    MpiCluster() {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
    }
    int rank() const noexcept override { return rank_; }
    int size() const noexcept override { return size_; }

    void share(std::string_view mine, const std::function<void(int, std::string_view)>& take) override {
        std::uint64_t own = mine.size();
        std::vector<std::uint64_t> sizes(static_cast<std::size_t>(size_));
        check(MPI_Allgather(&own, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "allgather");
        std::string buffer;
        for (int r = 0; r < size_; ++r) {
            const std::uint64_t n = sizes[static_cast<std::size_t>(r)];
            if (r == rank_) {
                broadcast_bytes(const_cast<char*>(mine.data()), n, r);  // MPI_Bcast does not write the root's buffer
                sent_ += n * static_cast<std::uint64_t>(size_ - 1);
                take(r, mine);
                continue;
            }
            buffer.resize(n);
            broadcast_bytes(buffer.data(), n, r);
            received_ += n;
            take(r, buffer);
        }
    }

    void broadcast(std::string& bytes, int from) override {
        std::uint64_t n = bytes.size();
        check(MPI_Bcast(&n, 1, MPI_UINT64_T, from, MPI_COMM_WORLD), "broadcast");
        bytes.resize(n);
        broadcast_bytes(bytes.data(), n, from);
        if (rank_ == from) sent_ += n * static_cast<std::uint64_t>(size_ - 1);
        else received_ += n;
    }

    void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "barrier"); }

private:
    int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Cluster> start_mpi_cluster(int& argc, char**& argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw Error(ErrorKind::internal, "MPI could not start", {.hint = "run under mpirun, or without it for one process"});
    // An MPI error ends the call with a code (then Error, one line, MPI_Abort) rather than a
    // library-printed abort.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    return std::make_unique<MpiCluster>();
}

void stop_mpi() noexcept {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
}

void abort_mpi(int exit_code) noexcept {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
}

}  // namespace moequant::detail
