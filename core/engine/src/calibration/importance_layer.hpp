// llama.cpp's importance matrix of one MoE layer, measured on the calibration inputs as
// llama-imatrix measures it, and the layer's experts quantized with it through their
// quantizers' importance facet (QuantizerImportance): per expert, the mean square of each input
// column over the tokens routed to it — the layer's inputs for gate and up, act(gate x) * up x
// for down (expert_input_squares.hpp; column_squares.hpp: the arithmetic of llama-quantize on
// the file `record --imatrix` writes). An expert no token reaches weighs every column 1, as
// llama.cpp's stand-in.
#pragma once

#include "calibrated_layer.hpp"

namespace moequant {

// Quantizes the layer (job.quantizer's matrices through their importance facet) and returns
// the tokens each expert was measured on (0 for experts that got none).
LayerCoverage quantize_importance_layer(const CalibratedLayerJob& job, const MoeLayerPlan& layer, LayerSink& sink);

}  // namespace moequant
