#include "gguf_packing.hpp"

#include <moequant/error.hpp>

#include <charconv>
#include <limits>

namespace moequant::formats {
namespace {

// "50G" -> 50e9: decimal units, as gguf-split's and the converter's --split-max-size.
std::uint64_t parse_size(const std::string& text) {
    auto bad = [&]() {
        return Error(ErrorKind::usage, "--split-max-size '" + text + "' is no size",
                     {.code = "BadSplitSize", .hint = "a positive number of bytes, or with K, M or G (decimal units, as gguf-split): e.g. 50G"});
    };
    std::uint64_t n = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, n);
    if (ec != std::errc{} || n == 0) throw bad();
    std::uint64_t unit = 1;
    if (ptr != end) {
        if (ptr + 1 != end) throw bad();
        switch (*ptr) {
        case 'K': unit = 1000; break;
        case 'M': unit = 1000 * 1000; break;
        case 'G': unit = 1000 * 1000 * 1000; break;
        default: throw bad();
        }
    }
    if (n > std::numeric_limits<std::uint64_t>::max() / unit) throw bad();
    return n * unit;
}

}  // namespace

GgufPacking read_gguf_packing(const Options& options) {
    GgufPacking packing;
    if (const auto size = options.get("split_max_size")) packing.max_bytes = parse_size(*size);
    if (const auto tensors = options.get("split_max_tensors")) {
        std::int64_t n = 0;
        const char* end = tensors->data() + tensors->size();
        const auto [ptr, ec] = std::from_chars(tensors->data(), end, n);
        if (ec != std::errc{} || ptr != end || n <= 0)
            throw Error(ErrorKind::usage, "--split-max-tensors '" + *tensors + "' is no positive count", {.code = "BadSplitSize"});
        packing.max_tensors = n;
    }
    packing.single_file = options.get_bool("single_file", false);
    if ((packing.max_bytes > 0) + (packing.max_tensors > 0) + packing.single_file > 1)
        throw Error(ErrorKind::usage, "--split-max-size, --split-max-tensors and --single-file each choose the files; give one",
                    {.code = "BadSplitSize"});
    return packing;
}

std::vector<std::size_t> gguf_part_starts(const std::vector<std::uint64_t>& padded_bytes, const GgufPacking& packing) {
    std::vector<std::size_t> starts{0};
    if (packing.single_file) return starts;
    std::uint64_t in_part = 0;
    for (std::size_t i = 0; i < padded_bytes.size(); ++i) {
        const bool by_size = packing.max_bytes > 0 && in_part > 0 && padded_bytes[i] > packing.max_bytes - std::min(in_part, packing.max_bytes);
        const bool by_count = packing.max_tensors > 0 && i > 0 && i % static_cast<std::size_t>(packing.max_tensors) == 0;
        if (by_size || by_count) {
            starts.push_back(i);
            in_part = 0;
        }
        in_part += padded_bytes[i];
    }
    return starts;
}

GgufTensorOrder gguf_tensor_order(const std::string& name) {
    constexpr std::string_view blk = "blk.";
    if (name.rfind("token_embd.", 0) == 0) return {-1, 0, name};
    if (name.rfind(blk, 0) == 0) {
        std::int64_t block = 0;
        const char* end = name.data() + name.size();
        const auto [ptr, ec] = std::from_chars(name.data() + blk.size(), end, block);
        if (ec == std::errc{} && ptr != end && *ptr == '.') {
            const std::string_view rest(ptr + 1, end);
            int kind = 0;
            if (rest == "ffn_gate_exps.weight") kind = 1;
            else if (rest == "ffn_up_exps.weight") kind = 2;
            else if (rest == "ffn_down_exps.weight") kind = 3;
            return {block, kind, name};
        }
    }
    return {std::numeric_limits<std::int64_t>::max(), 0, name};
}

}  // namespace moequant::formats
