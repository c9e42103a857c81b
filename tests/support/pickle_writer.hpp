// Hand-assembled pickles for the PyTorch checkpoint tests: an opcode-level writer, and the
// state-dict pickle torch.save emits (protocol 2, each tensor through _rebuild_tensor_v2 with a
// ('storage', type, key, location, numel) persistent id), so that a test can build a valid one
// and change exactly one thing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moequant::test {

class PickleWriter {
public:
    std::vector<std::uint8_t> bytes;

    PickleWriter& op(std::uint8_t code) { bytes.push_back(code); return *this; }
    PickleWriter& raw(const std::string& s) { bytes.insert(bytes.end(), s.begin(), s.end()); return *this; }
    PickleWriter& le(std::uint64_t value, int width);

    PickleWriter& proto(int version = 2) { return op(0x80).le(static_cast<std::uint64_t>(version), 1); }
    PickleWriter& stop() { return op('.'); }
    PickleWriter& mark() { return op('('); }
    PickleWriter& global(const std::string& module, const std::string& name) { return op('c').raw(module + "\n" + name + "\n"); }
    PickleWriter& text(const std::string& s) { return op('X').le(s.size(), 4).raw(s); }
    PickleWriter& integer(std::int64_t v);  // BININT1, BININT or LONG1, as pickle chooses
    PickleWriter& boolean(bool v) { return op(v ? 0x88 : 0x89); }
    PickleWriter& none() { return op('N'); }
    PickleWriter& empty_tuple() { return op(')'); }
    PickleWriter& tuple() { return op('t'); }
    PickleWriter& empty_dict() { return op('}'); }
    PickleWriter& setitem() { return op('s'); }
    PickleWriter& setitems() { return op('u'); }
    PickleWriter& reduce() { return op('R'); }
    PickleWriter& build() { return op('b'); }
    PickleWriter& binpersid() { return op('Q'); }
    PickleWriter& put(std::uint32_t i) { return i < 256 ? op('q').le(i, 1) : op('r').le(i, 4); }
    PickleWriter& get(std::uint32_t i) { return i < 256 ? op('h').le(i, 1) : op('j').le(i, 4); }
    PickleWriter& ints(const std::vector<std::int64_t>& v);  // a tuple of ints
    PickleWriter& ordered_dict() { return global("collections", "OrderedDict").empty_tuple().reduce(); }
};

struct PickledTensorSpec {
    std::string name;
    std::string storage_type = "FloatStorage";  // global torch.<storage_type>
    std::string key = "0";
    std::int64_t storage_numel = 0;
    std::int64_t offset = 0;
    std::vector<std::int64_t> size;
    std::vector<std::int64_t> stride;  // empty: row-major
};

// Appends the value torch.save writes for one tensor (the _rebuild_tensor_v2 call).
void write_tensor(PickleWriter& p, const PickledTensorSpec& t);

// A whole torch.save pickle of an OrderedDict of these tensors (with `_metadata` when asked).
std::vector<std::uint8_t> state_dict_pickle(const std::vector<PickledTensorSpec>& tensors, bool with_metadata = false);

}  // namespace moequant::test
