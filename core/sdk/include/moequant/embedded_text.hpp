// The public-domain (CC0) English text compiled into the SDK (core/sdk/src/model/embedded_text.txt):
// adapters train their synthetic tokenizers on it, and the host calibrates on it when no
// dataset is given, so neither needs a data file at run time.
#pragma once

#include <moequant/export.hpp>

#include <string_view>

namespace moequant {

MOEQUANT_API std::string_view embedded_calibration_text() noexcept;

}  // namespace moequant
