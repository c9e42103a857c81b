#include <moequant/engine/output_comparison.hpp>
#include <moequant/engine/verification.hpp>
#include <moequant/error.hpp>
#include <moequant/parallel.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace moequant {

namespace {

// Byte-exact comparison of one tensor present in both parts.
void compare_tensor(const StoredPart& a, const StoredPart& b, const std::string& name, const Tensor& ta,
                    const Tensor& tb, std::vector<PartDifference>& out) {
    PartDifference d{a.key, name, a.location, b.location, ta.size_bytes(), 0, 0, {}};
    if (ta.dtype() != tb.dtype() || ta.size_bytes() != tb.size_bytes()) {
        d.problem = "size or dtype differs: " + std::string(dtype_name(ta.dtype())) + " " + shape_to_string(ta.shape()) +
                    " vs " + std::string(dtype_name(tb.dtype())) + " " + shape_to_string(tb.shape());
        out.push_back(std::move(d));
        return;
    }
    if (std::memcmp(ta.data(), tb.data(), ta.size_bytes()) == 0) return;
    const auto* pa = reinterpret_cast<const std::uint8_t*>(ta.data());
    const auto* pb = reinterpret_cast<const std::uint8_t*>(tb.data());
    bool first = true;
    for (std::size_t i = 0; i < ta.size_bytes(); ++i)
        if (pa[i] != pb[i]) {
            if (first) d.first_difference = i;
            first = false;
            ++d.differing_bytes;
        }
    d.problem = "bytes differ";
    out.push_back(std::move(d));
}

}  // namespace

ComparisonReport compare_outputs(const OutputReader& a, const OutputReader& b) {
    ComparisonReport report;
    const std::string method_a = a.recorded().get_string("method", ""), method_b = b.recorded().get_string("method", "");
    if (!method_a.empty() && !method_b.empty() && method_a != method_b)
        throw Error(ErrorKind::input, "the outputs were made with different methods (" + method_a + " and " + method_b + ")",
                    {.code = "NotComparable", .hint = "only outputs of the same method and threadpool count compare"});
    const int parts_a = stored_part_count(a), parts_b = stored_part_count(b);
    if (parts_a != parts_b)
        throw Error(ErrorKind::input,
                    "the outputs have different threadpool part counts (" + std::to_string(parts_a) + " and " +
                        std::to_string(parts_b) + "), so no part can be equal",
                    {.code = "NotComparable", .hint = "convert both with the same --threadpool-count"});
    report.method = method_a.empty() ? method_b : method_a;
    report.parts = parts_a;

    const std::vector<StoredPartKey> keys_a = a.parts(), keys_b = b.parts();
    std::vector<StoredPartKey> common;
    std::set_intersection(keys_a.begin(), keys_a.end(), keys_b.begin(), keys_b.end(), std::back_inserter(common));
    auto only_in = [&](const std::vector<StoredPartKey>& from, const std::vector<StoredPartKey>& other, const char* side) {
        std::vector<StoredPartKey> only;
        std::set_difference(from.begin(), from.end(), other.begin(), other.end(), std::back_inserter(only));
        for (const auto& key : only) report.differences.push_back({key, {}, {}, {}, 0, 0, 0, std::string("missing in ") + side});
    };
    only_in(keys_a, keys_b, "B");
    only_in(keys_b, keys_a, "A");


    std::vector<std::vector<PartDifference>> found(common.size());
    std::vector<std::uint64_t> bytes(common.size(), 0);
    parallel_for(0, common.size(), 4, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) {
            const StoredPart pa = a.read(common[i]), pb = b.read(common[i]);
            for (const auto& [name, ta] : pa.tensor.parts) {
                bytes[i] += ta.size_bytes();
                const Tensor* tb = pb.tensor.part(name);
                if (!tb) found[i].push_back({pa.key, name, pa.location, pb.location, ta.size_bytes(), 0, 0, "missing in B"});
                else compare_tensor(pa, pb, name, ta, *tb, found[i]);
            }
            for (const auto& [name, tb] : pb.tensor.parts)
                if (!pa.tensor.part(name))
                    found[i].push_back({pb.key, name, pa.location, pb.location, tb.size_bytes(), 0, 0, "missing in A"});
        }
    });
    for (std::size_t i = 0; i < common.size(); ++i) {
        report.bytes_compared += bytes[i];
        for (auto& d : found[i]) report.differences.push_back(std::move(d));
    }
    report.parts_compared = common.size();
    std::sort(report.differences.begin(), report.differences.end(),
              [](const PartDifference& x, const PartDifference& y) { return std::tie(x.key, x.tensor) < std::tie(y.key, y.tensor); });
    return report;
}

}  // namespace moequant
