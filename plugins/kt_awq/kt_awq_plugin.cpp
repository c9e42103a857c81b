// The `kt_awq` quantizer plugin: kt-awq, kt-kernel's awq method (AutoAWQ words re-laid
// column-major; docs/kt-awq.md).
#include "kt_awq_quantizer.hpp"

#include <moequant/plugin.hpp>

MOEQUANT_PLUGIN("kt_awq", "0.1.0", MOEQUANT_KIND_QUANTIZER, "kt-kernel awq method: AutoAWQ codes re-laid column-major") {
    registrar.add(std::make_unique<moequant::kt_awq::KtAwqQuantizer>());
}
