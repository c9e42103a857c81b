// The --imatrix of a GGUF conversion as the host asks for it (ExpertImportance): each expert
// matrix's column weights from its stacked tensor's entry (blk.L.ffn_P_exps.weight, one matrix
// per expert), as llama-quantize hands ggml_quantize_chunk() each expert's slice.
#pragma once

#include "gguf_plan.hpp"

#include <moequant/importance.hpp>

#include <map>
#include <memory>
#include <utility>

namespace moequant::formats {

class GgufExpertImportance final : public ExpertImportance {
public:
    // `imatrix` checked (check_contents()); `plan` the conversion's, its expert tensors' entries set.
    GgufExpertImportance(std::shared_ptr<const ImatrixFile> imatrix, const GgufPlan& plan);

    ColumnImportance columns(const MatrixRole& role, std::int64_t expert) const override;
    std::string identity() const override { return imatrix_->identity(); }

private:
    std::shared_ptr<const ImatrixFile> imatrix_;
    std::map<std::pair<std::int64_t, Projection>, ImatrixEntry> entries_;  // the expert tensors that have one
};

}  // namespace moequant::formats
