// What the commands that run across MPI ranks (convert, gptq; docs/cluster.md) share in the CLI:
// only rank 0 talks (progress, warnings, the summary; every rank still reports its own error),
// and rank 0's summary says how many bytes the ranks exchanged.
#pragma once

#include <moequant/engine/conversion.hpp>

#include <iosfwd>
#include <string>

namespace moequant::cli {

// Whether `command` runs across ranks; the others are refused under more than one.
bool runs_across_ranks(const std::string& command);

// Under mpirun with more than one rank: every rank but 0 writes nothing to stdout and stderr
// (restore_rank_output() gives an error its line back).
void quiet_other_ranks();
void restore_rank_output();

// Error(usage) on every rank: --dry-run plans one process.
void refuse_dry_run_across_ranks();

// ", across N ranks (rank 0 sent X and received Y, Z a layer)" for the summary line, or "".
std::string cluster_traffic(const ConversionResult& result);

}  // namespace moequant::cli
