// kt-kernel's two output formats (kt-safetensors, kt-tree) as one format class, told apart by
// their names, writer and reader: each needs a quantizer and stores the experts as bias-free
// SwiGLU matrices, so gpt-oss's expert biases are refused before anything is written.
// Header-only.
#pragma once

#include "expert_tensors.hpp"
#include "writer_format.hpp"

#include <moequant/error.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace moequant::formats {

template <class Writer>
class KtOutputFormat final : public WriterFormat<Writer> {
public:
    using Opener = std::unique_ptr<OutputReader> (*)(const std::filesystem::path& directory);
    KtOutputFormat(std::string_view id, std::string_view description, Opener open)
        : id_(id), description_(description), open_(open) {}

    std::string_view id() const override { return id_; }
    std::string_view description() const override { return description_; }
    void check(const OutputContext& context) const override {
        OutputFormat::check(context);
        if (!context.quantizer) throw Error(ErrorKind::usage, id_ + " needs a quantizer");
        refuse_extra_expert_tensors(context, id_);  // gpt-oss's expert biases have no place in kt's format
    }
    std::unique_ptr<OutputReader> open(const std::filesystem::path& directory) const override { return open_(directory); }

private:
    std::string id_, description_;
    Opener open_;
};

}  // namespace moequant::formats
