#include "saturated_rows_warning.hpp"

#include <iostream>

namespace moequant::cli {

void warn_about_saturated_rows(const SaturatedRowLog& log) {
    if (log.size() == 0) return;
    std::cout.flush();  // keep the order of the two streams on one terminal
    std::cerr << "moequant: warning: " << log.warning() << "\n";
}

}  // namespace moequant::cli
