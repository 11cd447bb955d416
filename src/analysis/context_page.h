// The "hidden states per layer" section of `wte geometry`: the text report and the pictures of
// the contextual geometry (src/analysis/context_geometry.h) of one checkpoint.
#pragma once

#include <string>
#include <vector>

#include "src/analysis/context_geometry.h"
#include "src/analysis/geometry_page.h"

namespace wte {

/// What was measured, for the report and the captions.
struct ContextGeometryRun {
  std::string checkpoint;         // the model's checkpoint
  std::string data;               // the token file sampled
  const HiddenStateSample* sample = nullptr;
  std::vector<LayerGeometry> layers;
  size_t min_position = 1, min_count = 5;
};

/// The text table: per layer the mean row norm, anisotropy (raw, centred), self-similarity (raw,
/// centred) and self-similarity minus anisotropy, with a paragraph on how to read it.
std::string context_report(const ContextGeometryRun& run);

/// Writes the pictures into `out` and returns the page section: per layer a histogram of the
/// cosines of random pairs of rows and of same-token pairs, raw and mean-centred (so a reader sees
/// a late layer's random pairs crowd near cosine 1 raw, and spread around 0 once the common
/// direction is removed), and one line chart of the four means over the layers.
/// Throws wte::Error if a file cannot be written.
PageSection write_context_figures(const std::string& out, const ContextGeometryRun& run);

}  // namespace wte
