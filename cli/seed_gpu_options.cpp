#include "seed_gpu_options.hpp"

#include <moequant/error.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace moequant::cli {

namespace po = boost::program_options;

void add_seed_gpu_options(po::options_description& description, SeedGpuOptions& o) {
    description.add_options()
        ("trust_remote_code", po::bool_switch(&o.trust_remote_code),
         "no effect: moequant never runs a model's own code")
        ("force_cpu", po::bool_switch(&o.force_cpu), "no effect: moequant runs everything on the CPU")
        ("max_gpu_memory", po::value(&o.max_gpu_memory)->value_name("SIZE"),
         "no effect: moequant uses no GPU (a size, e.g. 40GiB)")
        ("max_cpu_memory", po::value(&o.max_cpu_memory)->value_name("SIZE"),
         "--max-memory as a size with a unit, e.g. 100GiB or 64GB")
        ("torch_dtype", po::value(&o.torch_dtype)->value_name("bfloat16|float16|float32")->default_value("bfloat16"),
         "dtype of every tensor copied unquantized (as transformers loads it: router biases stay float32)");
}

std::uint64_t memory_size_bytes(const std::string& text, const std::string& flag) {
    auto bad = [&] {
        return Error(ErrorKind::usage, flag + " '" + text + "' is not a memory size",
                     {.code = "BadOption", .hint = "a number of bytes, or one with KB/MB/GB/TB or KiB/MiB/GiB/TiB, e.g. 40GiB"});
    };
    std::size_t digits = 0;
    while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) ++digits;
    if (digits == 0 || std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(digits), '.') > 1) throw bad();
    const double number = std::strtod(text.substr(0, digits).c_str(), nullptr);
    std::string unit = text.substr(digits);
    std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    double factor = 0;
    if (unit.empty() || unit == "b") factor = 1;
    else if (unit == "kb") factor = 1e3;
    else if (unit == "mb") factor = 1e6;
    else if (unit == "gb") factor = 1e9;
    else if (unit == "tb") factor = 1e12;
    else if (unit == "kib") factor = 0x1p10;
    else if (unit == "mib") factor = 0x1p20;
    else if (unit == "gib") factor = 0x1p30;
    else if (unit == "tib") factor = 0x1p40;
    else throw bad();
    const double bytes = number * factor;
    if (!std::isfinite(bytes) || bytes < 1 || bytes >= 0x1p63) throw bad();
    return static_cast<std::uint64_t>(bytes);
}

std::vector<std::string> apply_seed_gpu_options(const SeedGpuOptions& o, CalibrationInputOptions& calibration) {
    std::vector<std::string> notes;
    if (o.torch_dtype != "bfloat16" && o.torch_dtype != "float16" && o.torch_dtype != "float32")
        throw_usage_error("--torch_dtype must be bfloat16, float16 or float32, got '" + o.torch_dtype + "'");
    if (o.trust_remote_code) notes.push_back("--trust_remote_code: moequant reads weights and JSON only and never runs a model's code");
    if (o.force_cpu) notes.push_back("--force_cpu: moequant runs everything on the CPU anyway");
    if (!o.max_gpu_memory.empty()) {
        memory_size_bytes(o.max_gpu_memory, "--max_gpu_memory");  // a typo is still an error
        notes.push_back("--max_gpu_memory " + o.max_gpu_memory + " has no effect: moequant uses no GPU");
    }
    if (!o.max_cpu_memory.empty()) {
        if (calibration.max_memory_gb > 0)
            throw_usage_error("--max_cpu_memory and --max-memory are one limit: give one of them");
        calibration.max_memory_gb = static_cast<double>(memory_size_bytes(o.max_cpu_memory, "--max_cpu_memory")) / 1e9;
    }
    return notes;
}

}  // namespace moequant::cli
