// A quantizer that carries the source's stored codes (Quantizer::carrier(), e.g. kt's awq
// method) bound to the form of a job's expert weights: convert, verify, eval and the estimate
// all bind it the same way, before they use its layout.
#pragma once

#include <moequant/checkpoint.hpp>
#include <moequant/model_adapter.hpp>
#include <moequant/quantizer.hpp>

#include <memory>

namespace moequant {

// `quantizer` bound to the stored form of the plan's expert matrices (StoredCodeCarrier::
// bind_source() on each), or `quantizer` itself when it carries nothing or the source's form is
// not one it carries. Error(input) naming the tensor when an expert's form cannot be carried
// or differs from the first expert's (another group size, say).
std::shared_ptr<const Quantizer> source_bound_quantizer(std::shared_ptr<const Quantizer> quantizer, const Checkpoint& source,
                                                        const ModelPlan& plan);

}  // namespace moequant
