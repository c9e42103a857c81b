#include "pickle_writer.hpp"

#include <algorithm>
#include <cstdint>

namespace moequant::test {

PickleWriter& PickleWriter::le(std::uint64_t value, int width) {
    for (int i = 0; i < width; ++i) bytes.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
    return *this;
}

PickleWriter& PickleWriter::integer(std::int64_t v) {
    if (v >= 0 && v < 256) return op('K').le(static_cast<std::uint64_t>(v), 1);
    if (v >= INT32_MIN && v <= INT32_MAX) return op('J').le(static_cast<std::uint64_t>(static_cast<std::uint32_t>(v)), 4);
    return op(0x8a).le(8, 1).le(static_cast<std::uint64_t>(v), 8);
}

PickleWriter& PickleWriter::ints(const std::vector<std::int64_t>& v) {
    mark();
    for (auto x : v) integer(x);
    return tuple();
}

void write_tensor(PickleWriter& p, const PickledTensorSpec& t) {
    std::vector<std::int64_t> stride = t.stride;
    if (stride.empty() && !t.size.empty()) {
        stride.assign(t.size.size(), 1);
        for (std::size_t d = t.size.size() - 1; d-- > 0;) stride[d] = stride[d + 1] * std::max<std::int64_t>(t.size[d + 1], 1);
    }
    p.global("torch._utils", "_rebuild_tensor_v2");
    p.mark();
    p.mark().text("storage").global("torch", t.storage_type).text(t.key).text("cpu").integer(t.storage_numel).tuple();
    p.binpersid();
    p.integer(t.offset).ints(t.size).ints(stride).boolean(false).ordered_dict();
    p.tuple().reduce();
}

std::vector<std::uint8_t> state_dict_pickle(const std::vector<PickledTensorSpec>& tensors, bool with_metadata) {
    PickleWriter p;
    p.proto(2).ordered_dict().mark();
    for (const auto& t : tensors) {
        p.text(t.name);
        write_tensor(p, t);
    }
    p.setitems();
    if (with_metadata) {
        p.empty_dict().text("_metadata").ordered_dict().text("").empty_dict().text("version").integer(1).setitem().setitem();
        p.setitem().build();
    }
    return p.stop().bytes;
}

}  // namespace moequant::test
