// heapdiff serve's front page: per process its timeline (hdTimeline), the
// peak one click away, the functions that grow (hdGrowth) and its dumps in
// pages; refreshed every two seconds while a process may still write (no
// exit dump yet), so new dumps appear while the program runs. `#process=KEY` in the URL picks a process (the viewer's "timeline"
// link).
"use strict";
(function () {
  const PAGE = 50;
  const selected = [], times = new Map(), pages = new Map();
  const timelines = new Map();
  let last = "", data = null, firstPaintMs = null;
  const $ = (id) => document.getElementById(id);
  const { bytes, duration, escapeText } = hdFormat;

  function fmtTime(ns) { return new Date(ns / 1e6).toISOString().replace("T", " ").replace("Z", ""); }
  function text(tag, content, attrs) {
    const e = document.createElement(tag);
    if (content !== undefined) e.textContent = content;
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }
  function link(label, href, cls) { return text("a", label, { href, class: cls }); }
  function viewUrl(id, base) {
    return "/view?dump=" + encodeURIComponent(id) + (base ? "&base=" + encodeURIComponent(base) : "");
  }
  function pprofUrl(id) { return "/pprof/" + id.split("/").map(encodeURIComponent).join("/"); }
  const tip = $("tip");
  function showTip(html, x, y) {
    if (html === null) { tip.hidden = true; return; }
    tip.innerHTML = html;
    tip.hidden = false;
    tip.style.left = Math.max(0, Math.min(x + 14, window.innerWidth - tip.offsetWidth - 6)) + "px";
    tip.style.top = Math.max(0, Math.min(y + 14, window.innerHeight - tip.offsetHeight - 6)) + "px";
  }
  const chosen = () => new URLSearchParams(location.hash.slice(1)).get("process");

  // The exact counter beside the estimate in usable bytes (the server's
  // verdict; the words are in each cell's title).
  const AGREEMENT = {
    "within": () => "agree",
    "above": (d) => "exact " + bytes(d.live_gap) + " above: not in any sample",
    "below": (d) => "exact " + bytes(d.live_gap) + " below the interval",
    "no-live-sample": () => "exact: memory no sample caught",
    "not-counted": () => "",
  };
  function liveText(d) {
    if (d.live_exact_sampling) return bytes(d.live_estimate) + " (every allocation sampled)";
    if (d.samples_live === 0) return "0 B (no live sample)";
    return bytes(d.live_estimate) + " [" + bytes(d.live_low) + ", " + bytes(d.live_high) + "]";
  }
  // The processes whose ranges open what they allocated (kept across
  // refreshes of the list).
  const bornRanges = new Set();
  // Where the dumps of a process carry births, what a range of its
  // timeline opens: the diff of its ends, or what it allocated that is
  // still live at its end. None otherwise (a range is a diff).
  function rangeMode(p) {
    if (p.dumps.length < 2 || !p.dumps.every((d) => d.births)) return null;
    const element = text("fieldset", undefined, { class: "range-mode" });
    element.appendChild(text("legend", "a range dragged on the timeline opens"));
    const choice = (value, label, checked) => {
      const l = text("label");
      const input = text("input", undefined, { type: "radio", name: "range-" + p.key, value, class: "range-" + value });
      input.checked = checked;
      l.append(input, " " + label);
      element.appendChild(l);
      return input;
    };
    const wasBorn = bornRanges.has(p.key);
    choice("diff", "the diff of its ends", !wasBorn);
    const born = choice("born", "what it allocated that is still live at its end", wasBorn);
    element.addEventListener("change", () => { if (born.checked) bornRanges.add(p.key); else bornRanges.delete(p.key); });
    return { element, born: () => born.checked };
  }
  function actions(p) {
    const div = text("div", undefined, { class: "actions" });
    const dumps = p.dumps, first = dumps[0], latest = dumps[dumps.length - 1], t0 = hdTimeline.origin(dumps);
    const at = dumps.findIndex((d) => d.id === p.peak);
    if (at >= 0) {
      const peak = dumps[at];
      const live = peak.live_exact !== null ? bytes(peak.live_exact) + " (exact)" : bytes(peak.live_estimate);
      div.appendChild(link("peak: " + live + " live at +" + duration((peak.time_unix_ns - t0) / 1e9),
        viewUrl(peak.id), "peak"));
      if (at > 0) div.appendChild(link("what made the peak (diff with the dump before)", viewUrl(peak.id, dumps[at - 1].id), "peak-diff"));
    }
    const exact = p.exact_peak;
    if (exact) {
      div.appendChild(link("exact peak: " + bytes(exact.bytes) + " at +" + duration((exact.at_unix_ns - t0) / 1e9) +
        " (the dump nearest to it)", viewUrl(exact.nearest), "exact-peak"));
    }
    if (dumps.length > 1) div.appendChild(link("diff first → last", viewUrl(latest.id, first.id), "whole"));
    div.appendChild(link("latest dump", viewUrl(latest.id), "latest"));
    div.appendChild(link("latest as pprof (for scrapers)", "/debug/pprof/heap?pid=" + p.pid, "scrape"));
    return div;
  }
  function dumpTable(p, section) {
    const details = text("details", undefined, { class: "dump-list" });
    details.open = p.dumps.length <= PAGE;
    details.appendChild(text("summary", p.dumps.length + " dumps"));
    const pager = text("div", undefined, { class: "pager" });
    const table = text("table", undefined, { class: "dumps" });
    details.append(pager, table);
    // Pages are counted back from the newest dump, so the newest page
    // (shown first) is a full one and the oldest holds the rest.
    const pageCount = Math.ceil(p.dumps.length / PAGE);
    const bounds = (page) => {
      const end = p.dumps.length - (pageCount - 1 - page) * PAGE;
      return [Math.max(0, end - PAGE), end];
    };
    const show = (page) => {
      pages.set(p.key, page);
      pager.replaceChildren();
      const [from, to] = bounds(page);
      if (pageCount > 1) {
        const older = text("button", "older", { class: "older" }), newer = text("button", "newer", { class: "newer" });
        older.disabled = page === 0; newer.disabled = page === pageCount - 1;
        older.onclick = () => show(page - 1); newer.onclick = () => show(page + 1);
        pager.append(older, text("span", "dumps " + (from + 1) + "–" + to + " of " + p.dumps.length), newer);
      }
      table.replaceChildren(header());
      for (const d of p.dumps.slice(from, to)) table.appendChild(row(d));
    };
    show(Math.min(pages.has(p.key) ? pages.get(p.key) : pageCount - 1, pageCount - 1));
    section.appendChild(details);
  }
  function header() {
    const head = text("tr");
    for (const h of ["", "dump", "trigger", "time (UTC)", "live heap (estimate, requested bytes, 95 %)", "exact live (usable bytes)", "the two", "allocated", "samples", "stacks", ""]) {
      head.appendChild(text("th", h));
    }
    return head;
  }
  function row(d) {
    const tr = text("tr", undefined, { "data-id": d.id, class: "dump" });
    const box = text("input", undefined, { type: "checkbox", class: "pick", "aria-label": "select " + d.id });
    box.checked = selected.includes(d.id);
    box.addEventListener("change", () => pick(d, box.checked));
    const td0 = text("td"); td0.appendChild(box); tr.appendChild(td0);
    // A long id keeps its end (sequence and trigger), the whole on hover.
    const name = text("td", undefined, { class: "name", title: d.id });
    name.appendChild(link(d.id.length > 24 ? "…" + d.id.slice(-23) : d.id, viewUrl(d.id), "open"));
    tr.appendChild(name);
    tr.appendChild(text("td", d.trigger + " #" + d.trigger_seq));
    tr.appendChild(text("td", fmtTime(d.time_unix_ns).slice(11), { class: "time", title: fmtTime(d.time_unix_ns) }));
    // The estimate, then its interval kept whole on the next line if the
    // column is narrow.
    const live = text("td", undefined, { class: "live", title: d.live_note });
    const [estimate, interval] = liveText(d).split(/ (?=\[)/);
    live.append(estimate);
    if (interval) live.append(" ", text("span", interval, { class: "interval" }));
    tr.appendChild(live);
    tr.appendChild(text("td", d.live_exact === null ? "–" : bytes(d.live_exact), { class: "exact", title: d.live_note }));
    tr.appendChild(text("td", AGREEMENT[d.live_agreement](d), { class: "agreement", title: d.live_note }));
    tr.appendChild(text("td", bytes(d.allocated_exact)));
    tr.appendChild(text("td", String(d.samples_taken)));
    tr.appendChild(text("td", String(d.stacks)));
    const links = text("td"); links.appendChild(link("pprof", pprofUrl(d.id), "pprof")); tr.appendChild(links);
    return tr;
  }

  function render() {
    const root = $("processes");
    root.replaceChildren();
    timelines.clear();
    let count = 0;
    const wanted = chosen();
    for (const p of data.processes) {
      count += p.dumps.length;
      for (const d of p.dumps) times.set(d.id, [d.time_unix_ns, d.seq]);
      const section = text("section", undefined, { class: "process" + (p.key === wanted ? " chosen" : ""), "data-pid": p.pid, "data-key": p.key, id: "process-" + p.key });
      section.appendChild(text("h2", "pid " + p.pid + " — " + (p.command_line || p.executable) +
        " — first dump " + fmtTime(p.first_time_unix_ns)));
      const summary = text("div", undefined, { class: "process-summary" });
      section.appendChild(summary);
      section.appendChild(actions(p));
      const mode = rangeMode(p);
      if (mode) section.appendChild(mode.element);
      const chart = text("div", undefined, { class: "timeline-box" });
      section.appendChild(chart);
      const growth = text("div", undefined, { class: "growth-panel" });
      section.appendChild(growth);
      dumpTable(p, section);
      root.appendChild(section);
      timelines.set(p.key, hdTimeline.draw(chart, p.dumps, p.peak, {
        open: (id) => { location.href = viewUrl(id); },
        range: (base, id) => {
          location.href = mode && mode.born() ? viewUrl(id) + "&born_since=" + encodeURIComponent(base) : viewUrl(id, base);
        },
        tip: showTip,
      }, p.exact_peak));
      if (p.dumps.length > 1) hdGrowth.load(growth, p.key, p.dumps.length, summary);
    }
    const errors = document.querySelector("#errors tbody");
    errors.replaceChildren();
    $("errors-title").hidden = data.errors.length === 0;
    for (const e of data.errors) {
      const tr = text("tr", undefined, { class: "error", "data-id": e.id });
      tr.append(text("td", e.id), text("td", e.error));
      errors.appendChild(tr);
    }
    $("count").textContent = count + " dumps, " + data.processes.length + " processes" +
      (data.errors.length ? ", " + data.errors.length + " unreadable" : "");
    if (wanted && firstPaintMs === null) {
      const section = document.getElementById("process-" + wanted);
      if (section) section.scrollIntoView();
    }
  }

  function pick(d, on) {
    const i = selected.indexOf(d.id);
    if (on && i < 0) selected.push(d.id);
    if (!on && i >= 0) selected.splice(i, 1);
    while (selected.length > 2) selected.shift();
    document.querySelectorAll("input.pick").forEach((b) => { b.checked = selected.includes(b.closest("tr").dataset.id); });
    $("diff").disabled = selected.length !== 2;
  }
  $("diff").addEventListener("click", () => {
    if (selected.length !== 2) return;
    const [a, b] = selected.slice().sort((x, y) => {
      const [tx, sx] = times.get(x), [ty, sy] = times.get(y);
      return tx - ty || sx - sy;
    });
    location.href = viewUrl(b, a);
  });
  let width = window.innerWidth;
  window.addEventListener("resize", () => {
    if (data && Math.abs(window.innerWidth - width) > 40) { width = window.innerWidth; render(); }
  });

  // Polls every two seconds while some process may still write: one
  // without an exit dump, or no dump at all yet. The server answers 304
  // to the version held (ETag), so an unchanged list costs no parse.
  let etag = null, timer = null, polls = 0;
  const writing = () => !data || data.processes.length === 0 ||
    data.processes.some((p) => !p.dumps.some((d) => d.trigger === "final"));
  async function refresh() {
    polls++;
    try {
      const response = await fetch("/api/dumps", { headers: etag ? { "If-None-Match": etag } : {} });
      if (response.status !== 304) {
        const body = await response.text();
        etag = response.headers.get("ETag");
        if (body !== last) { last = body; data = JSON.parse(body); render(); }
      }
      if (firstPaintMs === null) {
        await new Promise((r) => requestAnimationFrame(() => r()));
        firstPaintMs = Math.round(performance.now());
      }
    } catch (e) { $("count").textContent = "server unreachable"; }
    schedule();
  }
  function schedule() {
    clearTimeout(timer);
    timer = null;
    const still = writing();
    $("polling").hidden = still;
    if (still) timer = setTimeout(refresh, 2000);
  }
  $("poll-again").addEventListener("click", refresh);
  refresh();
  // What tests and scripts may read.
  window.heapdiffIndex = {
    get firstPaintMs() { return firstPaintMs; },
    get polling() { return timer !== null; },
    get polls() { return polls; },
    pointOf: (key, id) => timelines.get(key) && timelines.get(key).pointOf(id),
    drawnPoints: (key) => timelines.get(key) && timelines.get(key).drawnPoints,
  };
})();
