// The torch times of the same run that bench/compare_with_torch.sh hands the C++ benches
// (bench/torch_reference.py's JSON), for them to print ratios against.
#pragma once

#include <boost/json.hpp>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace moequant::bench {

inline boost::json::value read_torch_times(const std::string& file) {
    std::ifstream in(file);
    if (!in) throw std::runtime_error("cannot read the torch times " + file);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return boost::json::parse(text);
}

}  // namespace moequant::bench
