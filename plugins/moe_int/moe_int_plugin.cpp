// The `moe_int` quantizer plugin: moe-int8 (kt-kernel MOE_INT8, its AOCL-BLAS kernels for CPUs
// without AMX, e.g. AMD EPYC) and its calibrated variant moe-int8-gptq (the same bytes, codes by
// GPTQ). Writing the layout needs no AOCL: it is computed here.
#include "moe_int8_gptq_quantizer.hpp"
#include "moe_int8_quantizer.hpp"

#include <moequant/plugin.hpp>

MOEQUANT_PLUGIN("moe_int", "0.2.0", MOEQUANT_KIND_QUANTIZER, "kt-kernel MOE_INT8 CPU expert quantizers (AOCL layout)") {
    registrar.add(std::make_unique<moequant::moe_int::MoeInt8Quantizer>());
    registrar.add(std::make_unique<moequant::moe_int::MoeInt8GptqQuantizer>());
}
