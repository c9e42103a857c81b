// The checks a run across ranks makes before any work (docs/cluster.md): every rank runs the same
// job on the same source, and every rank sees the output folder rank 0 locked. A failure is
// reported once, by rank 0, naming the ranks that differ; every rank then ends with its exit
// code (Cluster::fail_together).
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/engine/cluster.hpp>
#include <moequant/engine/run_manifest.hpp>
#include <moequant/error.hpp>

#include <filesystem>
#include <functional>

namespace moequant {

// Error(input, "RankSourceDiffers") when a rank's source checkpoint (config, shard names, sizes,
// headers and a sample of each shard's bytes) is not rank 0's; Error(usage, "RankJobDiffers")
// when its build, settings or plan are not (another command line, another CPU's kernels).
// `describe_job` is called only when there is more than one rank: a process alone reads no
// shard header for it.
void check_same_job_on_every_rank(Cluster& cluster, const std::function<RunManifest()>& describe_job,
                                               const Checkpoint& source);

// After rank 0 created and locked `output`: Error(io, "OutputNotShared") when a rank does not
// see the file rank 0 wrote there (another filesystem, or another path).
void check_output_shared(Cluster& cluster, const std::filesystem::path& output);

}  // namespace moequant
