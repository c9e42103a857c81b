// Reading the pickle of a PyTorch checkpoint (`<archive>/data.pkl`) without running anything
// (private to the SDK).
//
// A pickle is a program for Python's unpickler, and loading one can call any function it
// names (`posix.system`, `builtins.eval`). This interpreter builds only plain values (None,
// bools, 64-bit ints, floats, strings, bytes, tuples, lists, sets, dicts, OrderedDict) and the
// few reconstructions torch.save emits for tensors; it refuses every other global by name, and
// calls nothing: a "call" of an accepted function is evaluated here, on the values, by what that
// function is documented to return (docs/pytorch-bin.md, "The pickle"). Every malformed or
// unexpected program (unknown opcode, object construction, extension codes, stack underflow, a
// memo entry never stored, truncation) is refused with Error(input) naming the file, the byte
// and the problem, and the work and memory are bounded by the pickle's size and the limits below.
#pragma once

#include <moequant/dtype.hpp>
#include <moequant/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace moequant::detail {

// Limits. A torch.save pickle needs about 20 values and 160 bytes per tensor: a state dict of
// 100k tensors (a whole DeepSeek-V3) is ~16 MB with ~2M values. Opcodes that make nothing new
// (DUP, BINGET, BINPUT) could still grow the stack, the memo or a container without bound, so
// each of those is limited too; the worst case stays near 1 GB.
inline constexpr std::uint64_t pickle_max_bytes = 256ull << 20;
inline constexpr std::size_t pickle_max_values = std::size_t{1} << 23;  // values made, memo entries, stack depth, container items: each
inline constexpr std::size_t pickle_max_marks = std::size_t{1} << 16;   // open MARKs at once

// What the pickle says about one entry of the state dict.
struct PickledTensor {
    std::string name;
    DType dtype = DType::U8;      // the tensor's element type
    std::string storage_key;      // the storage's bytes are the archive entry data/<key>
    DType storage_dtype = DType::U8;  // the storage's element type (U8 for an untyped storage)
    std::uint64_t storage_numel = 0;  // elements of storage_dtype the storage holds
    std::int64_t storage_offset = 0;  // where the tensor starts, in elements of dtype
    Shape size;
    std::vector<std::int64_t> stride;  // in elements, one per dimension of size
};

// Interprets a torch.save pickle that must hold a flat state dict (a dict or OrderedDict of
// name -> tensor) and returns its entries in pickle order. A dict whose values are not all
// tensors, or a value that is a dict of tensors (a training checkpoint's {"state_dict": ...}),
// is refused (NotAStateDict) with a hint. `file` names the archive in errors, `entry` the pickle.
std::vector<PickledTensor> read_state_dict_pickle(std::span<const std::byte> pickle, const std::string& file,
                                                  const std::string& entry);

}  // namespace moequant::detail
