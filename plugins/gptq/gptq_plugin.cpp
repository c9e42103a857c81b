// The `gptq` quantizer plugin: `gptq` (GPTQ) and `rtn` (round to nearest), W4A16 / W8A16, for
// GPU-resident experts in compressed-tensors checkpoints.
#include "integer_quantizer.hpp"

#include <moequant/plugin.hpp>

MOEQUANT_PLUGIN("gptq", "0.1.0", MOEQUANT_KIND_QUANTIZER, "GPTQ and RTN W4A16/W8A16 quantizers (llm-compressor numerics)") {
    registrar.add(std::make_unique<moequant::gptq::IntegerQuantizer>(true, moequant::gptq::Scheme{}));
    registrar.add(std::make_unique<moequant::gptq::IntegerQuantizer>(false, moequant::gptq::Scheme{.actorder = moequant::gptq::ActOrder::none, .uses_calibration = false}));
}
