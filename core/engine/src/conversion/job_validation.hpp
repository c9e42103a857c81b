// The checks of a conversion job that touch no file, in one place (validate_job()), and what a
// job that passed them carries on to the run: its quantizer bound to the job's options and the
// format's context.
#pragma once

#include <moequant/engine/conversion.hpp>
#include <moequant/engine/output_plan.hpp>

#include <memory>

namespace moequant {

// A job that passed validate_job(): its quantizer bound to the job's options, and what the
// format is told about the job.
struct CheckedJob {
    std::shared_ptr<const Quantizer> configured;  // the job's quantizer bound to its options; null without one
    const Quantizer* quantizer = nullptr;         // configured.get()
    OutputContext context;
    // The importance of the expert matrices' columns the format was given (an imatrix), else null.
    std::shared_ptr<const ExpertImportance> importance;
};

// True when every expert matrix's quantizer weighs columns by importance (QuantizerImportance):
// given calibration data, such a quantizer is calibrated with the importance measured on it.
bool weighs_by_importance(const Quantizer& quantizer, const ModelPlan& plan);

// Every check of the job that touches no file, in one place and in this order: completeness,
// the input dtype, the quantizer's options, calibration, kept layers, the format's own checks,
// then the expert shapes. Throws the first problem found.
CheckedJob validate_job(const ConversionJob& job);

// plan_output() of a job validate_job() passed (output_plan.cpp).
std::optional<OutputPlan> plan_checked_output(const ConversionJob& job, const CheckedJob& checked);

}  // namespace moequant
