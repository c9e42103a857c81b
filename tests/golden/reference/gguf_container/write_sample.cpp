// Writes a GGUF file with moequant's container code (formats/gguf/gguf_container) holding every
// value type moequant writes and tensors of several ggml types, each filled with a known byte;
// prints what it wrote in the form read_with_ggml prints what ggml's reader finds.
// usage: write_sample OUT.gguf ALIGNMENT
#include "gguf_container.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace moequant::formats;

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    const auto alignment = static_cast<std::uint32_t>(std::atoi(argv[2]));
    const std::vector<GgufKeyValue> metadata = {
        {"general.architecture", GgufValue::string("qwen3moe")},
        {"qwen3moe.block_count", GgufValue::u32(48)},
        {"qwen3moe.rope.freq_base", GgufValue::f32(1000000.0f)},
        {"qwen3moe.expert_weights_norm", GgufValue::boolean(true)},
        {"split.no", GgufValue::u16(0)},
        {"split.tensors.count", GgufValue::i32(4)},
        {"general.size", GgufValue::u64(1ULL << 40)},
        {"tokenizer.ggml.tokens", GgufValue::strings({"<|endoftext|>", "hello", "\xc3\xa9t\xc3\xa9", ""})},
        {"tokenizer.ggml.scores", GgufValue::f32s({0.0f, -1.5f, 2.25f, 3.0f})},
        {"tokenizer.ggml.token_type", GgufValue::i32s({3, 1, 1, 5})},
    };
    const std::vector<GgufTensorInfo> tensors = {
        {"output_norm.weight", {7}, 0, gguf_tensor_bytes("t", 0, {7}), 0},
        {"token_embd.weight", {64, 5}, 30, gguf_tensor_bytes("t", 30, {64, 5}), 0},
        {"blk.0.ffn_gate_exps.weight", {256, 3, 2}, 12, gguf_tensor_bytes("t", 12, {256, 3, 2}), 0},
        {"blk.0.ffn_down_exps.weight", {64, 2, 2}, 39, gguf_tensor_bytes("t", 39, {64, 2, 2}), 0},
    };
    const GgufLayout layout = lay_out_gguf(metadata, tensors, alignment);
    std::string file = layout.header;
    file.resize(static_cast<std::size_t>(layout.file_size), '\0');
    for (std::size_t i = 0; i < layout.tensors.size(); ++i)
        std::memset(file.data() + layout.tensors[i].offset, static_cast<int>(0x21 + i), static_cast<std::size_t>(layout.tensors[i].bytes));
    std::ofstream(argv[1], std::ios::binary).write(file.data(), static_cast<std::streamsize>(file.size()));

    // The same listing read_with_ggml prints.
    std::vector<GgufKeyValue> all = metadata;
    if (alignment != gguf_default_alignment) all.push_back({"general.alignment", GgufValue::u32(alignment)});
    std::printf("alignment %u\n", alignment);
    for (const auto& [key, v] : all) {
        std::printf("kv %s %s", key.c_str(), std::string(gguf_type_name(v.type == GgufType::array ? v.element : v.type)).c_str());
        if (v.type == GgufType::array) std::printf("[%llu]", static_cast<unsigned long long>(v.count));
        const auto text = v.as_string();
        const auto texts = v.as_strings();
        if (text) std::printf(" \"%s\"", text->c_str());
        else if (texts)
            for (const auto& s : *texts) std::printf(" \"%s\"", s.c_str());
        else if (v.as_float()) std::printf(" %.9g", *v.as_float());
        else if (v.as_bool()) std::printf(" %d", *v.as_bool() ? 1 : 0);
        else if (v.as_unsigned()) std::printf(" %llu", static_cast<unsigned long long>(*v.as_unsigned()));
        else if (v.as_signed()) std::printf(" %lld", static_cast<long long>(*v.as_signed()));
        else if (v.element == GgufType::f32)
            for (std::uint64_t i = 0; i < v.count; ++i) {
                float f;
                std::memcpy(&f, v.bytes.data() + 4 * i, 4);
                std::printf(" %.9g", f);
            }
        else if (v.element == GgufType::i32)
            for (std::uint64_t i = 0; i < v.count; ++i) {
                std::int32_t n;
                std::memcpy(&n, v.bytes.data() + 4 * i, 4);
                std::printf(" %d", n);
            }
        std::printf("\n");
    }
    for (std::size_t i = 0; i < layout.tensors.size(); ++i) {
        const auto& t = layout.tensors[i];
        std::printf("tensor %s type %u ne", t.name.c_str(), t.type);
        for (int d = 0; d < 4; ++d) std::printf(" %lld", static_cast<long long>(d < static_cast<int>(t.ne.size()) ? t.ne[static_cast<std::size_t>(d)] : 1));
        std::printf(" offset %llu bytes %llu fill %d\n", static_cast<unsigned long long>(t.offset - layout.header.size()),
                    static_cast<unsigned long long>(t.bytes), 0x21 + static_cast<int>(i));
    }
    return 0;
}
