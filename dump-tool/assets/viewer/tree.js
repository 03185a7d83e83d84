// Call trees built from stacks, with the four metrics of the new side and,
// in a comparison, of the base side, and the variance of each.
//
// Nodes are integers in depth-first order (0 is the root), so a subtree is
// the id range [id, end[id]). Flat typed arrays hold 4 values per node (one
// per metric) for new (n), base (b), their variances (vn, vb), what their
// samples add up to (sn, sb) and the largest weight scale of their stacks
// (wn, wb), and where the model has them the live samples only the new side
// has (a, va, sa, wa) and only the base has (r, vr, sr, wr): far faster to
// build than an object per node. Sums over disjoint stacks: values add, and
// so do their variances and floors; the weight scale is the largest.
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
  // How many frames each stack shares with the one before it.
  function prefixes(sorted) {
    const same = new Int32Array(sorted.length);
    let previous = [];
    for (let j = 0; j < sorted.length; j++) { same[j] = shared(sorted[j][1], previous); previous = sorted[j][1]; }
    return same;
  }
  // stacks: [stack index, frame ids root first]; data: per-stack values
  // {nv, nvar, ns, nw, bv, bvar, bs, bw, av, avar, as, aw, rv, rvar, rs,
  // rw} (4 per stack; the base's null without a base, the parts' null
  // without them);
  // `presorted`: the stacks are in frame order already (the model's), each
  // sharing presorted[j] frames with the one before.
  function build(stacks, data, presorted) {
    const sorted = presorted ? stacks : stacks.slice().sort(compareStacks);
    const same = presorted || prefixes(sorted);
    let count = 1;
    for (let j = 0; j < sorted.length; j++) count += sorted[j][1].length - same[j];
    const diff = !!data.bv, parts = diff && !!data.av;
    const values = () => new Float64Array(4 * count);
    const t = { count: 0, parent: new Int32Array(count), frame: new Int32Array(count), end: new Int32Array(count),
      n: values(), vn: values(), sn: values(), wn: values(),
      b: diff ? values() : null, vb: diff ? values() : null, sb: diff ? values() : null, wb: diff ? values() : null };
    for (const c of ["a", "va", "sa", "wa", "r", "vr", "sr", "wr"]) t[c] = parts ? values() : null;
    const add = (parent, frame) => { const id = t.count++; t.parent[id] = parent; t.frame[id] = frame; return id; };
    add(-1, -1);
    const path = [0];
    // Each stack's values go to the node where it ends; a pass from the
    // last node to the first then adds every node into its parent (a
    // parent comes before its children), so a value is added once per
    // node instead of once per frame of every stack.
    for (let j = 0; j < sorted.length; j++) {
      const [i, f] = sorted[j];
      while (path.length > same[j] + 1) t.end[path.pop()] = t.count;
      for (let d = same[j]; d < f.length; d++) path.push(add(path[d], f[d]));
      addValues(t, path[f.length], data, 4 * i);
    }
    while (path.length) t.end[path.pop()] = t.count;
    for (let id = t.count - 1; id > 0; id--) addNode(t, t.parent[id], id);
    return t;
  }
  // [node column, data column]: summed, and the largest kept.
  const SUMS = [["n", "nv"], ["vn", "nvar"], ["sn", "ns"], ["b", "bv"], ["vb", "bvar"], ["sb", "bs"],
    ["a", "av"], ["va", "avar"], ["sa", "as"], ["r", "rv"], ["vr", "rvar"], ["sr", "rs"]];
  const LARGEST = [["wn", "nw"], ["wb", "bw"], ["wa", "aw"], ["wr", "rw"]];
  function addNode(t, to, from) {
    const a = 4 * to, o = 4 * from;
    for (const [c] of SUMS) if (t[c]) for (let k = 0; k < 4; k++) t[c][a + k] += t[c][o + k];
    for (const [c] of LARGEST) if (t[c]) for (let k = 0; k < 4; k++) t[c][a + k] = Math.max(t[c][a + k], t[c][o + k]);
  }
  function addValues(t, id, data, o) {
    const at = 4 * id;
    for (const [c, d] of SUMS) if (t[c]) for (let k = 0; k < 4; k++) t[c][at + k] += data[d][o + k];
    for (const [c, d] of LARGEST) if (t[c]) for (let k = 0; k < 4; k++) t[c][at + k] = Math.max(t[c][at + k], data[d][o + k]);
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
