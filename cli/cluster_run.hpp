// What the commands that run across MPI ranks (convert, gptq; docs/cluster.md) share in the CLI:
// only rank 0 talks (progress, warnings, the summary; every rank still reports its own error),
// and rank 0's summary says how many bytes the ranks exchanged.
#pragma once

#include <moequant/engine/conversion.hpp>
#include <moequant/engine/saturated_rows.hpp>

#include <iosfwd>
#include <string>
#include <vector>

namespace moequant::cli {

// Whether `command` runs across ranks; the others are refused under more than one.
bool runs_across_ranks(const std::string& command);

// Under mpirun with more than one rank: every rank but 0 writes nothing to stdout and stderr
// (restore_rank_output() gives an error its line back).
void quiet_other_ranks();
void restore_rank_output();

// Under more than one rank, before anything else: every rank runs `command` (an exchange, so a
// rank given another command line is found rather than left waiting), the command is one that
// shares its work, and no rank asked for --dry-run (which plans one process). Otherwise
// Error(usage) reported once by rank 0 (Cluster::fail_together).
void agree_on_the_command(const std::string& command, const std::vector<std::string>& args);

// Rank 0 prints the saturated-row warning of every rank's layers (saturated_rows_warning.hpp).
void warn_about_saturated_rows_of_every_rank(const SaturatedRowLog& log);

// ", across N ranks (rank 0 sent X and received Y, Z a layer)" for the summary line, or "".
std::string cluster_traffic(const ConversionResult& result);

}  // namespace moequant::cli
