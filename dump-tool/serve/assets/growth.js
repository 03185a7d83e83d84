// The "growing" panel of a process: the functions whose live memory grows
// significantly from its first dump to its last (the server measures them
// with the reports' rule: /api/growth), each with a sparkline of its value
// across the series, its change with the 95 % interval, and whether it
// still grows in the second half or levelled off, and where the dumps carry
// births its class from the births of its live memory in the last dump:
// accumulating (a leak candidate), recent only (a cache or working set that
// turns over) or start-up, and its live bytes there per birth slice (the
// viewer's age bars, hdAges). A name opens the diff of the first and last
// dumps with that function searched for.
"use strict";
const hdGrowth = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  const { bytes, signed, escapeText } = hdFormat;
  const loaded = new Map();

  function sparkline(values, lows, highs) {
    const W = 120, H = 26, max = Math.max(1, ...highs);
    const X = (i) => 2 + (values.length > 1 ? i / (values.length - 1) : 0.5) * (W - 4);
    const Y = (v) => H - 2 - (H - 4) * v / max;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("class", "sparkline");
    const band = values.map((_, i) => X(i) + "," + Y(highs[i])).concat(values.map((_, i) => i).reverse().map((i) => X(i) + "," + Y(lows[i])));
    svg.innerHTML = '<polygon class="band" points="' + band.join(" ") + '"></polygon><polyline class="estimate" points="' +
      values.map((v, i) => X(i) + "," + Y(v)).join(" ") + '"></polyline>';
    return svg;
  }
  function viewUrl(id, base, search) {
    return "/view?dump=" + encodeURIComponent(id) + (base ? "&base=" + encodeURIComponent(base) : "") +
      (search ? "#q=" + encodeURIComponent(search) : "");
  }
  const KINDS = { accumulating: "leak candidate (accumulating)", "recent-only": "cache or working set (recent only)",
    "start-up": "start-up state", empty: "nothing live" };
  // The class cell: the words, and the births behind them on hover.
  function kind(f) {
    if (!f.class) return '<td class="kind"></td>';
    const [startup, older, newer] = f.born;
    const why = "live bytes in the last dump born in the start-up window: " + bytes(startup) +
      ", in the older half of the rest: " + bytes(older) + ", in the newer half: " + bytes(newer);
    return '<td class="kind kind-' + escapeText(f.class) + '" data-class="' + escapeText(f.class) + '" title="' + escapeText(why) + '">' +
      escapeText(KINDS[f.class] || f.class) + "</td>";
  }
  // The program's own function that called into the allocating one, when
  // it is another (`svc::Ledger::record ← via std::make_unique<…>`): what
  // the row leads with, as `heapdiff leaks` prints it.
  function programFirst(f) {
    if (!f.program_frame || f.program_frame === f.label) return "";
    return '<span class="program" title="the program\'s own frame (the innermost outside the runtime and system libraries)">' +
      escapeText(f.program_frame) + '</span> <span class="via">← via</span> ';
  }
  function render(panel, report) {
    const first = report.dumps[0], last = report.dumps[report.dumps.length - 1];
    const head = '<h3>Growing across the series</h3><p class="hint">Functions (where memory was allocated) whose live memory grew ' +
      "significantly from the first dump to the last (95 %), measured on " + report.dumps.length + " dumps" +
      (report.without_exit_dump ? " (the exit dump left out: programs often free everything on the way out)" : "") + ".</p>";
    if (!report.functions.length) {
      panel.innerHTML = head + '<p class="none">No function grows significantly from the first dump to the last.</p>';
      return;
    }
    const classified = report.functions.some((f) => f.class);
    panel.innerHTML = head + '<table class="growing"><thead><tr><th>program frame ← via function</th><th>over time</th><th>first → last</th>' +
      "<th>change (95 %)</th><th>trend</th>" + (classified ? "<th>kind</th><th title=\"live bytes in the last dump per birth slice of its run\">by birth</th>" : "") + "</tr></thead><tbody></tbody></table>";
    const body = panel.querySelector("tbody");
    for (const f of report.functions) {
      const tr = document.createElement("tr");
      tr.className = "grows";
      tr.dataset.name = f.label;
      if (f.program_frame) tr.dataset.program = f.program_frame;
      tr.innerHTML = '<td class="name">' + programFirst(f) + '<a href="' + escapeText(viewUrl(last, first, f.label)) + '" title="' + escapeText(f.full) + '">' +
        escapeText(f.label) + '</a></td><td class="spark"></td><td>' + bytes(f.values[0]) + " → " + bytes(f.values[f.values.length - 1]) +
        "</td><td class=\"change\">" + signed(f.change, "bytes") + ' <span class="interval">[' + signed(f.change_low, "bytes") + ", " + signed(f.change_high, "bytes") + "]</span></td>" +
        '<td class="trend">' + (f.still_growing ? "still growing" : "levelled off") + "</td>" + (classified ? kind(f) + '<td class="ages"></td>' : "");
      tr.querySelector(".spark").appendChild(sparkline(f.values, f.lows, f.highs));
      if (f.born_slices) tr.querySelector("td.ages").appendChild(hdAges.bars(f.born_slices, report.slices_ns));
      body.appendChild(tr);
    }
  }
  // The process summary at the top of its section: the lines `heapdiff
  // leaks` prints for the same dumps, as the server wrote them (never
  // recomputed here).
  function renderSummary(box, report) {
    if (!box) return;
    box.replaceChildren();
    for (const line of report.summary_lines || []) {
      const p = document.createElement("p");
      p.className = "summary-line";
      p.textContent = line;
      box.appendChild(p);
    }
  }
  // Fill `panel` (and the summary `box`) with the report of the process
  // whose first dump is `key` and that has `count` dumps (fetched again
  // only when that changes).
  async function load(panel, key, count, box) {
    const known = loaded.get(key);
    if (known && known.count === count) { render(panel, known.report); renderSummary(box, known.report); return; }
    panel.innerHTML = '<h3>Growing across the series</h3><p class="hint">measuring…</p>';
    try {
      const response = await fetch("/api/growth?process=" + encodeURIComponent(key));
      if (!response.ok) throw new Error(await response.text());
      const report = await response.json();
      loaded.set(key, { count, report });
      render(panel, report);
      renderSummary(box, report);
    } catch (e) {
      panel.innerHTML = '<h3>Growing across the series</h3><p class="error">' + escapeText(String(e.message || e)) + "</p>";
    }
  }
  return { load };
})();
