// How `verify` says whether kt-kernel's RAWINT4 CPU method can serve a compressed-tensors
// output (check_kt_rawint4): one line in every report, everything with --for kt-rawint4.
#pragma once

#include <moequant/engine/kt_rawint4_check.hpp>

#include <boost/json.hpp>

#include <ostream>

namespace moequant::cli {

// The verdict in one line (the normal report), or the group size, every backend and every
// problem shown (--for kt-rawint4).
void print_kt_rawint4(const KtRawint4Report& report, bool in_full, std::ostream& out);

boost::json::object kt_rawint4_json(const KtRawint4Report& report);

}  // namespace moequant::cli
