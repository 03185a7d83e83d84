// heapdiff's viewer: draws the model embedded in the page. Transforms,
// search, zoom, the functions table, the callers and callees of a function
// and the diff colours all run here, on the modules loaded before this one
// (format, state, tree, flame, table, ages, sandwich, and stats for the one rule
// of a change). The view's state lives in the URL's fragment (hdState).
// Nothing is fetched.
"use strict";
(function () {
  const started = performance.now();
  const M = JSON.parse(document.getElementById("model").textContent);
  const parsedMs = performance.now() - started;
  const DIFF = M.base_name !== null && M.base_name !== undefined;
  const UNITS = ["bytes", "objects", "bytes", "objects"];
  const COMPANION = [1, 0, 3, 2];
  const $ = (id) => document.getElementById(id);
  const { fmt, signed, pct, escapeText } = hdFormat;
  const { val } = hdTree;
  const BASE = hdState.defaults(M);
  let state = hdState.read(BASE);

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

  // ---- frames: the model's, plus renamed and thread frames -----------------
  const codeKinds = M.frame_kinds || [];
  const frames = M.frames.map((f, i) => ({ short: f[0], module: f[1], place: f[2], full: f[3] || f[0], code: codeKinds[i] || "native" }));
  const frameIds = new Map(frames.map((f, i) => [f.full + "\u0000" + f.module, i]));
  function internFrame(name, module, place) {
    const key = name + "\u0000" + module;
    let id = frameIds.get(key);
    if (id === undefined) {
      id = frames.length;
      frames.push({ short: name, full: name, module, place });
      frameIds.set(key, id);
    }
    return id;
  }
  const threadFrames = M.threads.map((t) => internFrame("[thread " + t + "]", -2, ""));
  const label = (frame) => (state.names === "full" ? frames[frame].full : frames[frame].short);

  // Every stack's frames, root first: the frames it shares with the stack
  // before (the model sorts them), then its own.
  const modelStacks = (function () {
    const out = new Array(M.stack_frames.length);
    let previous = [];
    for (let i = 0; i < out.length; i++) {
      const shared = M.stack_shared[i], tail = M.stack_frames[i];
      const f = new Array(shared + tail.length);
      for (let d = 0; d < shared; d++) f[d] = previous[d];
      for (let d = 0; d < tail.length; d++) f[shared + d] = tail[d];
      out[i] = [i, f];
      previous = f;
    }
    return out;
  })();

  // Apply the transforms to every stack: the list of [stack index, frames].
  function transformedStacks() {
    let stacks = modelStacks;
    for (const [kind, pattern, replacement] of state.transforms) {
      if (kind === "collapse") { stacks = stacks.map(([i, f]) => [i, collapseRecursion(f)]); continue; }
      const test = matcher(pattern);
      if (!test) continue;
      const memo = new Map();
      const matches = (id) => {
        let r = memo.get(id);
        if (r === undefined) { r = test(label(id)); memo.set(id, r); }
        return r;
      };
      if (kind === "keep") stacks = stacks.filter(([, f]) => f.some(matches));
      else if (kind === "remove") stacks = stacks.map(([i, f]) => [i, f.filter((id) => !matches(id))]);
      else if (kind === "rename") {
        const re = regex(pattern, "g");
        if (!re) continue;
        const renamed = new Map();
        const rename = (id) => {
          let r = renamed.get(id);
          if (r === undefined) {
            const name = label(id), to = name.replace(re, replacement || "");
            r = to === name ? id : internFrame(to, frames[id].module, frames[id].place);
            renamed.set(id, r);
          }
          return r;
        };
        stacks = stacks.map(([i, f]) => [i, f.map(rename)]);
      }
    }
    if (state.threads) stacks = stacks.map(([i, f]) => [i, [threadFrames[M.stack_threads[i]]].concat(f)]);
    return stacks;
  }
  // A stack bottom-up: leaf first, a thread frame kept at the root.
  function bottomUp(f) {
    const reversed = f.slice().reverse();
    if (state.threads && f.length > 0) { reversed.pop(); reversed.unshift(f[0]); }
    return reversed;
  }
  // a;b;c;b;d → a;b;d: a frame seen again drops the frames since its first use.
  function collapseRecursion(f) {
    const out = [], at = new Map();
    for (const id of f) {
      const seen = at.get(id);
      if (seen !== undefined) {
        for (let k = seen + 1; k < out.length; k++) at.delete(out[k]);
        out.length = seen + 1;
      } else { at.set(id, out.length); out.push(id); }
    }
    return out;
  }

  // ---- values and the rule for a change ---------------------------------------
  const PARTS = DIFF && M.added_values.length > 0;
  const data = { nv: M.new_values, nvar: M.new_variances, ns: M.new_sampled, nw: M.new_scales,
    bv: DIFF ? M.base_values : null, bvar: DIFF ? M.base_variances : null,
    bs: DIFF ? M.base_sampled : null, bw: DIFF ? M.base_scales : null,
    av: PARTS ? M.added_values : null, avar: PARTS ? M.added_variances : null,
    as: PARTS ? M.added_sampled : null, aw: PARTS ? M.added_scales : null,
    rv: PARTS ? M.removed_values : null, rvar: PARTS ? M.removed_variances : null,
    rs: PARTS ? M.removed_sampled : null, rw: PARTS ? M.removed_scales : null };
  let baseScale = 1;
  // A side's sums of metric k ({value, variance, floor, scale}) as an
  // estimate of stats.js; `times` multiplies everything counted (a
  // normalised base).
  function estimate(sums, sampling, k, times) {
    const s = sampling[k];
    return { value: sums.value * times, variance: sums.variance * times * times,
      floor: sums.floor * times, scale: sums.scale * times,
      sampling: { unit: s.unit, unseen_bytes: s.unseen_bytes * times, low_confidence_below: s.low_confidence_below * times } };
  }
  const newEstimate = (sums, k) => estimate(sums, M.new_sampling, k, 1);
  const baseEstimate = (sums, k) => estimate(sums, M.base_sampling, k, baseScale);
  // A normalised (scaled) base is no longer the earlier dump's own
  // samples: its changes are judged as between independent dumps. Where
  // the metric's rule is the shared-samples one, the change rests on the
  // live samples only one side has (`parts`: their sums).
  function judge(base, next, k, parts) {
    const pairing = baseScale === 1 ? M.pairing : "independent";
    const shared = parts && baseScale === 1 && M.variance_rules && M.variance_rules[k] === "shared-samples";
    const exact = shared ? { added: newEstimate(parts.added, k), removed: baseEstimate(parts.removed, k) } : undefined;
    return heapdiffStats.change(baseEstimate(base, k), newEstimate(next, k), pairing, M.accumulations[k], exact);
  }
  const sumsOf = (t, v, vv, s, w, id, k) =>
    ({ value: val(t[v], id, k), variance: val(t[vv], id, k), floor: val(t[s], id, k), scale: val(t[w], id, k) });
  function change(t, id, k) {
    const parts = t.a ? { added: sumsOf(t, "a", "va", "sa", "wa", id, k), removed: sumsOf(t, "r", "vr", "sr", "wr", id, k) } : null;
    return judge(sumsOf(t, "b", "vb", "sb", "wb", id, k), sumsOf(t, "n", "vn", "sn", "wn", id, k), k, parts);
  }
  function widths(t, k) {
    const w = new Float64Array(t.count);
    for (let id = 0; id < t.count; id++) w[id] = DIFF ? Math.max(t.n[4 * id + k], t.b[4 * id + k] * baseScale) : t.n[4 * id + k];
    return w;
  }

  // ---- colours --------------------------------------------------------------------
  function hash(s) {
    let h = 2166136261;
    for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return (h >>> 0) / 4294967295;
  }
  // Frames in code a runtime generated are coloured by their language, as
  // async-profiler does (Java green); native frames by their module's kind.
  const KIND_HUE = { program: [10, 40], library: [45, 70], runtime: [190, 220], unknown: [0, 0], thread: [270, 290],
    python: [95, 110], javascript: [125, 140], java: [145, 160], jit: [165, 180], interpreter: [240, 255] };
  const CODE_KINDS = ["python", "javascript", "java", "jit", "interpreter"];
  function moduleKind(f) {
    if (f.module === -2) return "thread";
    if (f.code && f.code !== "native") return f.code;
    if (f.module < 0) return "unknown";
    return M.modules[f.module][1];
  }
  function frameColour(f) {
    const kind = moduleKind(f), [lo, hi] = KIND_HUE[kind];
    const hue = lo + (hi - lo) * hash(f.module >= 0 ? M.modules[f.module][0] : kind);
    const light = 55 + 15 * hash(f.short);
    return "hsl(" + hue.toFixed(0) + "," + (kind === "unknown" ? 0 : 75) + "%," + light.toFixed(0) + "%)";
  }
  const MATCH_COLOUR = "#e040c0", NOISE_COLOUR = "rgb(222,222,222)";
  let maxDelta = 1;
  function diffColour(t, id, k) {
    const c = change(t, id, k);
    if (!c.significant) return NOISE_COLOUR;
    const s = 0.25 + 0.75 * Math.min(1, Math.abs(c.value) / maxDelta);
    const g = Math.round(235 * (1 - s));
    return c.value > 0 ? "rgb(255," + g + "," + g + ")" : "rgb(" + g + "," + g + ",255)";
  }
  let searchTest = null, matchMemo = new Map();
  function isMatch(frame) {
    if (!searchTest || frame < 0) return false;
    let r = matchMemo.get(frame);
    if (r === undefined) { r = searchTest(label(frame)); matchMemo.set(frame, r); }
    return r;
  }
  function colourOf(t, id, rootColour) {
    if (id === 0) return rootColour;
    if (isMatch(t.frame[id])) return MATCH_COLOUR;
    return DIFF ? diffColour(t, id, state.metric) : frameColour(frames[t.frame[id]]);
  }

  // ---- what a frame says -----------------------------------------------------------
  function nodeLabel(t, id, rootName) { return id === 0 ? rootName : label(t.frame[id]); }
  function describe(t, id, rootName) {
    const k = state.metric, unit = UNITS[k], c = COMPANION[k];
    const lines = [nodeLabel(t, id, rootName)];
    if (id > 0) {
      const f = frames[t.frame[id]], other = state.names === "full" ? f.short : f.full;
      if (other !== lines[0]) lines.push(other);
      if (f.module >= 0) lines.push("module: " + M.modules[f.module][0]);
      if (f.place) lines.push("at " + f.place);
    }
    const whole = val(tree.n, 0, k), nk = val(t.n, id, k);
    // The 95 % interval when it is not the value itself.
    const ci = (i) => (i.low === i.high ? "" : " [" + fmt(i.low, unit) + ", " + fmt(i.high, unit) + "] (95%)");
    const LOW_CONFIDENCE = "low confidence: objects too small to be sampled may dominate it";
    if (DIFF) {
      const b = val(t.b, id, k) * baseScale, ch = change(t, id, k);
      lines.push("base: " + fmt(b, unit) + (state.normalise ? " (normalised)" : ""));
      lines.push("new: " + fmt(nk, unit) + " (" + pct(nk, whole) + ")");
      lines.push("delta: " + signed(ch.value, unit) + (b > 0 ? " (" + signed(100 * ch.value / b, "") + "%)" : "") + ci(ch));
      lines.push(ch.significant ? (ch.value > 0 ? "growth" : "shrink") : "within sampling noise");
      if (ch.lowConfidence) lines.push(LOW_CONFIDENCE);
    } else {
      const i = heapdiffStats.interval(newEstimate(sumsOf(t, "n", "vn", "sn", "wn", id, k), k));
      lines.push(M.metrics[k] + ": " + fmt(nk, unit) + ci(i) + ", " + pct(nk, whole) + " of total");
      if (i.lowConfidence) lines.push(LOW_CONFIDENCE);
      lines.push(M.metrics[c] + ": " + fmt(val(t.n, id, c), UNITS[c]));
      const self = hdTree.selfValue(t, t.n, id, k);
      if (self > 0) lines.push("self: " + fmt(self, unit) + " (" + pct(self, whole) + ")");
    }
    return lines.join("\n");
  }

  // ---- the graphs ---------------------------------------------------------------------
  // `stacks`: the transformed stacks (root first) the table reads;
  // `drawnStacks`: the ones the graph draws (each reversed below its
  // thread frame when bottom-up).
  let stacks = [], drawnStacks = [], tree = null, zoomNode = 0, sandwich = null, shown = "";
  const tip = $("tooltip"), status = $("status");
  function showTip(text, x, y) {
    tip.textContent = text;
    tip.hidden = false;
    tip.style.left = Math.max(0, Math.min(x + 12, window.innerWidth - tip.offsetWidth - 4)) + "px";
    tip.style.top = Math.max(0, Math.min(y + 12, window.innerHeight - tip.offsetHeight - 4)) + "px";
  }
  // A flame graph of `treeOf()` whose root is named `rootName()`.
  function graph(canvas, box, treeOf, rootName, onPick) {
    const g = hdFlame.create(canvas, box, {
      label: (id) => nodeLabel(treeOf(), id, rootName()),
      colour: (id) => colourOf(treeOf(), id, "#ccc"),
      zoom: (id) => onPick(id),
      select: (id) => { if (id > 0) go({ view: "sandwich", fn: label(treeOf().frame[id]), zoom: [] }, true); },
      moved: (id) => {
        const text = describe(treeOf(), id, rootName());
        status.textContent = text;
        const b = g.boxOf(id);
        if (b) showTip(text, b.x, b.y);
      },
    });
    canvas.addEventListener("mousemove", (e) => {
      const n = g.hit(e);
      if (n === null) { tip.hidden = true; return; }
      showTip(describe(treeOf(), n, rootName()), e.clientX, e.clientY);
    });
    canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
    canvas.addEventListener("blur", () => { tip.hidden = true; });
    canvas.addEventListener("click", (e) => { const n = g.hit(e); if (n !== null) onPick(n); });
    return g;
  }
  const flame = graph($("canvas"), $("graph"), () => tree, () => "all",
    (id) => go({ zoom: hdTree.pathOf(tree, id) }, true));
  const callers = graph($("callers"), $("callers-box"), () => sandwich.callers, () => state.fn,
    (id) => { if (id > 0) go({ fn: label(sandwich.callers.frame[id]) }, true); });
  const callees = graph($("callees"), $("callees-box"), () => sandwich.callees, () => state.fn,
    (id) => { if (id > 0) go({ fn: label(sandwich.callees.frame[id]) }, true); });

  // Scrolling boxes end at the bottom of the window, so the root of a
  // flame graph (at the box's bottom) is on screen whatever the depth.
  function fitBoxes() {
    for (const box of document.querySelectorAll(".graph-box, #side")) {
      const top = box.getBoundingClientRect().top + window.scrollY;
      const share = box.classList.contains("half") ? 2 : 1;
      box.style.maxHeight = Math.max(200, (window.innerHeight - top - 12) / share) + "px";
    }
  }

  const timings = {};
  function timed(name, f) { const t = performance.now(); const r = f(); timings[name] = Math.round(performance.now() - t); return r; }
  function rebuild() {
    stacks = timed("transform", transformedStacks);
    drawnStacks = state.bottomUp ? stacks.map(([i, f]) => [i, bottomUp(f)]) : stacks;
    tree = timed("tree", () => hdTree.build(drawnStacks, data, drawnStacks === modelStacks ? M.stack_shared : null));
    relayout();
  }
  function relayout() {
    const k = state.metric;
    baseScale = 1;
    if (DIFF && state.normalise) {
      const sum = (arr) => arr.reduce((s, v, i) => (i % 4 === k ? s + v : s), 0);
      const total = sum(M.base_values);
      baseScale = total > 0 ? sum(M.new_values) / total : 1;
    }
    const w = widths(tree, k);
    maxDelta = 1;
    if (DIFF) for (let id = 1; id < tree.count; id++) maxDelta = Math.max(maxDelta, Math.abs(val(tree.n, id, k) - val(tree.b, id, k) * baseScale));
    zoomNode = hdTree.findPath(tree, state.zoom);
    if (zoomNode === null) zoomNode = 0;
    const inSandwich = state.view === "sandwich";
    $("graph").hidden = inSandwich;
    $("sandwich").hidden = !inSandwich;
    $("view-flame").setAttribute("aria-pressed", String(!inSandwich));
    $("view-sandwich").setAttribute("aria-pressed", String(inSandwich));
    $("view-sandwich").disabled = !state.fn;
    fitBoxes();
    const options = { zoom: 0, icicle: state.icicle, minwidth: state.minwidth, heavy: state.heavy };
    // The same graph at the same zoom keeps its scroll position.
    const layout = [state.view, state.fn, zoomNode, state.icicle, state.transforms.length, state.threads, state.bottomUp].join("|");
    const keepScroll = layout === shown;
    shown = layout;
    timed("draw", () => {
      if (inSandwich) drawSandwich(k, options, keepScroll);
      else flame.set(tree, Object.assign({}, options, { widths: w, zoom: zoomNode }), keepScroll);
    });
    timed("table", table);
    timed("summary", summary);
  }
  function drawSandwich(k, options, keepScroll) {
    const isTarget = (frame) => label(frame) === state.fn;
    const parts = hdSandwich.split(stacks, isTarget);
    sandwich = { callers: hdTree.build(parts.callers, data), callees: hdTree.build(parts.callees, data) };
    const t = sandwich.callees;
    $("sandwich-title").textContent = state.fn + ": " + M.metrics[k] + " " + fmt(val(t.n, 0, k), UNITS[k]) +
      " in total, " + fmt(hdTree.selfValue(t, t.n, 0, k), UNITS[k]) + " itself";
    callers.set(sandwich.callers, Object.assign({}, options, { widths: widths(sandwich.callers, k), icicle: false }), keepScroll);
    callees.set(t, Object.assign({}, options, { widths: widths(t, k), icicle: true }), keepScroll);
  }

  // ---- functions table ------------------------------------------------------------------
  function table() {
    const k = state.metric;
    let rows = stacks, caption = "functions";
    if (state.view !== "sandwich" && zoomNode > 0) {
      const path = state.zoom;
      rows = stacks.filter((_, j) => {
        const f = drawnStacks[j][1];
        return f.length >= path.length && path.every((x, d) => f[d] === x);
      });
      caption = "functions under " + label(tree.frame[zoomNode]) + " (zoomed; percentages of the whole)";
    }
    state.sort = hdTable.render($("functions"), {
      stacks: rows, labelOf: label, data, k, baseScale, diff: DIFF, searchTest,
      change: (base, next, parts) => judge(base, next, k, parts),
      sort: state.sort, desc: state.desc, unit: UNITS[k], whole: val(tree.n, 0, k), caption,
      href: (name) => hdState.encode(Object.assign({}, state, { view: "sandwich", fn: name, zoom: [] }), BASE),
    });
  }

  // ---- search summary, legend, totals -----------------------------------------------------
  function summary() {
    const k = state.metric, unit = UNITS[k];
    let matchedNew = 0, matchedBase = 0;
    if (searchTest) {
      (function walk(id) {
        for (const c of hdTree.kids(tree, id)) {
          if (isMatch(tree.frame[c])) { matchedNew += val(tree.n, c, k); matchedBase += val(tree.b, c, k) * baseScale; }
          else walk(c);
        }
      })(0);
    }
    const m = $("matched");
    if (searchTest) {
      const whole = val(tree.n, 0, k), percent = whole ? 100 * matchedNew / whole : 0;
      m.dataset.value = matchedNew;
      m.dataset.percent = percent;
      m.textContent = "matched " + fmt(matchedNew, unit) + " (" + percent.toFixed(2) + "%)" +
        (DIFF ? ", delta " + signed(matchedNew - matchedBase, unit) : "");
    } else { m.textContent = ""; delete m.dataset.value; delete m.dataset.percent; }
    legend();
    const t = M.totals[0], est = (i) => fmt(val(tree.n, 0, i), UNITS[i]);
    // The first pair of metrics is the live heap, or in the temporary view
    // the temporary allocations (freed within the threshold).
    const first = M.metrics[0].startsWith("temp") ? "temporary (freed soon after allocation) " : "in use ";
    const lines = ["Estimated from samples: " + first + est(0) + " in " + est(1) + " objects; allocated " + est(2) +
      " in " + est(3) + " objects; sampling period " + M.period + " bytes. Exact counters: allocated " +
      fmt(t.bytes_allocated, "bytes") + " in " + fmt(t.allocations, "") + " allocations, " + t.samples_taken + " samples."];
    (M.live || []).forEach((text, i) => lines.push((DIFF ? (i === 0 ? "New: " : "Base: ") : "") + text));
    $("totals").innerHTML = lines.map((l) => "<p>" + escapeText(l) + "</p>").join("");
  }
  const swatch = (colour, text) => '<span><span class="swatch" style="background:' + colour + '"></span>' + text + "</span>";
  function legend() {
    let html;
    if (DIFF) {
      html = swatch("rgb(255,60,60)", "grew") + swatch("rgb(60,60,255)", "shrank") +
        swatch(NOISE_COLOUR, "change within sampling noise (95%)") +
        "<span>width: the larger of base and new; base " + escapeText(M.base_name) + ", new " + escapeText(M.new_name) + "</span>";
    } else {
      const kinds = ["program", "library", "runtime", "unknown"].concat(state.threads ? ["thread"] : [])
        .concat(CODE_KINDS.filter((kind) => codeKinds.includes(kind)));
      html = kinds.map((kind) => swatch("hsl(" + KIND_HUE[kind][0] + "," + (kind === "unknown" ? 0 : 75) + "%,60%)", kind)).join("");
    }
    $("legend").innerHTML = html + swatch(MATCH_COLOUR, "search match");
  }

  // ---- transforms panel -------------------------------------------------------------------
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
      x.onclick = () => { const list = state.transforms.slice(); list.splice(i, 1); go({ transforms: list, zoom: [] }, true, true); };
      li.appendChild(x);
      ol.appendChild(li);
    });
  }

  // ---- state changes ----------------------------------------------------------------------
  const structure = (s) => JSON.stringify([s.transforms, s.threads, s.names, s.bottomUp]);
  function update(structural) {
    transformList();
    syncControls();
    searchTest = matcher(state.search);
    matchMemo = new Map();
    if (structural) rebuild(); else relayout();
  }
  // Change the state, record it in the URL (a history entry when `push`)
  // and draw again.
  function go(changes, push, structural) {
    const before = structure(state);
    state = Object.assign({}, state, changes);
    hdState.write(state, BASE, push);
    update(structural || structure(state) !== before);
  }
  function syncControls() {
    $("metric").value = state.metric;
    if (document.activeElement !== $("search")) $("search").value = state.search;
    $("icicle").checked = state.icicle;
    $("threads").checked = state.threads;
    $("heavy").checked = state.heavy;
    $("bottom-up").checked = state.bottomUp;
    $("full-names").checked = state.names === "full";
    $("minwidth").value = state.minwidth;
    $("normalise").checked = state.normalise;
    $("reset").disabled = state.zoom.length === 0 && state.view === "flame";
  }

  // ---- wiring --------------------------------------------------------------------------------
  const metricSelect = $("metric");
  M.metrics.forEach((name, i) => { const o = document.createElement("option"); o.value = i; o.textContent = name; metricSelect.appendChild(o); });
  $("normalise-label").hidden = !DIFF;
  for (const l of M.links) {
    const a = document.createElement("a");
    a.href = l.href; a.textContent = l.label;
    if (l.rel) a.rel = l.rel;
    $("links").appendChild(a);
  }

  metricSelect.onchange = () => go({ metric: parseInt(metricSelect.value, 10) }, true);
  let searchTimer = null;
  const search = $("search");
  const searchNow = () => { clearTimeout(searchTimer); go({ search: search.value }, false); };
  search.oninput = () => { clearTimeout(searchTimer); searchTimer = setTimeout(searchNow, 120); };
  search.onkeydown = (e) => { if (e.key === "Enter") searchNow(); };
  hdAges.render($("ages"), M.ages, (name) => { search.value = name; searchNow(); });
  $("icicle").onchange = () => go({ icicle: $("icicle").checked }, true);
  $("threads").onchange = () => go({ threads: $("threads").checked, zoom: [] }, true);
  $("heavy").onchange = () => go({ heavy: $("heavy").checked }, true);
  $("bottom-up").onchange = () => go({ bottomUp: $("bottom-up").checked, zoom: [] }, true);
  // Grouping by program frame is the server's (the pipeline's transform,
  // as `--group program-frame`): a page of its own, offered when served.
  if (location.pathname === "/view") {
    const here = new URL(location.href);
    $("group-label").hidden = false;
    $("group-program").checked = here.searchParams.get("group") === "program-frame";
    $("group-program").onchange = () => {
      if ($("group-program").checked) here.searchParams.set("group", "program-frame");
      else here.searchParams.delete("group");
      // Frame ids differ between the two pages: the zoom is not kept.
      const p = new URLSearchParams(location.hash.slice(1));
      p.delete("z");
      here.hash = p.toString();
      location.href = here.toString();
    };
  }
  $("full-names").onchange = () => go({ names: $("full-names").checked ? "full" : "short", zoom: [], fn: "", view: "flame" }, true);
  $("minwidth").onchange = () => go({ minwidth: Math.max(0, parseFloat($("minwidth").value) || 0) }, false);
  $("normalise").onchange = () => go({ normalise: $("normalise").checked }, true);
  $("reset").onclick = () => go({ zoom: [], view: "flame" }, true);
  $("view-flame").onclick = () => go({ view: "flame" }, true);
  $("view-sandwich").onclick = () => { if (state.fn) go({ view: "sandwich" }, true); };
  $("transform-add").onclick = () => {
    const kind = $("transform-kind").value, pattern = $("transform-pattern").value, replacement = $("transform-with").value;
    if (kind !== "collapse" && !pattern) return;
    const t = kind === "rename" ? [kind, pattern, replacement] : kind === "collapse" ? [kind] : [kind, pattern];
    go({ transforms: state.transforms.concat([t]), zoom: [] }, true, true);
  };
  document.querySelector("#functions thead").addEventListener("click", (e) => {
    const cell = e.target.closest("[data-column]");
    if (!cell) return;
    const c = cell.dataset.column;
    go(c === state.sort ? { desc: !state.desc } : { sort: c, desc: c !== "name" }, true);
  });
  document.addEventListener("keydown", (e) => {
    const typing = e.target.matches && e.target.matches("input, select, textarea");
    if (e.key === "/" && !typing) { e.preventDefault(); search.focus(); search.select(); return; }
    if ((e.key === "[" || e.key === "]") && !typing) {
      const a = document.querySelector('#links a[rel="' + (e.key === "[" ? "prev" : "next") + '"]');
      if (a) location.href = a.href;
      return;
    }
    if (e.key !== "Escape") return;
    if (e.target === search) {
      search.value = "";
      search.blur();
      if (state.search) go({ search: "" }, false);
    } else if (state.view === "sandwich") go({ view: "flame" }, true);
    else if (state.zoom.length) go({ zoom: [] }, true);
    else if (state.search) go({ search: "" }, false);
    tip.hidden = true;
  });
  window.addEventListener("resize", () => { fitBoxes(); relayout(); });
  window.addEventListener("popstate", () => {
    const before = structure(state);
    state = hdState.read(BASE);
    update(structure(state) !== before);
  });
  update(true);

  // What tests and scripts may read.
  const nodeNamed = (name) => { for (let id = 1; id < tree.count; id++) if (label(tree.frame[id]) === name) return id; return null; };
  window.heapdiffViewer = {
    get state() { return state; },
    describe: (id) => describe(tree, id, "all"),
    describeFunction: (name) => { const id = nodeNamed(name); return id === null ? null : describe(tree, id, "all"); },
    changeOf: (name) => { const id = nodeNamed(name); return id === null || !DIFF ? null : change(tree, id, state.metric); },
    frameBox: (name) => { const id = flame.find((n) => n > 0 && label(tree.frame[n]) === name); return id === null ? null : flame.boxOf(id); },
    rootBox: () => flame.boxOf(0),
    cursorName: () => { const c = flame.cursor(); return c === null ? null : nodeLabel(tree, c, "all"); },
    sandwichRoots: () => sandwich && [val(sandwich.callers.n, 0, state.metric), val(sandwich.callees.n, 0, state.metric)],
    stats: heapdiffStats,
    zoomedName: () => nodeLabel(tree, zoomNode, "all"),
    // The graph's root frames, widest first: [label, value of the metric].
    rootFrames: () => hdTree.kids(tree, 0).map((c) => [label(tree.frame[c]), val(tree.n, c, state.metric)])
      .sort((a, b) => b[1] - a[1]),
    firstDrawMs: Math.round(performance.now() - started), parseMs: Math.round(parsedMs), timings,
  };
})();
