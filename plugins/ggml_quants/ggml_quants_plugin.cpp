// The `ggml_quants` quantizer plugin: one quantizer per GGUF tensor type moequant writes
// (gguf-f16, gguf-bf16, gguf-q8_0, gguf-q4_0 ... gguf-q6_k, gguf-iq4_xs, gguf-mxfp4), byte for
// byte as ggml's reference quantizers (docs/gguf-quants.md), and `gguf`, the per-tensor mixture
// the gguf format chooses (llama-quantize's presets), with `gguf-gptq`, the same mixture with
// codes chosen by GPTQ on calibration inputs (docs/gguf-gptq.md).
#include "gguf_mix_quantizer.hpp"

#include <moequant/plugin.hpp>

MOEQUANT_PLUGIN("ggml_quants", "0.1.0", MOEQUANT_KIND_QUANTIZER, "GGUF tensor types, as ggml's reference quantizers write them") {
    for (const auto& type : moequant::ggml_quants::ggml_types())
        registrar.add(std::make_unique<moequant::ggml_quants::GgmlQuantizer>(type));
    registrar.add(std::make_unique<moequant::ggml_quants::GgufMixQuantizer>());
    registrar.add(std::make_unique<moequant::ggml_quants::GgufMixQuantizer>(/*gptq=*/true));
}
