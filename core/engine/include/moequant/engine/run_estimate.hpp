// What a run will take before it starts (--dry-run): its peak resident memory and its time,
// from the plan's sizes and short probes of this machine on the job's own model and data (one
// layer's forward on a few hundred tokens, one expert quantized, one call of the head). The
// memory is given term by term, so that a user sees what dominates and what a flag changes.
#pragma once

#include <moequant/engine/conversion.hpp>
#include <moequant/engine/evaluation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace moequant {

struct MemoryTerm {
    std::string what;
    std::uint64_t bytes = 0;
};

struct RunEstimate {
    std::vector<MemoryTerm> memory;  // the peak is their sum
    double seconds = 0;              // computing only: the reads and writes below come on top
    std::string timed;               // what the time was scaled from
    std::uint64_t bytes_read = 0;    // the source experts the run reads
    bool exact = true;               // false: the probes' peaks could not be measured, only their growth
    std::uint64_t peak_bytes() const noexcept;
};

// The job is validated as run_conversion() validates it. Runs the probes (seconds at most on
// a large model); writes nothing but a scratch file under $TMPDIR, removed again.
RunEstimate estimate_conversion(const ConversionJob& job);
RunEstimate estimate_evaluation(const EvaluationJob& job);

}  // namespace moequant
