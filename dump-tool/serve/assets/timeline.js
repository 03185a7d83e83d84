// The timeline of one process: its live heap over time (the estimate with
// its 95 % band, in requested bytes; the exact counter where the dumps have
// one, in usable bytes), its allocation rate between dumps, a mark per dump
// by trigger, and a time axis. Hovering shows a dump, a click opens it, a
// drag over a range opens the diff between the dumps at its ends, and the
// keyboard does the same (arrows move between dumps, Enter opens, Shift+
// arrows stretch a range). The peak is marked: the highest dump, and where
// the dumps counted it the exact peak at its own moment (a click opens the
// dump nearest to it). With thousands of dumps the
// lines keep the lowest and highest point per pixel column, so spikes stay
// visible; hovering still reaches every dump. Numbers judged here come from
// the server (estimates, intervals, the peak); this module only draws.
"use strict";
const hdTimeline = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  const { bytes, duration, escapeText } = hdFormat;
  const TRIGGERS = {
    interval: ["#7f8c8d", "circle"], "high-water": ["#e67e22", "triangle"], manual: ["#2980b9", "square"],
    signal: ["#8e44ad", "diamond"], final: ["#222", "square"], "memory-limit": ["#c0392b", "triangle"],
  };
  const LEFT = 72, RIGHT = 16, LIVE_H = 190, RATE_H = 64, GAP = 26, MARKS_H = 16, AXIS_H = 30, COST_H = 34;

  function el(tag, attrs, parent, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  // Ticks at 1, 2 or 5 times a power of ten, about `count` of them.
  function ticks(max, count) {
    if (max <= 0) return [0];
    const raw = max / count, power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
    const out = [];
    for (let v = 0; v <= max + step * 1e-9; v += step) out.push(v);
    return out;
  }
  // Byte ticks in whole binary units, the last at or above `max`.
  function byteTicks(max) {
    if (max <= 0) return [0, 1];
    const unit = Math.pow(1024, Math.max(0, Math.floor(Math.log(max) / Math.log(1024))));
    const list = ticks(max / unit, 4);
    if (list[list.length - 1] < max / unit) list.push(2 * list[list.length - 1] - list[list.length - 2]);
    return list.map((v) => v * unit);
  }
  // What leaving the profiler on costs (dumps of format 5 on): between two
  // dumps, the share of the time spent sampling (darker is more), and at
  // the right what the newest dump says it cost so far.
  function costBand(svg, dumps, xs, top, width, plotW) {
    el("text", { x: 4, y: top + 10, class: "title cost-title" }, svg, "profiler cost");
    const share = dumps.map((d, i) => {
      const p = dumps[i - 1];
      if (i === 0 || !d.cost || !p.cost || d.cost.run_ns <= p.cost.run_ns) return null;
      return Math.max(0, d.cost.sampling_ns - p.cost.sampling_ns) / (d.cost.run_ns - p.cost.run_ns);
    });
    const most = Math.max(1e-6, ...share.filter((s) => s !== null));
    for (const i of thinned(xs, share.map((s) => s || 0), plotW)) {
      if (share[i] === null) continue;
      const x0 = xs[Math.max(0, i - 1)], w = Math.max(1, xs[i] - x0 - 0.5);
      el("rect", { x: x0, y: top + 2, width: w, height: 10, class: "cost-band",
        "fill-opacity": (0.15 + 0.85 * share[i] / most).toFixed(3) }, svg);
    }
    const last = dumps.filter((d) => d.cost).pop().cost;
    const percent = last.sampling_share === null ? "" : " (" + (100 * last.sampling_share).toFixed(2) + " % of the run)";
    const mib = (b) => (b / 1048576).toFixed(1) + " MiB";
    el("text", { x: width - RIGHT, y: top + 26, class: "tick cost-summary", "text-anchor": "end" }, svg,
      "so far: sampling ≈ " + duration(last.sampling_ns / 1e9) + percent + ", own memory " + mib(last.own_memory_bytes) +
      " mapped, " + last.dumps_written + " dumps written (" + mib(last.dump_bytes) + ", " + duration(last.dump_ns / 1e9) + ")");
  }

  // Indices to draw: all, or per pixel column the lowest and highest.
  function thinned(xs, ys, width) {
    const all = xs.map((_, i) => i);
    if (xs.length <= width) return all;
    const columns = new Map();
    for (const i of all) {
      const c = Math.round(xs[i] / 2);
      const m = columns.get(c);
      if (!m) columns.set(c, [i, i]);
      else { if (ys[i] < ys[m[0]]) m[0] = i; if (ys[i] > ys[m[1]]) m[1] = i; }
    }
    const keep = new Set();
    for (const [lo, hi] of columns.values()) { keep.add(lo); keep.add(hi); }
    keep.add(0); keep.add(xs.length - 1);
    return Array.from(keep).sort((a, b) => a - b);
  }
  function shape(parent, kind, x, y, r, colour, cls) {
    if (kind === "circle") return el("circle", { cx: x, cy: y, r, fill: colour, class: cls }, parent);
    if (kind === "square") return el("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r, fill: colour, class: cls }, parent);
    const points = kind === "triangle" ? [[x, y - r - 1], [x + r + 1, y + r], [x - r - 1, y + r]]
      : [[x, y - r - 1], [x + r + 1, y], [x, y + r + 1], [x - r - 1, y]];
    return el("polygon", { points: points.map((p) => p.join(",")).join(" "), fill: colour, class: cls }, parent);
  }

  // The moment a process's times count from: its profiler's start where
  // the dumps know it, else its first dump.
  function origin(dumps) {
    const first = dumps[0], start = first.start_unix_ns;
    return start > 0 && start <= first.time_unix_ns ? start : first.time_unix_ns;
  }

  // dumps: the process's rows (oldest first); peakId: the server's peak;
  // hooks: open(id), range(baseId, newId), tip(html or null, x, y);
  // exactPeak: the exact peak where the dumps counted it ({bytes,
  // at_unix_ns, margin_bytes, nearest}), marked at its own moment.
  function draw(container, dumps, peakId, hooks, exactPeak) {
    const width = Math.max(560, (container.clientWidth || 900) - 2); // inside its 1 px border
    const plotW = width - LEFT - RIGHT;
    const costs = dumps.some((d) => d.cost);
    const height = LIVE_H + GAP + RATE_H + MARKS_H + AXIS_H + 8 + (costs ? COST_H : 0);
    const svg = el("svg", { width, height, class: "timeline", tabindex: 0, role: "img",
      "aria-label": "live heap and allocation rate over time: arrows move between dumps, Enter opens one, Shift+arrows select a range, Enter opens its diff" });
    // Time counts from the process's start (as the age bars and
    // `since_start_ns` do), the first dump marked; from the first dump
    // where the start is not known.
    const t0 = origin(dumps), fromStart = t0 !== dumps[0].time_unix_ns;
    const span = (dumps[dumps.length - 1].time_unix_ns - t0) / 1e9;
    const seconds = dumps.map((d, i) => (span > 0 ? (d.time_unix_ns - t0) / 1e9 : i));
    const spanX = span > 0 ? span : Math.max(1, dumps.length - 1);
    const X = (s) => LEFT + (s / spanX) * plotW;
    const xs = seconds.map(X);
    // Labels drawn so far (boxes estimated from their length), so that no
    // two overlap: a label that would is moved down a line at a time.
    const placed = [];
    function placeLabel(parent, label, px, y, charW, cls) {
      const w = charW * label.length, x = Math.max(LEFT, Math.min(px + 8, width - RIGHT - w));
      const hits = (b) => x < b.x + b.w && b.x < x + w && Math.abs(y - b.y) < 14;
      while (placed.some(hits)) y += 14;
      placed.push({ x, y, w });
      return el("text", { x, y, class: cls }, parent, label);
    }

    // ---- live heap -----------------------------------------------------------
    let liveMax = 0;
    for (const d of dumps) liveMax = Math.max(liveMax, d.live_high, d.live_exact || 0);
    if (exactPeak) liveMax = Math.max(liveMax, exactPeak.bytes);
    const yTicks = byteTicks(liveMax || 1), top = yTicks[yTicks.length - 1] || 1;
    const Y = (v) => 22 + (LIVE_H - 22) * (1 - v / top);
    el("text", { x: 4, y: 10, class: "title" }, svg, "live heap");
    for (const v of yTicks) {
      el("line", { x1: LEFT, x2: width - RIGHT, y1: Y(v), y2: Y(v), class: "grid" }, svg);
      el("text", { x: LEFT - 6, y: Y(v) + 3, class: "tick", "text-anchor": "end" }, svg, bytes(v));
    }
    const estimates = dumps.map((d) => d.live_estimate);
    const keep = thinned(xs, estimates, plotW);
    const path = (idx, value) => idx.map((i) => xs[i].toFixed(1) + "," + Y(value(i)).toFixed(1)).join(" ");
    const upper = path(keep, (i) => dumps[i].live_high);
    const lower = path(keep.slice().reverse(), (i) => dumps[i].live_low);
    el("polygon", { points: upper + " " + lower, class: "band" }, svg);
    el("polyline", { points: path(keep, (i) => estimates[i]), class: "estimate" }, svg);
    const exactIdx = keep.filter((i) => dumps[i].live_exact !== null && dumps[i].live_exact !== undefined);
    if (exactIdx.length) el("polyline", { points: path(exactIdx, (i) => dumps[i].live_exact), class: "exact" }, svg);
    const few = keep.length <= 400;
    for (const i of keep) {
      const d = dumps[i];
      if (few) el("circle", { cx: xs[i], cy: Y(estimates[i]), r: 3, class: "point estimate-point", "data-id": d.id }, svg);
      if (few && d.live_exact !== null && d.live_exact !== undefined) {
        el("circle", { cx: xs[i], cy: Y(d.live_exact), r: 2.5, class: "point exact-point", "data-id": d.id }, svg);
      }
    }
    const peakAt = dumps.findIndex((d) => d.id === peakId);
    if (peakAt >= 0) {
      const p = dumps[peakAt], v = p.live_exact !== null && p.live_exact !== undefined ? p.live_exact : p.live_estimate;
      const px = xs[peakAt], py = Y(v);
      const mark = el("g", { class: "peak-mark", "data-id": p.id }, svg);
      shape(mark, "triangle", px, py - 9, 5, "#c0392b");
      const label = "peak " + bytes(v);
      placeLabel(mark, label, px, Math.max(10, py - 8), 7, "peak-label");
      mark.addEventListener("mousedown", (e) => e.stopPropagation());
      mark.addEventListener("click", (e) => { e.stopPropagation(); hooks.open(p.id); });
    }

    if (exactPeak) {
      // Between dumps the heap may have been higher than any dump saw.
      const px = Math.max(LEFT, Math.min(width - RIGHT, X((exactPeak.at_unix_ns - t0) / 1e9))), py = Y(exactPeak.bytes);
      const mark = el("g", { class: "exact-peak-mark", "data-nearest": exactPeak.nearest }, svg);
      el("line", { x1: px, x2: px, y1: py, y2: Y(0), class: "exact-peak-line" }, mark);
      shape(mark, "diamond", px, py, 4, "#2c3e50");
      const label = "exact peak " + bytes(exactPeak.bytes);
      placeLabel(mark, label, px, Math.max(10, py + 4), 6, "exact-peak-label");
      mark.addEventListener("mousedown", (e) => e.stopPropagation());
      mark.addEventListener("click", (e) => { e.stopPropagation(); hooks.open(exactPeak.nearest); });
    }

    if (fromStart) {
      const fx = xs[0];
      el("line", { x1: fx, x2: fx, y1: 22, y2: Y(0), class: "first-dump-line" }, svg);
      placeLabel(svg, "first dump", fx, Y(0) - 4, 5.5, "first-dump-label");
    }

    // ---- allocation rate ---------------------------------------------------------
    const rateTop = LIVE_H + GAP;
    const rates = dumps.map((d, i) => {
      if (i === 0) return null;
      const dt = (d.time_unix_ns - dumps[i - 1].time_unix_ns) / 1e9;
      const db = d.allocated_exact - dumps[i - 1].allocated_exact;
      return dt > 0 && db >= 0 ? db / dt : null;
    });
    const rateMax = Math.max(1, ...rates.filter((r) => r !== null));
    el("text", { x: 4, y: rateTop - 6, class: "title" }, svg, "allocation rate (exact, bytes requested per second)");
    el("text", { x: LEFT - 6, y: rateTop + 8, class: "tick", "text-anchor": "end" }, svg, bytes(rateMax) + "/s");
    el("line", { x1: LEFT, x2: width - RIGHT, y1: rateTop + RATE_H, y2: rateTop + RATE_H, class: "grid" }, svg);
    const rateKeep = thinned(xs, rates.map((r) => r || 0), plotW);
    for (const i of rateKeep) {
      if (rates[i] === null) continue;
      const h = (RATE_H - 4) * rates[i] / rateMax;
      const x0 = xs[Math.max(0, i - 1)], w = Math.max(1, xs[i] - x0 - 0.5);
      el("rect", { x: x0, y: rateTop + RATE_H - h, width: w, height: h, class: "rate" }, svg);
    }

    // ---- trigger marks and the time axis ------------------------------------------
    const marksY = rateTop + RATE_H + 10;
    for (const i of keep) {
      const [colour, kind] = TRIGGERS[dumps[i].trigger] || ["#999", "circle"];
      shape(svg, kind, xs[i], marksY, 3.5, colour, "trigger trigger-" + dumps[i].trigger);
    }
    const axisY = marksY + MARKS_H;
    el("line", { x1: LEFT, x2: width - RIGHT, y1: axisY - 6, y2: axisY - 6, class: "axis" }, svg);
    if (span > 0) {
      for (const s of ticks(span, Math.max(2, Math.floor(plotW / 110)))) {
        el("line", { x1: X(s), x2: X(s), y1: axisY - 6, y2: axisY - 2, class: "axis" }, svg);
        const anchor = X(s) > width - RIGHT - 24 ? "end" : "middle"; // the last one stays inside
        el("text", { x: anchor === "end" ? width - 2 : X(s), y: axisY + 8, class: "tick time-tick", "text-anchor": anchor }, svg, "+" + duration(s));
      }
    }
    el("text", { x: width - RIGHT, y: axisY + 22, class: "tick", "text-anchor": "end" }, svg,
      span <= 0 ? "dumps in order (all written at the same time)"
        : fromStart ? "time since the process started (first dump at +" + duration(seconds[0]) + ")" : "time since the first dump");

    if (costs) costBand(svg, dumps, xs, axisY + 30, width, plotW);

    // ---- hover, click, drag, keyboard ------------------------------------------------
    const cursor = el("line", { x1: 0, x2: 0, y1: 4, y2: axisY - 6, class: "cursor", visibility: "hidden" }, svg);
    const range = el("rect", { x: 0, y: 4, width: 0, height: axisY - 10, class: "range", visibility: "hidden" }, svg);
    const nearest = (x) => {
      let lo = 0, hi = xs.length - 1;
      while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (xs[mid] < x) lo = mid; else hi = mid; }
      return Math.abs(xs[lo] - x) <= Math.abs(xs[hi] - x) ? lo : hi;
    };
    const describe = (i) => {
      const d = dumps[i];
      const exact = d.live_exact !== null && d.live_exact !== undefined ? "<br>exact: " + bytes(d.live_exact) + " usable" : "";
      const band = d.live_exact_sampling ? " (every allocation sampled)" : " [" + bytes(d.live_low) + ", " + bytes(d.live_high) + "]";
      return "<b>" + escapeText(d.id) + "</b><br>" + escapeText(d.trigger) + " #" + d.trigger_seq + ", +" +
        duration(seconds[i]) + "<br>live (estimate, requested): " + bytes(d.live_estimate) + band + exact +
        (rates[i] !== null ? "<br>allocating " + bytes(rates[i]) + "/s since the previous dump" : "") +
        '<br><span class="note">' + escapeText(d.live_note) + "</span><br><i>click to open, drag to compare a range</i>";
    };
    let current = null, anchor = null, dragFrom = null;
    function show(i, clientX, clientY) {
      current = i;
      cursor.setAttribute("x1", xs[i]); cursor.setAttribute("x2", xs[i]);
      cursor.setAttribute("visibility", "visible");
      hooks.tip(describe(i), clientX, clientY);
    }
    function showRange(a, b) {
      const x0 = Math.min(xs[a], xs[b]), x1 = Math.max(xs[a], xs[b]);
      range.setAttribute("x", x0); range.setAttribute("width", Math.max(1, x1 - x0));
      range.setAttribute("visibility", "visible");
    }
    const toX = (e) => e.clientX - svg.getBoundingClientRect().left;
    svg.addEventListener("mousemove", (e) => {
      const i = nearest(toX(e));
      show(i, e.clientX, e.clientY);
      if (dragFrom !== null) showRange(nearest(dragFrom), i);
    });
    svg.addEventListener("mouseleave", () => { cursor.setAttribute("visibility", "hidden"); hooks.tip(null); });
    svg.addEventListener("mousedown", (e) => { dragFrom = toX(e); e.preventDefault(); });
    svg.addEventListener("mouseup", (e) => {
      if (dragFrom === null) return;
      const from = dragFrom, to = toX(e);
      dragFrom = null;
      range.setAttribute("visibility", "hidden");
      const a = nearest(Math.min(from, to)), b = nearest(Math.max(from, to));
      if (Math.abs(to - from) > 4 && a !== b) hooks.range(dumps[a].id, dumps[b].id);
      else hooks.open(dumps[nearest(to)].id);
    });
    svg.addEventListener("keydown", (e) => {
      const step = { ArrowLeft: -1, ArrowRight: 1, Home: -Infinity, End: Infinity }[e.key];
      if (step !== undefined) {
        e.preventDefault();
        const from = current === null ? dumps.length - 1 : current;
        const to = Math.max(0, Math.min(dumps.length - 1, from + step));
        if (e.shiftKey) { if (anchor === null) anchor = from; showRange(anchor, to); }
        else { anchor = null; range.setAttribute("visibility", "hidden"); }
        const r = svg.getBoundingClientRect();
        show(to, r.left + xs[to], r.top + Y(estimates[to]));
      } else if (e.key === "Enter" && current !== null) {
        e.preventDefault();
        if (anchor !== null && anchor !== current) {
          hooks.range(dumps[Math.min(anchor, current)].id, dumps[Math.max(anchor, current)].id);
        } else hooks.open(dumps[current].id);
      } else if (e.key === "Escape") {
        anchor = null; range.setAttribute("visibility", "hidden"); hooks.tip(null);
      }
    });
    svg.addEventListener("blur", () => hooks.tip(null));
    container.replaceChildren(svg, legend());
    // Where dump `id` is drawn, in client coordinates (tests, scripts).
    return {
      pointOf(id) {
        const i = dumps.findIndex((d) => d.id === id);
        if (i < 0) return null;
        const r = svg.getBoundingClientRect();
        return { x: r.left + xs[i], y: r.top + Y(estimates[i]) };
      },
      drawnPoints: keep.length,
    };
  }
  function legend() {
    const div = document.createElement("div");
    div.className = "timeline-legend";
    const item = (cls, text) => '<span><span class="key ' + cls + '"></span>' + text + "</span>";
    div.innerHTML = item("key-estimate", "live heap estimated from the samples (requested bytes), 95 % band") +
      item("key-exact", "exact live heap (usable bytes: what the allocator reserved)") +
      item("key-rate", "allocation rate") +
      Object.keys(TRIGGERS).map((t) => '<span><span class="key" style="background:' + TRIGGERS[t][0] + '"></span>' + t + "</span>").join("") +
      '<span><span class="key key-peak"></span>peak</span>' +
      '<span><span class="key key-exact-peak"></span>exact peak (between dumps too)</span>';
    return div;
  }
  return { origin, draw };
})();
