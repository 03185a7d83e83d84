// heapdiff's flamegraph viewer: draws the model embedded in the page on a
// canvas. Transforms, search, zoom, the functions table and the diff colours
// all run here; the view's state lives in the URL's fragment so a view can
// be shared. Nothing is fetched.
"use strict";
(function () {
  const started = performance.now();
  const M = JSON.parse(document.getElementById("model").textContent);
  const parsedMs = performance.now() - started;
  const ROW = 16;
  const DIFF = M.base_name !== null && M.base_name !== undefined;
  const UNITS = ["bytes", "objects", "bytes", "objects"];
  const COMPANION = [1, 0, 3, 2];
  const $ = (id) => document.getElementById(id);

  // ---- state, kept in location.hash ----------------------------------
  const state = {
    metric: 0, search: "", icicle: false, threads: false, minwidth: 0.5,
    normalise: false, transforms: [], zoom: [],
  };
  function readHash() {
    const p = new URLSearchParams(location.hash.slice(1));
    if (p.has("m")) state.metric = Math.min(3, Math.max(0, parseInt(p.get("m"), 10) || 0));
    state.search = p.get("q") || "";
    state.icicle = p.get("icicle") === "1";
    state.threads = p.get("threads") === "1";
    state.normalise = p.get("norm") === "1";
    if (p.has("mw")) state.minwidth = Math.max(0, parseFloat(p.get("mw")) || 0);
    try {
      const t = JSON.parse(p.get("t") || "[]");
      state.transforms = Array.isArray(t) ? t.filter((x) => Array.isArray(x) && typeof x[0] === "string") : [];
    } catch (e) { state.transforms = []; }
  }
  function writeHash() {
    const p = new URLSearchParams();
    if (state.metric) p.set("m", state.metric);
    if (state.search) p.set("q", state.search);
    if (state.icicle) p.set("icicle", "1");
    if (state.threads) p.set("threads", "1");
    if (state.normalise) p.set("norm", "1");
    if (state.minwidth !== 0.5) p.set("mw", state.minwidth);
    if (state.transforms.length) p.set("t", JSON.stringify(state.transforms));
    history.replaceState(null, "", "#" + p.toString());
  }

  // ---- patterns ---------------------------------------------------------
  // "/re/flags" is a regular expression, anything else a plain substring.
  function matcher(text) {
    if (!text) return null;
    const m = /^\/(.*)\/([a-z]*)$/.exec(text);
    if (m) {
      try { const re = new RegExp(m[1], m[2].replace("g", "")); return (s) => re.test(s); }
      catch (e) { return () => false; }
    }
    return (s) => s.includes(text);
  }
  function regex(text, flags) {
    const m = /^\/(.*)\/([a-z]*)$/.exec(text);
    try { return m ? new RegExp(m[1], m[2] + flags) : new RegExp(text, flags); }
    catch (e) { return null; }
  }

  // ---- frames (the model's, plus renamed and thread frames) ---------------
  const frames = M.frames.map((f) => ({ name: f[0], module: f[1], place: f[2], full: f[3] }));
  const frameIds = new Map(frames.map((f, i) => [f.name + "\u0000" + f.module, i]));
  function internFrame(name, module, place) {
    const key = name + "\u0000" + module;
    let id = frameIds.get(key);
    if (id === undefined) {
      id = frames.length;
      frames.push({ name, module, place });
      frameIds.set(key, id);
    }
    return id;
  }
  const threadFrames = M.threads.map((t) => internFrame("[thread " + t + "]", -2, ""));

  // Apply the transforms to every stack: the list of [stack index, frames].
  function transformedStacks() {
    let stacks = M.stack_frames.map((f, i) => [i, f]);
    for (const t of state.transforms) {
      const [kind, pattern, replacement] = t;
      if (kind === "collapse") {
        stacks = stacks.map(([i, f]) => [i, collapseRecursion(f)]);
        continue;
      }
      const test = matcher(pattern);
      if (!test) continue;
      const memo = new Map();
      const matches = (id) => {
        let r = memo.get(id);
        if (r === undefined) { r = test(frames[id].name); memo.set(id, r); }
        return r;
      };
      if (kind === "keep") {
        stacks = stacks.filter(([, f]) => f.some(matches));
      } else if (kind === "remove") {
        stacks = stacks.map(([i, f]) => [i, f.filter((id) => !matches(id))]);
      } else if (kind === "rename") {
        const re = regex(pattern, "g");
        if (!re) continue;
        const renamed = new Map();
        const rename = (id) => {
          let r = renamed.get(id);
          if (r === undefined) {
            const f = frames[id];
            const name = f.name.replace(re, replacement || "");
            r = name === f.name ? id : internFrame(name, f.module, f.place);
            renamed.set(id, r);
          }
          return r;
        };
        stacks = stacks.map(([i, f]) => [i, f.map(rename)]);
      }
    }
    if (state.threads) {
      stacks = stacks.map(([i, f]) => [i, [threadFrames[M.stack_threads[i]]].concat(f)]);
    }
    return stacks;
  }

  // a;b;c;b;d → a;b;d: a frame seen again drops the frames since its first use.
  function collapseRecursion(f) {
    const out = [];
    const at = new Map();
    for (const id of f) {
      const seen = at.get(id);
      if (seen !== undefined) {
        for (let k = seen + 1; k < out.length; k++) at.delete(out[k]);
        out.length = seen + 1;
      } else {
        at.set(id, out.length);
        out.push(id);
      }
    }
    return out;
  }

  // ---- the tree ---------------------------------------------------------------
  // Nodes are integers in depth-first order (0 is the root), so a subtree is
  // the id range [id, end[id]). Flat typed arrays hold 4 values per node (one
  // per metric) for new (n), base (b), their variances (vn, vb), what their
  // samples add up to (sn, sb) and the largest weight scale of their stacks
  // (wn, wb): far faster to build than an object per node.
  let T = null;
  function newTree(count) {
    const values = () => new Float64Array(4 * count);
    T = { count: 0, parent: new Int32Array(count), frame: new Int32Array(count), end: new Int32Array(count),
      n: values(), vn: values(), sn: values(), wn: values(),
      b: DIFF ? values() : null, vb: DIFF ? values() : null, sb: DIFF ? values() : null,
      wb: DIFF ? values() : null,
      w: null, sorted: [] };
  }
  function addNode(parent, frame) {
    const id = T.count++;
    T.parent[id] = parent; T.frame[id] = frame;
    return id;
  }
  function kids(id) {
    const list = [];
    for (let c = id + 1; c < T.end[id]; c = T.end[c]) list.push(c);
    return list;
  }
  function childWithFrame(parent, frame) {
    for (let c = parent + 1; c < T.end[parent]; c = T.end[c]) if (T.frame[c] === frame) return c;
    return undefined;
  }
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
  function buildTree(stacks) {
    const sorted = stacks.slice().sort(compareStacks);
    let count = 1, previous = [];
    for (const [, f] of sorted) { count += f.length - shared(f, previous); previous = f; }
    newTree(count);
    addNode(-1, -1);
    const path = [0];
    previous = [];
    for (const [i, f] of sorted) {
      const o = 4 * i;
      addValues(0, o);
      const same = shared(f, previous);
      while (path.length > same + 1) T.end[path.pop()] = T.count;
      for (let d = 0; d < f.length; d++) {
        const id = d < same ? path[d + 1] : addNode(path[d], f[d]);
        if (d >= same) path.push(id);
        addValues(id, o);
      }
      previous = f;
    }
    while (path.length) T.end[path.pop()] = T.count;
    return 0;
  }
  // Sums over disjoint stacks: values add, and so do their variances and
  // what their samples add up to; the weight scale is the largest.
  const COLUMNS = DIFF
    ? [["n", "new_values"], ["vn", "new_variances"], ["sn", "new_sampled"],
      ["b", "base_values"], ["vb", "base_variances"], ["sb", "base_sampled"]]
    : [["n", "new_values"], ["vn", "new_variances"], ["sn", "new_sampled"]];
  const LARGEST = DIFF ? [["wn", "new_scales"], ["wb", "base_scales"]] : [["wn", "new_scales"]];
  function addValues(id, o) {
    const at = 4 * id;
    for (const [node, stack] of COLUMNS) {
      const to = T[node], from = M[stack];
      for (let k = 0; k < 4; k++) to[at + k] += from[o + k];
    }
    for (const [node, stack] of LARGEST) {
      const to = T[node], from = M[stack];
      for (let k = 0; k < 4; k++) to[at + k] = Math.max(to[at + k], from[o + k]);
    }
  }
  const val = (arr, id, k) => (arr ? arr[4 * id + k] : 0);
  // What the frame itself holds (its value minus its children's).
  function selfValue(arr, id, k) {
    let v = val(arr, id, k);
    for (let c = id + 1; c < T.end[id]; c = T.end[c]) v -= val(arr, c, k);
    return v;
  }
  // Widths: the metric's value; in a diff the larger of base and new, so
  // both growth and shrinkage stay visible.
  function setWidths(k) {
    T.w = new Float64Array(T.count);
    T.sorted = new Array(T.count).fill(null);
    for (let id = 0; id < T.count; id++) {
      T.w[id] = DIFF ? Math.max(T.n[4 * id + k], T.b[4 * id + k] * baseScale) : T.n[4 * id + k];
    }
  }
  function children(id) {
    let list = T.sorted[id];
    if (!list) {
      list = kids(id).filter((c) => T.w[c] > 0);
      list.sort((a, c) => {
        const x = frames[T.frame[a]].name, y = frames[T.frame[c]].name;
        return x < y ? -1 : x > y ? 1 : 0;
      });
      T.sorted[id] = list;
    }
    return list;
  }
  function frameOf(id) { return id === 0 ? { name: "all", module: -3, place: "" } : frames[T.frame[id]]; }

  let baseScale = 1;
  // ---- colours ------------------------------------------------------------------
  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return (h >>> 0) / 4294967295;
  }
  const KIND_HUE = { program: [10, 40], library: [45, 70], runtime: [190, 220], unknown: [0, 0], thread: [270, 290] };
  function moduleKind(f) {
    if (f.module === -2) return "thread";
    if (f.module < 0) return "unknown";
    return M.modules[f.module][1];
  }
  function frameColour(f) {
    const kind = moduleKind(f);
    const [lo, hi] = KIND_HUE[kind];
    const moduleName = f.module >= 0 ? M.modules[f.module][0] : kind;
    const hue = lo + (hi - lo) * hash(moduleName);
    const light = 55 + 15 * hash(f.name);
    const sat = kind === "unknown" ? 0 : 75;
    return "hsl(" + hue.toFixed(0) + "," + sat + "%," + light.toFixed(0) + "%)";
  }
  const MATCH_COLOUR = "#e040c0";
  function delta(id, k) { return val(T.n, id, k) - val(T.b, id, k) * baseScale; }
  // Frame id's estimate of metric k on one side, in the form of stats.js;
  // `scale` multiplies everything counted (a normalised base).
  function estimate(values, variances, sampled, scales, sampling, id, k, scale) {
    const s = sampling[k];
    return { value: val(values, id, k) * scale, variance: val(variances, id, k) * scale * scale,
      floor: val(sampled, id, k) * scale, scale: val(scales, id, k) * scale,
      sampling: { unit: s.unit, unseen_bytes: s.unseen_bytes * scale, low_confidence_below: s.low_confidence_below * scale } };
  }
  function newEstimate(id, k) { return estimate(T.n, T.vn, T.sn, T.wn, M.new_sampling, id, k, 1); }
  function baseEstimate(id, k) { return estimate(T.b, T.vb, T.sb, T.wb, M.base_sampling, id, k, baseScale); }
  // The change of frame id's metric k by the one rule of the reports
  // (stats.js). A normalised (scaled) base is no longer the earlier dump's
  // own samples: its change is judged as between independent dumps.
  function change(id, k) {
    const pairing = baseScale === 1 ? M.pairing : "independent";
    return heapdiffStats.change(baseEstimate(id, k), newEstimate(id, k), pairing, M.accumulations[k]);
  }
  function significant(id, k) { return change(id, k).significant; }
  let maxDelta = 1;
  function diffColour(id, k) {
    const d = delta(id, k);
    if (!significant(id, k)) return "rgb(222,222,222)";
    const t = 0.25 + 0.75 * Math.min(1, Math.abs(d) / maxDelta);
    const c = Math.round(235 * (1 - t));
    return d > 0 ? "rgb(255," + c + "," + c + ")" : "rgb(" + c + "," + c + ",255)";
  }

  // ---- formatting -------------------------------------------------------------
  function fmt(v, unit) {
    const a = Math.abs(v);
    if (unit === "bytes") {
      const units = ["B", "KiB", "MiB", "GiB", "TiB"];
      let i = 0, x = a;
      while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
      return (v < 0 ? "-" : "") + (i === 0 ? x.toFixed(0) : x.toFixed(x < 10 ? 2 : 1)) + " " + units[i];
    }
    return (v < 0 ? "-" : "") + Math.round(a).toLocaleString("en-US");
  }
  function signed(v, unit) { return (v > 0 ? "+" : "") + fmt(v, unit); }
  function pct(part, whole) { return whole ? (100 * part / whole).toFixed(2) + "%" : "-"; }

  // ---- view -----------------------------------------------------------------------
  const canvas = $("canvas");
  const ctx = canvas.getContext("2d");
  let root = 0, zoomNode = 0, rows = [], searchTest = null, matchMemo = new Map();
  let stacks = [];

  const timings = {};
  function timed(name, f) {
    const t = performance.now();
    const r = f();
    timings[name] = Math.round(performance.now() - t);
    return r;
  }
  function rebuild() {
    stacks = timed("transform", transformedStacks);
    root = timed("tree", () => buildTree(stacks));
    relayout();
  }
  function relayout() {
    const k = state.metric;
    baseScale = 1;
    if (DIFF && state.normalise) {
      const total = M.base_values.reduce((s, v, i) => (i % 4 === k ? s + v : s), 0);
      const totalNew = M.new_values.reduce((s, v, i) => (i % 4 === k ? s + v : s), 0);
      baseScale = total > 0 ? totalNew / total : 1;
    }
    setWidths(k);
    maxDelta = 1;
    if (DIFF) for (let id = 1; id < T.count; id++) maxDelta = Math.max(maxDelta, Math.abs(delta(id, k)));
    zoomNode = findPath(state.zoom);
    if (zoomNode === null) zoomNode = 0;
    timed("draw", draw);
    timed("table", table);
    timed("summary", summary);
  }
  function pathOf(id) { const p = []; for (; id > 0; id = T.parent[id]) p.unshift(T.frame[id]); return p; }
  function findPath(p) {
    let id = 0;
    for (const f of p) { id = childWithFrame(id, f); if (id === undefined) return null; }
    return id;
  }
  function isMatch(frame) {
    if (!searchTest || frame < 0) return false;
    let r = matchMemo.get(frame);
    if (r === undefined) { r = searchTest(frames[frame].name); matchMemo.set(frame, r); }
    return r;
  }

  function draw() {
    const k = state.metric;
    const width = Math.max(300, $("graph").clientWidth);
    const scale = T.w[zoomNode] > 0 ? width / T.w[zoomNode] : 0;
    const minw = state.minwidth;
    rows = [];
    const put = (depth, x, w, id) => { (rows[depth] = rows[depth] || []).push([x, w, id]); };
    // Ancestors of the zoomed frame span the whole width.
    const chain = [];
    for (let id = zoomNode; id >= 0; id = T.parent[id]) chain.unshift(id);
    chain.forEach((id, d) => put(d, 0, width, id));
    (function lay(id, x, depth) {
      let cx = x;
      for (const c of children(id)) {
        const w = T.w[c] * scale;
        if (w >= minw) { put(depth, cx, w, c); lay(c, cx, depth + 1); }
        cx += w;
      }
    })(zoomNode, 0, chain.length);
    const dpr = window.devicePixelRatio || 1;
    const height = Math.max(1, rows.length) * ROW;
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    canvas.style.height = height + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    const top = rows.length - 1;
    rows.forEach((row, depth) => {
      const y = (state.icicle ? depth : top - depth) * ROW;
      for (const [x, w, id] of row) {
        const f = frameOf(id);
        ctx.fillStyle = id === 0 ? "#ccc" : isMatch(T.frame[id]) ? MATCH_COLOUR : DIFF ? diffColour(id, k) : frameColour(f);
        ctx.fillRect(x, y, Math.max(w - 0.5, 0.5), ROW - 1);
        if (w > 20) {
          const chars = Math.floor((w - 6) / 6.2);
          if (chars >= 2) {
            const label = f.name.length > chars ? f.name.slice(0, chars - 1) + "…" : f.name;
            ctx.fillStyle = "#000";
            ctx.fillText(label, x + 3, y + ROW / 2);
          }
        }
      }
    });
  }

  function hit(ev) {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, yy = ev.clientY - r.top;
    const top = rows.length - 1;
    const row = Math.floor(yy / ROW);
    const depth = state.icicle ? row : top - row;
    const list = rows[depth];
    if (!list) return null;
    for (const [rx, w, id] of list) if (x >= rx && x < rx + w) return id;
    return null;
  }

  function describe(id) {
    const k = state.metric, unit = UNITS[k], c = COMPANION[k];
    const f = frameOf(id);
    const lines = [f.name];
    if (f.full && f.full !== f.name) lines.push(f.full);
    if (f.module >= 0) lines.push("module: " + M.modules[f.module][0]);
    if (f.place) lines.push("at " + f.place);
    const whole = val(T.n, 0, k);
    // The 95 % interval when it is not the value itself.
    const ci = (i) => i.low === i.high ? "" : " [" + fmt(i.low, unit) + ", " + fmt(i.high, unit) + "] (95%)";
    const LOW_CONFIDENCE = "low confidence: objects too small to be sampled may dominate it";
    const nk = val(T.n, id, k);
    if (DIFF) {
      const b = val(T.b, id, k) * baseScale, d = nk - b, c = change(id, k);
      lines.push("base: " + fmt(b, unit) + (state.normalise ? " (normalised)" : ""));
      lines.push("new: " + fmt(nk, unit) + " (" + pct(nk, whole) + ")");
      lines.push("delta: " + signed(d, unit) + (b > 0 ? " (" + signed(100 * d / b, "") + "%)" : "") + ci(c));
      lines.push(c.significant ? (d > 0 ? "growth" : "shrink") : "within sampling noise");
      if (c.lowConfidence) lines.push(LOW_CONFIDENCE);
    } else {
      const i = heapdiffStats.interval(newEstimate(id, k));
      lines.push(M.metrics[k] + ": " + fmt(nk, unit) + ci(i) + ", " + pct(nk, whole) + " of total");
      if (i.lowConfidence) lines.push(LOW_CONFIDENCE);
      lines.push(M.metrics[c] + ": " + fmt(val(T.n, id, c), UNITS[c]));
      const self = selfValue(T.n, id, k);
      if (self > 0) lines.push("self: " + fmt(self, unit) + " (" + pct(self, whole) + ")");
    }
    return lines.join("\n");
  }
  // Where the first drawn frame named `name` is, in client coordinates.
  function frameBox(name) {
    const r = canvas.getBoundingClientRect(), top = rows.length - 1;
    for (let depth = 0; depth < rows.length; depth++) {
      for (const [x, w, id] of rows[depth]) {
        if (id > 0 && frames[T.frame[id]].name === name) {
          const y = (state.icicle ? depth : top - depth) * ROW;
          return { x: r.left + x + w / 2, y: r.top + y + ROW / 2 };
        }
      }
    }
    return null;
  }
  // The tooltip of the first frame named `name` (for tests and scripts).
  function describeFunction(name) {
    for (let id = 1; id < T.count; id++) if (frames[T.frame[id]].name === name) return describe(id);
    return null;
  }

  // ---- search summary, legend, totals --------------------------------------------
  function summary() {
    const k = state.metric, unit = UNITS[k];
    let matchedNew = 0, matchedBase = 0;
    if (searchTest) {
      (function walk(id) {
        for (const c of kids(id)) {
          if (isMatch(T.frame[c])) { matchedNew += val(T.n, c, k); matchedBase += val(T.b, c, k) * baseScale; }
          else walk(c);
        }
      })(0);
    }
    const m = $("matched");
    if (searchTest) {
      const whole = val(T.n, 0, k);
      const percent = whole ? 100 * matchedNew / whole : 0;
      m.dataset.value = matchedNew;
      m.dataset.percent = percent;
      m.textContent = "matched " + fmt(matchedNew, unit) + " (" + percent.toFixed(2) + "%)" +
        (DIFF ? ", delta " + signed(matchedNew - matchedBase, unit) : "");
    } else {
      m.textContent = ""; delete m.dataset.value; delete m.dataset.percent;
    }
    const legend = $("legend");
    if (DIFF) {
      legend.innerHTML = '<span><span class="swatch" style="background:rgb(255,60,60)"></span>grew</span>' +
        '<span><span class="swatch" style="background:rgb(60,60,255)"></span>shrank</span>' +
        '<span><span class="swatch" style="background:rgb(222,222,222)"></span>change within sampling noise (95%)</span>' +
        "<span>width: the larger of base and new; base " + escapeText(M.base_name) + ", new " + escapeText(M.new_name) + "</span>";
    } else {
      legend.innerHTML = ["program", "library", "runtime", "unknown"].map((kind) => {
        const [lo] = KIND_HUE[kind];
        return '<span><span class="swatch" style="background:hsl(' + lo + "," + (kind === "unknown" ? 0 : 75) + '%,60%)"></span>' + kind + "</span>";
      }).join("") + '<span><span class="swatch" style="background:' + MATCH_COLOUR + '"></span>search match</span>';
    }
    const t = M.totals[0];
    const est = (i) => fmt(val(T.n, 0, i), UNITS[i]);
    let text = "estimated from samples: in use " + est(0) + " in " + est(1) + " objects; allocated " + est(2) +
      " in " + est(3) + " objects; sampling period " + M.period + " bytes. Exact counters: allocated " +
      fmt(t.bytes_allocated, "bytes") + " in " + fmt(t.allocations, "") + " allocations" +
      (t.live_usable_bytes !== null && t.live_usable_bytes !== undefined ? ", live heap " + fmt(t.live_usable_bytes, "bytes") : "") +
      ", " + t.samples_taken + " samples.";
    $("totals").textContent = text;
  }
  function escapeText(s) {
    const d = document.createElement("span"); d.textContent = s == null ? "" : s; return d.innerHTML;
  }

  // ---- functions table --------------------------------------------------------------
  let sortColumn = "total", sortDescending = true;
  function table() {
    const k = state.metric, unit = UNITS[k];
    // Function names interned once per frame; a stamp per name counts each
    // stack once in a function's total.
    const nameIds = new Map(), entries = [], nameOf = new Int32Array(frames.length);
    frames.forEach((f, id) => {
      let n = nameIds.get(f.name);
      if (n === undefined) {
        n = entries.length;
        nameIds.set(f.name, n);
        entries.push({ name: f.name, self: 0, total: 0, bself: 0, btotal: 0 });
      }
      nameOf[id] = n;
    });
    const stamp = new Int32Array(entries.length).fill(-1);
    for (const [i, f] of stacks) {
      if (!f.length) continue;
      const v = M.new_values[4 * i + k];
      const b = DIFF ? M.base_values[4 * i + k] * baseScale : 0;
      const leaf = entries[nameOf[f[f.length - 1]]];
      leaf.self += v; leaf.bself += b;
      for (let d = 0; d < f.length; d++) {
        const n = nameOf[f[d]];
        if (stamp[n] === i) continue;
        stamp[n] = i;
        entries[n].total += v; entries[n].btotal += b;
      }
    }
    let list = entries.filter((e) => e.total !== 0 || e.btotal !== 0);
    if (searchTest) list = list.filter((e) => searchTest(e.name));
    const key = sortColumn;
    list.sort((a, b) => {
      const x = key === "name" ? a.name : a[key], y = key === "name" ? b.name : b[key];
      const c = x < y ? -1 : x > y ? 1 : 0;
      return sortDescending ? -c : c;
    });
    list = list.slice(0, 500);
    const whole = val(T.n, 0, k);
    const columns = DIFF
      ? [["name", "function"], ["self", "self (new)"], ["total", "total (new)"], ["dself", "self Δ"], ["dtotal", "total Δ"], ["btotal", "total (base)"]]
      : [["name", "function"], ["self", "self"], ["selfp", "self %"], ["total", "total"], ["totalp", "total %"]];
    for (const e of list) { e.dself = e.self - e.bself; e.dtotal = e.total - e.btotal; e.selfp = e.self; e.totalp = e.total; }
    const head = document.querySelector("#functions thead tr");
    head.innerHTML = columns.map(([c, label]) =>
      '<th data-column="' + c + '">' + label + (c === sortColumn ? (sortDescending ? " ▼" : " ▲") : "") + "</th>").join("");
    const body = document.querySelector("#functions tbody");
    const html = [];
    for (const e of list) {
      const cls = DIFF ? (e.dtotal > 0 ? "growth" : e.dtotal < 0 ? "shrink" : "") : "";
      html.push('<tr class="' + cls + '"><td class="name" title="' + escapeText(e.name) + '">' + escapeText(e.name) + "</td>");
      for (const [c] of columns.slice(1)) {
        let text;
        if (c === "selfp") text = pct(e.self, whole);
        else if (c === "totalp") text = pct(e.total, whole);
        else if (c === "dself" || c === "dtotal") text = signed(e[c], unit);
        else text = fmt(e[c], unit);
        const delta = c === "dself" || c === "dtotal" ? " delta" : "";
        html.push('<td class="' + c + delta + '" data-value="' + e[c] + '">' + text + "</td>");
      }
      html.push("</tr>");
    }
    body.innerHTML = html.join("");
  }

  // ---- transforms panel ---------------------------------------------------------------
  const LABELS = { keep: "keep stacks matching", remove: "remove frames matching", rename: "rename", collapse: "collapse recursion" };
  function transformList() {
    const ol = $("transform-list");
    ol.innerHTML = "";
    state.transforms.forEach((t, i) => {
      const li = document.createElement("li");
      li.textContent = LABELS[t[0]] + (t[0] === "collapse" ? "" : " " + t[1]) + (t[0] === "rename" ? " → " + (t[2] || "") : "");
      const x = document.createElement("button");
      x.textContent = "remove";
      x.className = "transform-remove";
      x.onclick = () => { state.transforms.splice(i, 1); update(true); };
      li.appendChild(x);
      ol.appendChild(li);
    });
  }

  function update(structural) {
    writeHash();
    transformList();
    searchTest = matcher(state.search);
    matchMemo = new Map();
    if (structural) rebuild(); else relayout();
  }

  // ---- wiring ------------------------------------------------------------------------------
  readHash();
  const metricSelect = $("metric");
  M.metrics.forEach((name, i) => { const o = document.createElement("option"); o.value = i; o.textContent = name; metricSelect.appendChild(o); });
  metricSelect.value = state.metric;
  $("search").value = state.search;
  $("icicle").checked = state.icicle;
  $("threads").checked = state.threads;
  $("minwidth").value = state.minwidth;
  $("normalise").checked = state.normalise;
  $("normalise-label").hidden = !DIFF;
  const nav = $("links");
  for (const l of M.links) { const a = document.createElement("a"); a.href = l.href; a.textContent = l.label; nav.appendChild(a); }

  metricSelect.onchange = () => { state.metric = parseInt(metricSelect.value, 10); update(false); };
  let searchTimer = null;
  $("search").oninput = () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { state.search = $("search").value; update(false); }, 120);
  };
  $("search").onkeydown = (e) => { if (e.key === "Enter") { clearTimeout(searchTimer); state.search = $("search").value; update(false); } };
  $("icicle").onchange = () => { state.icicle = $("icicle").checked; update(false); };
  $("threads").onchange = () => { state.threads = $("threads").checked; state.zoom = []; update(true); };
  $("minwidth").onchange = () => { state.minwidth = Math.max(0, parseFloat($("minwidth").value) || 0); update(false); };
  $("normalise").onchange = () => { state.normalise = $("normalise").checked; update(false); };
  $("reset").onclick = () => { state.zoom = []; update(false); };
  $("transform-add").onclick = () => {
    const kind = $("transform-kind").value, pattern = $("transform-pattern").value, replacement = $("transform-with").value;
    if (kind !== "collapse" && !pattern) return;
    state.transforms.push(kind === "rename" ? [kind, pattern, replacement] : kind === "collapse" ? [kind] : [kind, pattern]);
    state.zoom = [];
    update(true);
  };
  document.querySelector("#functions thead").onclick = (e) => {
    const c = e.target.dataset && e.target.dataset.column;
    if (!c) return;
    if (c === sortColumn) sortDescending = !sortDescending; else { sortColumn = c; sortDescending = c !== "name"; }
    table();
  };
  const tip = $("tooltip");
  canvas.onmousemove = (e) => {
    const n = hit(e);
    if (n === null) { tip.hidden = true; return; }
    tip.textContent = describe(n);
    tip.hidden = false;
    const x = Math.min(e.clientX + 12, window.innerWidth - tip.offsetWidth - 4);
    const y = Math.min(e.clientY + 12, window.innerHeight - tip.offsetHeight - 4);
    tip.style.left = x + "px"; tip.style.top = y + "px";
  };
  canvas.onmouseleave = () => { tip.hidden = true; };
  canvas.onclick = (e) => {
    const n = hit(e);
    if (n === null) return;
    state.zoom = pathOf(n);
    zoomNode = n;
    timed("draw", draw);
  };
  window.onresize = () => draw();
  window.onhashchange = () => { readHash(); update(true); };
  update(true);
  // What tests and scripts may read.
  window.heapdiffViewer = { state, describe, describeFunction, frameBox, stats: heapdiffStats,
    zoomedName: () => frameOf(zoomNode).name,
    firstDrawMs: Math.round(performance.now() - started), parseMs: Math.round(parsedMs), timings };
})();
