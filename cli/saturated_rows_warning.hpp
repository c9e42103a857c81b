// The stderr warning convert, gptq and verify print about rows whose codes are saturated
// (SaturatedRowLog): printed even with --quiet, since it is about the output, not progress.
#pragma once

#include <moequant/engine/saturated_rows.hpp>

namespace moequant::cli {

// "moequant: warning: ..." on stderr when `log` holds rows; nothing otherwise.
void warn_about_saturated_rows(const SaturatedRowLog& log);

}  // namespace moequant::cli
