// The `amx` quantizer plugin: amx-int8 and amx-int4 (kt-kernel AMXINT8 / AMXINT4). Producing
// the AMX layout needs no AMX hardware: the kernels are AVX2 or scalar, chosen at run time.
// amx-int8-gptq and amx-int4-gptq write the same layouts with codes chosen on calibration
// inputs (convert --calibrate).
#include "amx_calibrated_quantizer.hpp"

#include <moequant/plugin.hpp>

MOEQUANT_PLUGIN("amx", "0.1.0", MOEQUANT_KIND_QUANTIZER, "kt-kernel AMXINT4/AMXINT8 CPU expert quantizers") {
    registrar.add(std::make_unique<moequant::amx::AmxQuantizer>(moequant::amx::Method::int8));
    registrar.add(std::make_unique<moequant::amx::AmxQuantizer>(moequant::amx::Method::int4));
    registrar.add(std::make_unique<moequant::amx::AmxCalibratedQuantizer>(moequant::amx::Method::int8,
                                                                          moequant::amx::CalibratedSettings{}));
    registrar.add(std::make_unique<moequant::amx::AmxCalibratedQuantizer>(moequant::amx::Method::int4,
                                                                          moequant::amx::CalibratedSettings{}));
}
