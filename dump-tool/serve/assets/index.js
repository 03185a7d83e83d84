// heapdiff serve's dump list: processes with their timelines and dumps,
// refreshed every two seconds so new dumps appear while the program runs.
"use strict";
(function () {
  const selected = [];
  let last = "";
  const $ = (id) => document.getElementById(id);

  function fmtBytes(v) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, x = Math.abs(v);
    while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    return (v < 0 ? "-" : "") + (i === 0 ? x.toFixed(0) : x.toFixed(x < 10 ? 2 : 1)) + " " + units[i];
  }
  function fmtTime(ns) { return new Date(ns / 1e6).toISOString().replace("T", " ").replace("Z", ""); }
  function text(tag, content, attrs) {
    const e = document.createElement(tag);
    if (content !== undefined) e.textContent = content;
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    return e;
  }
  function viewUrl(id, base) {
    return "/view?dump=" + encodeURIComponent(id) + (base ? "&base=" + encodeURIComponent(base) : "");
  }
  function pprofUrl(id) { return "/pprof/" + id.split("/").map(encodeURIComponent).join("/"); }

  // A small line chart: series of [x, y] with an optional band [x, lo, hi].
  const SVG = "http://www.w3.org/2000/svg";
  function chart(title, dumps, series, format) {
    const W = 320, H = 120, L = 56, B = 16, T = 14;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("class", "chart");
    const xs = dumps.map((d) => d.time_unix_ns);
    const x0 = Math.min(...xs), x1 = Math.max(...xs);
    let ymax = 0;
    for (const s of series) for (const p of s.points) ymax = Math.max(ymax, p.hi !== undefined ? p.hi : p.y);
    if (ymax <= 0) ymax = 1;
    const X = (x) => L + (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5) * (W - L - 8);
    const Y = (y) => H - B - (y / ymax) * (H - B - T);
    const add = (tag, attrs, content) => {
      const e = document.createElementNS(SVG, tag);
      for (const k in attrs) e.setAttribute(k, attrs[k]);
      if (content !== undefined) e.textContent = content;
      svg.appendChild(e); return e;
    };
    add("text", { x: 4, y: 11 }, title);
    add("text", { x: 4, y: T + 8 }, format(ymax));
    add("text", { x: 4, y: H - B }, format(0));
    add("line", { x1: L, x2: W - 4, y1: H - B, y2: H - B, stroke: "#bbb" });
    for (const s of series) {
      const pts = s.points;
      if (s.band && pts.length) {
        const upper = pts.map((p) => X(p.x) + "," + Y(p.hi));
        const lower = pts.slice().reverse().map((p) => X(p.x) + "," + Y(p.lo));
        add("polygon", { points: upper.concat(lower).join(" "), fill: s.colour, "fill-opacity": 0.2, stroke: "none" });
      }
      add("polyline", { points: pts.map((p) => X(p.x) + "," + Y(p.y)).join(" "), fill: "none", stroke: s.colour, "stroke-width": 1.5 });
      pts.forEach((p, i) => {
        const c = add("circle", { cx: X(p.x), cy: Y(p.y), r: 3.5, fill: s.colour, "data-id": p.id, class: "point" });
        const t = document.createElementNS(SVG, "title");
        t.textContent = s.label + ": " + format(p.y) + (s.band ? " (95% " + format(p.lo) + " – " + format(p.hi) + ")" : "") + "\n" + p.id + "\nclick to open";
        c.appendChild(t);
        c.addEventListener("click", () => { location.href = viewUrl(p.id); });
      });
    }
    return svg;
  }

  function render(data) {
    const root = $("processes");
    root.innerHTML = "";
    let count = 0;
    for (const p of data.processes) {
      count += p.dumps.length;
      const section = text("section", undefined, { class: "process", "data-pid": p.pid });
      section.appendChild(text("h2", "pid " + p.pid + " — " + (p.command_line || p.executable) +
        " — first dump " + fmtTime(p.first_time_unix_ns)));
      const charts = text("div", undefined, { class: "charts" });
      const live = [{ label: "live heap (estimate)", colour: "#c0392b", band: true,
        points: p.dumps.map((d) => ({ x: d.time_unix_ns, y: d.live_estimate, lo: d.live_low, hi: d.live_high, id: d.id })) }];
      const exact = p.dumps.filter((d) => d.live_exact !== null);
      if (exact.length) live.push({ label: "live heap (exact)", colour: "#2c3e50",
        points: exact.map((d) => ({ x: d.time_unix_ns, y: d.live_exact, id: d.id })) });
      charts.appendChild(chart("live heap", p.dumps, live, fmtBytes));
      charts.appendChild(chart("allocated (cumulative)", p.dumps, [{ label: "allocated", colour: "#8e44ad",
        points: p.dumps.map((d) => ({ x: d.time_unix_ns, y: d.allocated_exact, id: d.id })) }], fmtBytes));
      charts.appendChild(chart("samples taken", p.dumps, [{ label: "samples", colour: "#16a085",
        points: p.dumps.map((d) => ({ x: d.time_unix_ns, y: d.samples_taken, id: d.id })) }], (v) => Math.round(v).toString()));
      section.appendChild(charts);
      const table = text("table", undefined, { class: "dumps" });
      const head = text("tr");
      for (const h of ["", "dump", "trigger", "time", "live heap (estimate, 95%)", "exact live", "allocated", "samples", "stacks", ""]) head.appendChild(text("th", h));
      table.appendChild(head);
      for (const d of p.dumps) {
        const tr = text("tr", undefined, { "data-id": d.id, class: "dump" });
        const box = text("input", undefined, { type: "checkbox", class: "pick" });
        box.checked = selected.includes(d.id);
        box.addEventListener("change", () => pick(d, box.checked));
        const td0 = text("td"); td0.appendChild(box); tr.appendChild(td0);
        const name = text("td"); name.appendChild(text("a", d.id, { href: viewUrl(d.id), class: "open" })); tr.appendChild(name);
        tr.appendChild(text("td", d.trigger + " #" + d.trigger_seq));
        tr.appendChild(text("td", fmtTime(d.time_unix_ns)));
        tr.appendChild(text("td", fmtBytes(d.live_estimate) + (d.live_high > d.live_low ? " [" + fmtBytes(d.live_low) + ", " + fmtBytes(d.live_high) + "]" : " (exact)")));
        tr.appendChild(text("td", d.live_exact === null ? "–" : fmtBytes(d.live_exact)));
        tr.appendChild(text("td", fmtBytes(d.allocated_exact)));
        tr.appendChild(text("td", String(d.samples_taken)));
        tr.appendChild(text("td", String(d.stacks)));
        const links = text("td"); links.appendChild(text("a", "pprof", { href: pprofUrl(d.id), class: "pprof" })); tr.appendChild(links);
        table.appendChild(tr);
      }
      section.appendChild(table);
      root.appendChild(section);
    }
    const errors = document.querySelector("#errors tbody");
    errors.innerHTML = "";
    $("errors-title").hidden = data.errors.length === 0;
    for (const e of data.errors) {
      const tr = text("tr", undefined, { class: "error", "data-id": e.id });
      tr.appendChild(text("td", e.id));
      tr.appendChild(text("td", e.error));
      errors.appendChild(tr);
    }
    $("count").textContent = count + " dumps, " + data.processes.length + " processes" +
      (data.errors.length ? ", " + data.errors.length + " unreadable" : "");
  }

  const times = new Map();
  function pick(d, on) {
    times.set(d.id, [d.time_unix_ns, d.seq]);
    const i = selected.indexOf(d.id);
    if (on && i < 0) selected.push(d.id);
    if (!on && i >= 0) selected.splice(i, 1);
    while (selected.length > 2) selected.shift();
    document.querySelectorAll("input.pick").forEach((b) => {
      b.checked = selected.includes(b.closest("tr").dataset.id);
    });
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

  async function refresh() {
    try {
      const response = await fetch("/api/dumps");
      const body = await response.text();
      if (body !== last) { last = body; render(JSON.parse(body)); }
    } catch (e) { $("count").textContent = "server unreachable"; }
  }
  refresh();
  setInterval(refresh, 2000);
})();
