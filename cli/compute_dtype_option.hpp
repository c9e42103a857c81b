// --compute-dtype bf16|f32 of the commands that run the model's forward (gptq --dataset,
// convert --calibrate --dataset, record, eval): the precision of its matrix products
// (compute_dtype.hpp).
#pragma once

#include <moequant/compute_dtype.hpp>

#include <boost/program_options.hpp>

#include <string>

namespace moequant::cli {

// Calibration's default: bf16 where the CPU multiplies BF16 natively (AVX512-BF16, AMX), else f32.
ComputeDtype calibration_compute_dtype() noexcept;

// Adds --compute-dtype into `value`; `default_text` is said in the help.
void add_compute_dtype_option(boost::program_options::options_description& description, std::string& value,
                              const char* default_text);

// Sets the SDK's compute dtype to `value` ("" = `fallback`) and returns the note progress
// prints ("products in BF16 (oneDNN, avx512_core_bf16)"). Error(usage) for another value.
std::string apply_compute_dtype(const std::string& value, ComputeDtype fallback);

}  // namespace moequant::cli
