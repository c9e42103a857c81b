// MPI_COMM_WORLD as a Cluster (built with MOEQUANT_WITH_MPI only). Every call is made from the
// thread that initialised MPI (MPI_THREAD_FUNNELED): the engine's worker threads never talk.
#pragma once

#include <moequant/engine/cluster.hpp>

#include <memory>

namespace moequant::detail {

// Initialises MPI and returns the world, or throws Error(internal) when MPI fails to start.
std::unique_ptr<Cluster> start_mpi_cluster(int& argc, char**& argv);
void stop_mpi() noexcept;
[[noreturn]] void abort_mpi(int exit_code) noexcept;

}  // namespace moequant::detail
