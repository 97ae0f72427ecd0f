#include "lib/accounting/figure_schema.h"

namespace kvledger {

const char* DimensionLabelName(Dimension d) {
  switch (d) {
    case Dimension::kCause: return "cause";
    case Dimension::kBoundary: return "boundary";
    case Dimension::kPart: return "part";
    case Dimension::kNone: break;
  }
  return "";
}

const char* DimensionLabelValue(Dimension d, int i) {
  const auto at = static_cast<size_t>(i);
  switch (d) {
    case Dimension::kCause: return CauseLabel(kAllCauses[at]);
    case Dimension::kBoundary: return BoundaryLabel(kAllBoundaries[at]);
    case Dimension::kPart: return TtftPartLabel(kAllTtftParts[at]);
    case Dimension::kNone: break;
  }
  return "";
}

}  // namespace kvledger
