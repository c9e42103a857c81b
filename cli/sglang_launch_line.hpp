// The SGLang command that serves a hybrid model as kt-kernel's integration documents it
// (kvcache-ai/ktransformers doc/en, kt-kernel/README.md at 95009ea6): --model the GPU
// checkpoint, --kt-weight-path the CPU experts, --kt-method, the CPU threads and thread pools
// the CPU weights were written for, --kt-num-gpu-experts per MoE layer, and the `frequency`
// placement read from --init-expert-location so that SGLang keeps exactly the experts eval
// measured on the GPU. docs/hybrid.md.
#pragma once

#include <cstdint>
#include <string>

namespace moequant::cli {

struct SglangLaunch {
    std::string gpu_checkpoint;    // --model
    std::string cpu_weights;       // --kt-weight-path
    std::string kt_method;         // AMXINT4, AMXINT8, RAWINT4, MOE_INT8
    std::int64_t cpuinfer = 0;     // --kt-cpuinfer
    std::int64_t threadpools = 0;  // --kt-threadpool-count
    std::int64_t gpu_experts_per_layer = 0;
    std::string expert_location;   // the activation_stats.pt
};

// The command, one flag per line (shell continuations), paths quoted where the shell needs it.
std::string sglang_launch_line(const SglangLaunch& launch);

}  // namespace moequant::cli
