// An output format whose writer is built from a checked job: create() and planned_files() run
// the format's check() first (the engine has already run it; a direct call gets the same
// refusal), then build `Writer`, which touches no file before begin_layer(). Header-only.
#pragma once

#include <moequant/output_format.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace moequant::formats {

// `Writer` is an OutputWriter constructed from an OutputContext, with a `planned()` that lists
// every file the job writes.
template <class Writer>
class WriterFormat : public OutputFormat {
public:
    std::unique_ptr<OutputWriter> create(const OutputContext& context) const override {
        check(context);
        return std::make_unique<Writer>(context);
    }
    std::optional<std::vector<PlannedFile>> planned_files(const OutputContext& context) const override {
        check(context);
        return Writer(context).planned();
    }
};

}  // namespace moequant::formats
