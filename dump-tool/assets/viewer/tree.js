// Call trees built from stacks, with the four metrics of the new side and,
// in a comparison, of the base side, and the variance of each.
//
// Nodes are integers in depth-first order (0 is the root), so a subtree is
// the id range [id, end[id]). Flat typed arrays hold 4 values per node (one
// per metric) for new (n), base (b) and their variances (vn, vb): far faster
// to build than an object per node. Sums over disjoint stacks: values add,
// and so do their variances.
"use strict";
const hdTree = (function () {
  // Stacks sorted frame by frame share their prefix with the previous one,
  // so each frame is a step along the previous path or a new node.
  function compareStacks(a, b) {
    const x = a[1], y = b[1], n = Math.min(x.length, y.length);
    for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i] - y[i];
    return x.length - y.length;
  }
  function shared(f, previous) {
    let same = 0;
    while (same < f.length && same < previous.length && f[same] === previous[same]) same++;
    return same;
  }
  // stacks: [stack index, frame ids root first]; data: per-stack values
  // {nv, nvar, bv, bvar} (4 per stack; bv and bvar null without a base);
  // `presorted`: the stacks are in frame order already (the model's).
  function build(stacks, data, presorted) {
    const sorted = presorted ? stacks : stacks.slice().sort(compareStacks);
    let count = 1, previous = [];
    for (const [, f] of sorted) { count += f.length - shared(f, previous); previous = f; }
    const diff = !!data.bv;
    const values = () => new Float64Array(4 * count);
    const t = { count: 0, parent: new Int32Array(count), frame: new Int32Array(count), end: new Int32Array(count),
      n: values(), vn: values(), b: diff ? values() : null, vb: diff ? values() : null };
    const add = (parent, frame) => { const id = t.count++; t.parent[id] = parent; t.frame[id] = frame; return id; };
    add(-1, -1);
    const path = [0];
    previous = [];
    for (const [i, f] of sorted) {
      const o = 4 * i;
      addValues(t, 0, data, o);
      const same = shared(f, previous);
      while (path.length > same + 1) t.end[path.pop()] = t.count;
      for (let d = 0; d < f.length; d++) {
        const id = d < same ? path[d + 1] : add(path[d], f[d]);
        if (d >= same) path.push(id);
        addValues(t, id, data, o);
      }
      previous = f;
    }
    while (path.length) t.end[path.pop()] = t.count;
    return t;
  }
  function addValues(t, id, data, o) {
    const at = 4 * id;
    for (let k = 0; k < 4; k++) {
      t.n[at + k] += data.nv[o + k];
      t.vn[at + k] += data.nvar[o + k];
      if (t.b) { t.b[at + k] += data.bv[o + k]; t.vb[at + k] += data.bvar[o + k]; }
    }
  }
  function kids(t, id) {
    const list = [];
    for (let c = id + 1; c < t.end[id]; c = t.end[c]) list.push(c);
    return list;
  }
  function childWithFrame(t, parent, frame) {
    for (let c = parent + 1; c < t.end[parent]; c = t.end[c]) if (t.frame[c] === frame) return c;
    return undefined;
  }
  const val = (arr, id, k) => (arr ? arr[4 * id + k] : 0);
  // What the frame itself holds (its value minus its children's).
  function selfValue(t, arr, id, k) {
    let v = val(arr, id, k);
    for (let c = id + 1; c < t.end[id]; c = t.end[c]) v -= val(arr, c, k);
    return v;
  }
  function pathOf(t, id) { const p = []; for (; id > 0; id = t.parent[id]) p.unshift(t.frame[id]); return p; }
  function findPath(t, p) {
    let id = 0;
    for (const f of p) { id = childWithFrame(t, id, f); if (id === undefined) return null; }
    return id;
  }
  function depth(t, id) { let d = 0; for (; id > 0; id = t.parent[id]) d++; return d; }
  return { build, kids, childWithFrame, val, selfValue, pathOf, findPath, depth };
})();
