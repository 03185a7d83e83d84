// The lifetimes page of one dump: per allocating function, how much of
// what it allocated was freed, how much of that was temporary (freed
// within the threshold), and a strip of the lifetime buckets (1 µs to
// hours, log scale) shaded by the bytes freed in each; hovering a cell
// gives its range and estimate with the 95 % interval. Sorted by freed or
// temporary bytes. The numbers are the server's (`heapdiff lifetimes`);
// this page only draws them.
"use strict";
(function () {
  const { bytes, count, escapeText } = hdFormat;
  const $ = (id) => document.getElementById(id);
  const id = new URLSearchParams(location.search).get("dump") || "";
  const viewUrl = (extra) => "/view?dump=" + encodeURIComponent(id) + (extra || "");
  let report = null, sort = "temporary";
  const state = { ready: false };

  // A lifetime in words: "850 ns", "12 µs", "3.3 ms", "1.5 s", "2 h".
  function lifetime(ns) {
    if (ns === null || ns === undefined) return "∞";
    if (ns < 1e3) return Math.round(ns) + " ns";
    if (ns < 1e6) return +(ns / 1e3).toPrecision(3) + " µs";
    if (ns < 1e9) return +(ns / 1e6).toPrecision(3) + " ms";
    if (ns < 60e9) return +(ns / 1e9).toPrecision(3) + " s";
    if (ns < 3600e9) return +(ns / 60e9).toPrecision(3) + " min";
    return +(ns / 3600e9).toPrecision(3) + " h";
  }
  const interval = (b, unit) => (unit === "bytes" ? bytes : count)(b.estimate) +
    " [" + (unit === "bytes" ? bytes : count)(b.low) + ", " + (unit === "bytes" ? bytes : count)(b.high) + "]";
  function strip(f, buckets) {
    const max = Math.max(1, ...f.buckets.map((b) => b.freed.bytes.estimate));
    const by = new Map(f.buckets.map((b) => [b.bucket, b]));
    return buckets.map((edge) => {
      const b = by.get(edge.bucket);
      const temporary = report.temporary_ns !== null && edge.high_ns !== null && edge.high_ns <= report.temporary_ns;
      const range = lifetime(edge.low_ns) + " – " + lifetime(edge.high_ns);
      if (!b) return '<span class="' + (temporary ? "temporary" : "") + '" title="' + escapeText(range + ": nothing freed") + '"></span>';
      const shade = 0.15 + 0.85 * b.freed.bytes.estimate / max;
      return '<span data-bucket="' + b.bucket + '" class="' + (temporary ? "temporary" : "") + '" style="background: rgba(192, 57, 43, ' +
        shade.toFixed(2) + ')" title="' + escapeText(range + ": " + interval(b.freed.bytes, "bytes") + " in " +
        interval(b.freed.objects, "objects") + " objects (95 %)") + '"></span>';
    }).join("");
  }
  // Every bucket any function uses, from the shortest to the longest.
  function bucketsOf(functions) {
    const all = new Map();
    for (const f of functions) for (const b of f.buckets) all.set(b.bucket, b);
    if (!all.size) return [];
    const keys = Array.from(all.keys()).sort((a, b) => a - b);
    const out = [];
    for (let k = keys[0]; k <= keys[keys.length - 1]; k++) {
      out.push(all.get(k) || { bucket: k, low_ns: k === 0 ? 0 : 1000 * Math.pow(2, k - 1), high_ns: 1000 * Math.pow(2, k) });
    }
    return out;
  }
  function render() {
    const functions = report.functions.slice().sort((a, b) => b[sort].bytes.estimate - a[sort].bytes.estimate);
    const buckets = bucketsOf(functions);
    const head = (key, label) => '<th data-column="' + key + '"' + (sort === key ? ' aria-sort="descending"' : "") +
      '><button type="button">' + label + "</button></th>";
    let html = '<table class="lifetimes"><thead><tr><th class="name">function</th>' + head("freed", "freed bytes (95 %)") +
      "<th>freed objects</th>" + head("temporary", "temporary bytes (95 %)") + '<th class="strip">lifetimes ' +
      (buckets.length ? '<span class="axis">' + lifetime(buckets[0].low_ns) + " → " +
        lifetime(buckets[buckets.length - 1].high_ns) + "</span>" : "") + "</th></tr></thead><tbody>";
    for (const f of functions) {
      html += '<tr class="function" data-name="' + escapeText(f.name) + '"><td class="name"><a href="' +
        escapeText(viewUrl("&view=temporary#q=" + encodeURIComponent(f.name))) + '">' + escapeText(f.name) + "</a></td>" +
        '<td class="freed" data-value="' + f.freed.bytes.estimate + '">' + interval(f.freed.bytes, "bytes") + "</td>" +
        "<td>" + count(f.freed.objects.estimate) + "</td>" +
        '<td class="temporary" data-value="' + f.temporary.bytes.estimate + '">' + interval(f.temporary.bytes, "bytes") + "</td>" +
        '<td class="strip">' + strip(f, buckets) + "</td></tr>";
    }
    $("report").innerHTML = html + "</tbody></table>";
    for (const th of document.querySelectorAll("th[data-column] button")) {
      th.addEventListener("click", () => { sort = th.parentElement.dataset.column; render(); });
    }
  }
  async function load() {
    $("title").textContent = id + ": lifetimes of freed memory";
    document.title = id + ": lifetimes";
    $("links").innerHTML = '<a href="/">all dumps</a> · <a href="' + escapeText(viewUrl()) + '">this dump</a> · <a href="' +
      escapeText(viewUrl("&view=temporary")) + '">temporary allocations</a>';
    try {
      const response = await fetch("/api/lifetimes?dump=" + encodeURIComponent(id));
      if (!response.ok) throw new Error(await response.text());
      report = await response.json();
      $("hint").textContent = "Per function that allocated it, the memory freed before this dump, by how long it lived " +
        "(each cell a lifetime range, twice the one before; outlined: temporary, freed within " +
        (report.temporary_ns === null ? "any time" : lifetime(report.temporary_ns)) +
        "). Estimates from the samples with their 95 % intervals; hover a cell for its numbers.";
      render();
    } catch (e) {
      $("report").innerHTML = '<p class="error">' + escapeText(String(e.message || e)) + "</p>";
    }
    state.ready = true;
  }
  // What tests and scripts may read.
  window.heapdiffLifetimes = state;
  load();
})();
