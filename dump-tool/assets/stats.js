// heapdiff's rules for an estimate's interval and for the change of a value
// between two dumps, for the viewer: the same rules as the Rust reports
// (dump-tool/src/stats/estimate.rs and change.rs, the gamma point of
// quantile.rs), checked against the same table of test vectors
// (dump-tool/src/stats/change_vectors.json) by the Rust unit tests and by
// the browser test. Change it only together with both.
//
// An estimate is {value, variance, floor, scale, sampling: {unit,
// unseen_bytes, low_confidence_below}}, as the page's model and the vectors
// give it (scale: the largest weight scale of a sum's stacks, optional).
"use strict";
const heapdiffStats = (function () {
  // The two-sided 95 % quantile of the standard normal distribution.
  const Z95 = 1.959963984540054;
  // Gamma shapes from which Wilson-Hilferty is used as it is.
  const LARGE_SHAPE = 1000;

  // ln Γ(x) (Lanczos, g = 7), with the reflection formula below 1/2.
  const LANCZOS = [0.99999999999980993, 676.5203681218851, -1259.1392167224028,
    771.32342877765313, -176.61502916214059, 12.507343278686905,
    -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
  function lnGamma(x) {
    if (x < 0.5) return Math.log(Math.PI / Math.abs(Math.sin(Math.PI * x))) - lnGamma(1 - x);
    x -= 1;
    let sum = LANCZOS[0];
    for (let i = 1; i < 9; i++) sum += LANCZOS[i] / (x + i);
    const t = x + 7.5;
    return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(sum);
  }
  // The regularized lower incomplete gamma function P(a, x): its series
  // below a + 1, one minus the continued fraction of Q above.
  function gammaP(a, x) {
    if (x <= 0) return 0;
    const prefix = Math.exp(a * Math.log(x) - x - lnGamma(a));
    if (x < a + 1) {
      let term = 1 / a, sum = term;
      for (let n = 1; n < 100000; n++) {
        term *= x / (a + n);
        sum += term;
        if (Math.abs(term) < Math.abs(sum) * 1e-17) break;
      }
      return sum * prefix;
    }
    const tiny = 1e-300;
    let b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (let i = 1; i < 100000; i++) {
      const an = -i * (i - a);
      b += 2;
      d = an * d + b; if (Math.abs(d) < tiny) d = tiny;
      c = b + an / c; if (Math.abs(c) < tiny) c = tiny;
      d = 1 / d;
      const step = d * c;
      h *= step;
      if (Math.abs(step - 1) < 1e-17) break;
    }
    return 1 - prefix * h;
  }
  function wilsonHilferty(shape) {
    const c = 1 / (9 * shape);
    return shape * Math.pow(1 - c + Z95 * Math.sqrt(c), 3);
  }
  // The 97.5 % point of the gamma law of `shape` and scale 1: Newton's
  // method from Wilson-Hilferty, kept in a bracket.
  function upperPoint(shape) {
    const start = wilsonHilferty(shape);
    if (shape >= LARGE_SHAPE) return start;
    const lnG = lnGamma(shape);
    let low = 0, high = Infinity, x = start > 0 ? start : shape;
    for (let i = 0; i < 100; i++) {
      const error = gammaP(shape, x) - 0.975;
      if (error < 0) low = x; else high = x;
      let next = x - error / Math.exp((shape - 1) * Math.log(x) - x - lnG);
      if (!(next > low && next < high)) next = isFinite(high) ? (low + high) / 2 : 2 * x;
      if (Math.abs(next - x) <= 1e-14 * x) return next;
      x = next;
    }
    return x;
  }
  // Fay and Feuer's upper limit with one more unseen unit of weight `unseen`.
  function gammaHigh(value, variance, unseen) {
    const mean = Math.max(value, 0) + Math.max(unseen, 0);
    const spread = Math.max(variance, 0) + unseen * unseen;
    if (!(mean > 0 && spread > 0 && isFinite(mean) && isFinite(spread))) return value;
    const scale = spread / mean;
    return upperPoint(mean / scale) * scale;
  }
  // The samples' own weight scale, V / (value - floor); for a sum of several
  // stacks, the largest of theirs (e.scale) if larger.
  function weightScale(e) {
    const unsampled = e.value - e.floor;
    const own = unsampled > 0 ? Math.max(e.variance, 0) / unsampled : 0;
    return Math.max(own, e.scale || 0);
  }
  // The unseen unit: the weight scale; for bytes at least the sampling's;
  // null for objects without samples.
  function unseenWeight(e) {
    if (e.sampling.unseen_bytes === 0) return 0;
    const scale = weightScale(e);
    if (e.sampling.unit === "bytes") return Math.max(scale, e.sampling.unseen_bytes);
    return e.value > 0 ? scale : null;
  }
  function intervalWith(e, unseen) {
    const half = Z95 * Math.sqrt(Math.max(e.variance, 0));
    return {
      low: Math.max(e.value - half, e.floor),
      high: Math.max(e.value + half, gammaHigh(e.value, e.variance, unseen)),
    };
  }
  function lowConfidence(e) { return e.value < e.sampling.low_confidence_below; }
  function interval(e) {
    const w = unseenWeight(e);
    const i = intervalWith(e, w === null ? 0 : w);
    return { low: i.low, high: i.high, lowConfidence: lowConfidence(e) };
  }
  function zero(sampling) { return { value: 0, variance: 0, floor: 0, sampling }; }
  // The change from base to next: added minus removed, two independent parts
  // (a later dump of one process contains the earlier one's cumulative
  // samples: then the added part is the samples in between and nothing was
  // removed; two dumps of one process that list their live samples give
  // `parts`, {added, removed}: the live samples only one of them has),
  // their intervals combined by MOVER.
  function change(base, next, pairing, accumulation, parts) {
    const nested = !parts && pairing === "same-process" && accumulation === "cumulative" &&
      next.variance >= base.variance && next.value >= base.value;
    const added = parts ? parts.added : nested ? {
      value: next.value - base.value,
      variance: Math.max(next.variance - base.variance, 0),
      floor: Math.max(next.floor - base.floor, 0),
      scale: Math.max(next.scale || 0, base.scale || 0),
      sampling: {
        unit: next.sampling.unit,
        unseen_bytes: Math.max(next.sampling.unseen_bytes, base.sampling.unseen_bytes),
        low_confidence_below: Math.max(next.sampling.low_confidence_below, base.sampling.low_confidence_below),
      },
    } : next;
    const removed = parts ? parts.removed : nested
      ? zero({ unit: base.sampling.unit, unseen_bytes: 0, low_confidence_below: 0 })
      : base;
    const weight = (part) => {
      for (const e of [part, next, base, added, removed]) {
        const w = unseenWeight(e);
        if (w !== null) return w;
      }
      return 0;
    };
    const a = intervalWith(added, weight(added)), r = intervalWith(removed, weight(removed));
    const value = next.value - base.value;
    const low = value - Math.hypot(added.value - a.low, r.high - removed.value);
    const high = value + Math.hypot(a.high - added.value, removed.value - r.low);
    const variance = Math.max(added.variance, 0) + Math.max(removed.variance, 0);
    const significant = low === high ? Math.abs(value) >= 0.5 : low > 0 || high < 0;
    return { value, variance, low, high, significant, lowConfidence: lowConfidence(base) || lowConfidence(next) };
  }
  return { Z95, interval, change };
})();
