// Flags of kt-kernel's convert_gpu_weights.py that `gptq` accepts so that its users' command
// lines run unchanged, though here they either mean nothing (moequant runs no model code and
// everything on the CPU) or map onto moequant's own flag. docs/seed-tools.md lists every flag
// of the seed tools and how moequant takes it.
#pragma once

#include "calibration_inputs.hpp"

#include <boost/program_options.hpp>

#include <string>
#include <vector>

namespace moequant::cli {

struct SeedGpuOptions {
    bool trust_remote_code = false;  // transformers' permission to run a model's own Python
    bool force_cpu = false;          // the seed tool's CPU-only mode
    std::string max_gpu_memory;      // accelerate's per-GPU weight budget, e.g. "40GiB"
    std::string max_cpu_memory;      // accelerate's CPU budget: here --max-memory
    std::string torch_dtype = "bfloat16";  // the dtype of the tensors copied unquantized
};

// --trust_remote_code, --force_cpu, --max_gpu_memory SIZE, --max_cpu_memory SIZE,
// --torch_dtype bfloat16|float16|float32.
void add_seed_gpu_options(boost::program_options::options_description& description, SeedGpuOptions& options);

// Puts --max_cpu_memory into `calibration` as its --max-memory and returns one note per seed flag
// given that has no effect here, to print once. Error(usage) for a size that is not one
// (memory_size_bytes), --max_cpu_memory together with --max-memory, or a --torch_dtype that is
// none of the three.
std::vector<std::string> apply_seed_gpu_options(const SeedGpuOptions& options, CalibrationInputOptions& calibration);

// A memory size as accelerate writes it: a number of bytes, or a number with a unit, KB MB GB
// TB (powers of 1000) or KiB MiB GiB TiB (powers of 1024), case-insensitive, e.g. "40GiB".
// Error(usage) naming `flag` otherwise.
std::uint64_t memory_size_bytes(const std::string& text, const std::string& flag);

}  // namespace moequant::cli
