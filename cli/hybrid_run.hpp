// The run behind `moequant hybrid` (command_hybrid.cpp parses its options): the steps, each one
// of the commands run in this process with the arguments a user would give it; the GPU expert
// count from the budgets; the placement SGLang reads; the report page and the launch line.
// docs/hybrid.md.
#pragma once

#include "global_options.hpp"

#include <cstdint>
#include <string>

namespace moequant::cli {

// What the command line asked for (docs/cli.md, hybrid), defaults filled in.
struct HybridRequest {
    std::string input, output, gpu_memory, cpu_memory, family;
    std::string dataset, dataset_split = "train_sft", eval_dataset;
    std::int64_t samples = 512, max_length = 2048, seed = 42, eval_samples = 128, eval_max_length = 512;
    std::string kt_method = "AMXINT4";
    std::int64_t threadpools = 2, cpuinfer = 0;
    std::size_t threads = 0;
    bool dry_run = false, quiet = false, compare_outputs = false;
    bool method_given = false;  // --kt-method on the command line: --cpu-memory then only checks that it fits
};

// What each --kt-method needs: the convert quantizer of its CPU experts (none: RAWINT4 reads
// the GPU checkpoint) and the gptq recipe of the GPU checkpoint.
struct HybridMethod {
    const char* kt_method;
    const char* convert_method;  // nullptr for RAWINT4
    bool rawint4;
};

// The method of that --kt-method name; Error(usage) for any other (MOE_INT4 with the reason).
const HybridMethod& hybrid_method_named(const std::string& name);

// Runs it; the process's exit code (verify's when a check fails).
int run_hybrid(HybridRequest request, GlobalOptions globals, std::string command_line);

}  // namespace moequant::cli
