#include "gguf_expert_importance.hpp"

namespace moequant::formats {

GgufExpertImportance::GgufExpertImportance(std::shared_ptr<const ImatrixFile> imatrix, const GgufPlan& plan)
    : imatrix_(std::move(imatrix)) {
    for (const auto& split : plan.splits)
        for (const auto& t : split.tensors)
            if (t.layer >= 0 && t.importance) entries_.emplace(std::pair{t.layer, t.projection}, *t.importance);
}

ColumnImportance GgufExpertImportance::columns(const MatrixRole& role, std::int64_t expert) const {
    const auto it = entries_.find({role.layer, role.projection});
    if (it == entries_.end()) return {};  // quantized without, as llama-quantize does
    return imatrix_->matrix(it->second, expert);
}

}  // namespace moequant::formats
