// heapdiff's rule for the change of a value between two dumps, for the
// viewer: the same rule as the Rust reports (dump-tool/src/stats/change.rs),
// checked against the same table of test vectors
// (dump-tool/src/stats/change_vectors.json) by the Rust unit test and by the
// browser test. Change it only together with both.
"use strict";
const heapdiffStats = (function () {
  // The two-sided 95 % quantile of the standard normal distribution.
  const Z95 = 1.959963984540054;
  // base and next are the two estimates, their variances beside them;
  // pairing is "independent" or "same-process", accumulation "in-use" or
  // "cumulative". A later dump of one process contains the earlier one's
  // cumulative samples: when those sums grew, the change's variance is the
  // difference of the variances; otherwise the variances add.
  function change(base, next, baseVariance, newVariance, pairing, accumulation) {
    const nested = pairing === "same-process" && accumulation === "cumulative" &&
      newVariance >= baseVariance && next >= base;
    const variance = nested ? newVariance - baseVariance : newVariance + baseVariance;
    const half = Z95 * Math.sqrt(Math.max(variance, 0));
    const value = next - base;
    const low = value - half, high = value + half;
    return { value, variance, low, high, significant: low > 0 || high < 0 };
  }
  return { Z95, change };
})();
