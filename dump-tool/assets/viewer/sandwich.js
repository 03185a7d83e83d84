// The callers and callees of one function (a "sandwich"): from every stack
// that contains it, the frames above its outermost occurrence (its callers,
// nearest first) and the frames below it (its callees), each stack counted
// once. Each list builds a call tree whose root is the function itself.
"use strict";
const hdSandwich = (function () {
  // stacks: [stack index, frame ids root first]; isTarget(frame id).
  function split(stacks, isTarget) {
    const callers = [], callees = [];
    for (const [i, f] of stacks) {
      const at = f.findIndex(isTarget);
      if (at < 0) continue;
      callers.push([i, f.slice(0, at).reverse()]);
      callees.push([i, f.slice(at + 1)]);
    }
    return { callers, callees };
  }
  return { split };
})();
