// --compute-dtype bf16|f32 of the commands that calibrate or run the model's forward (gptq,
// convert --calibrate, record, eval): the precision of the forward's matrix products and of the
// Hessians of BF16 inputs (compute_dtype.hpp, hessian.hpp).
#pragma once

#include <moequant/compute_dtype.hpp>

#include <boost/program_options.hpp>

#include <string>

namespace moequant::cli {

// Calibration's default: bf16 where the CPU multiplies BF16 natively (AVX512-BF16, AMX), else f32.
ComputeDtype calibration_compute_dtype();

// The dtype `value` names ("" = `fallback`); Error(usage) for another value, or bf16 on a CPU
// where oneDNN has no BF16 products. Commands call it right after parsing, before any work.
ComputeDtype chosen_compute_dtype(const std::string& value, ComputeDtype fallback);

// Adds --compute-dtype into `value`; `default_text` is said in the help.
void add_compute_dtype_option(boost::program_options::options_description& description, std::string& value,
                              const char* default_text);

// Sets the SDK's compute dtype to `value` ("" = `fallback`) and returns the note progress
// prints ("matrix products in BF16 with FP32 accumulation (oneDNN, avx512_core_bf16)").
// Error(usage) for another value.
std::string apply_compute_dtype(const std::string& value, ComputeDtype fallback);

}  // namespace moequant::cli
