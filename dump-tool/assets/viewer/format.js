// Numbers and text as the pages print them: binary byte units, counts with
// thousands separators, signed changes, percentages, durations, and text
// escaped for HTML. Shared by the viewer and the dump list of `heapdiff
// serve`; the Rust reports' words use the same byte units
// (render/live_heap.rs).
"use strict";
const hdFormat = (function () {
  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];
  function bytes(v) {
    let i = 0, x = Math.abs(v);
    while (x >= 1024 && i < UNITS.length - 1) { x /= 1024; i++; }
    return (v < 0 ? "-" : "") + (i === 0 ? x.toFixed(0) : x.toFixed(x < 10 ? 2 : 1)) + " " + UNITS[i];
  }
  function count(v) { return (v < 0 ? "-" : "") + Math.round(Math.abs(v)).toLocaleString("en-US"); }
  // `unit` is "bytes" or anything else (a count).
  function fmt(v, unit) { return unit === "bytes" ? bytes(v) : count(v); }
  function signed(v, unit) { return (v > 0 ? "+" : "") + fmt(v, unit); }
  function pct(part, whole) { return whole ? (100 * part / whole).toFixed(2) + "%" : "-"; }
  // Seconds as "850 ms", "12.5 s", "3 min 20 s", "2 h 5 min".
  function duration(seconds) {
    const s = Math.abs(seconds), sign = seconds < 0 ? "-" : "";
    if (s < 1) return sign + Math.round(s * 1000) + " ms";
    if (s < 60) return sign + (s < 10 ? s.toFixed(1) : s.toFixed(0)) + " s";
    if (s < 3600) return sign + Math.floor(s / 60) + " min" + (s % 60 >= 1 ? " " + Math.floor(s % 60) + " s" : "");
    return sign + Math.floor(s / 3600) + " h" + (s % 3600 >= 60 ? " " + Math.floor((s % 3600) / 60) + " min" : "");
  }
  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  function escapeText(s) { return String(s === null || s === undefined ? "" : s).replace(/[&<>"']/g, (c) => ESCAPES[c]); }
  return { bytes, count, fmt, signed, pct, duration, escapeText };
})();
