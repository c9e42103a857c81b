#include "conversion/job_record.hpp"

#include <moequant/compute_dtype.hpp>
#include <moequant/engine/plugin_registry.hpp>

namespace moequant {

RunManifest describe_job(const ConversionJob& job, const ExpertImportance* importance) {
    RunManifest m = describe_source(*job.source, *job.plan);
    m.command = job.command;
    m.settings = {{"format", std::string(job.format->id())},
                  {"quantizer", job.quantizer ? std::string(job.quantizer->id()) : ""},
                  {"parts", std::to_string(job.parts)},
                  {"family", job.plan->family}};
    for (const auto& [k, v] : job.quantizer_options.items()) m.settings.emplace_back("quantizer." + k, v);
    // The codes' range is part of the job even where no option sets it (the calibrated AMX
    // quantizers keep to kt-kernel's): an output written before such a rule is another job.
    if (job.quantizer && !job.quantizer_options.has("code_range"))
        if (auto range = configured_quantizer(*job.quantizer, job.quantizer_options)->settings().get("code_range"))
            m.settings.emplace_back("quantizer.code_range", *range);
    for (const auto& [k, v] : job.format_options.items()) m.settings.emplace_back("format." + k, v);
    if (importance) m.settings.emplace_back("importance", importance->identity());  // by content, not path
    if (job.sequential) {  // built-in calibration: which token ids
        m.settings.emplace_back("calibration", "sequential:" + job.sequential->digest());
        m.settings.emplace_back("calibration.samples", std::to_string(job.sequential->samples()));
        m.settings.emplace_back("calibration.tokens", std::to_string(job.sequential->tokens()));
        m.settings.emplace_back("calibration.experts_see", job.sequential->routed_only() ? "routed tokens" : "all tokens");
        // The blocks the samples run in (--max-memory may shrink them) round some products.
        m.settings.emplace_back("calibration.block_tokens", std::to_string(job.sequential->batch_token_limit()));
        // The products change the layer inputs and Hessians: a rerun in another dtype is another job.
        m.settings.emplace_back("calibration.products", std::string(compute_dtype_name(compute_dtype())));
    } else if (job.calibration) {  // which activations, by content (no paths in the manifest)
        const SafetensorsFile& f = job.calibration->file();
        m.settings.emplace_back("calibration", std::to_string(f.file_size()) + ":" + f.header_digest());
        m.settings.emplace_back("calibration.samples", std::to_string(job.calibration->samples()));
        m.settings.emplace_back("calibration.tokens", std::to_string(job.calibration->tokens()));
        m.settings.emplace_back("calibration.experts_see", job.calibration->routed_only() ? "routed tokens" : "all tokens");
        m.settings.emplace_back("calibration.products", std::string(compute_dtype_name(compute_dtype())));  // the Hessians'
    }
    if (!job.unquantized_layers.empty()) {
        std::string layers;
        for (std::int64_t l : job.unquantized_layers) layers += (layers.empty() ? "" : ",") + std::to_string(l);
        m.settings.emplace_back("unquantized_layers", layers);
    }
    return m;
}

}  // namespace moequant
