// The viewer's state and the URL fragment that holds it, so a view can be
// shared and the browser's Back and Forward walk through zooms, sorts and
// views. `read` parses the fragment over the defaults; `write` pushes a
// history entry for a navigation (zoom, sort, view) or replaces the
// current one (typing in the search box).
"use strict";
const hdState = (function () {
  function defaults(model) {
    const diff = model.base_name !== null && model.base_name !== undefined;
    return {
      metric: 0, search: "", icicle: false, threads: false, minwidth: 0.5, normalise: false,
      transforms: [], zoom: [], sort: diff ? "dself" : "total", desc: true, heavy: false, bottomUp: false,
      names: model.names === "full" ? "full" : "short", view: "flame", fn: "",
    };
  }
  function read(base) {
    const state = JSON.parse(JSON.stringify(base));
    const p = new URLSearchParams(location.hash.slice(1));
    if (p.has("m")) state.metric = Math.min(3, Math.max(0, parseInt(p.get("m"), 10) || 0));
    state.search = p.get("q") || "";
    if (p.has("icicle")) state.icicle = p.get("icicle") === "1";
    if (p.has("threads")) state.threads = p.get("threads") === "1";
    if (p.has("norm")) state.normalise = p.get("norm") === "1";
    if (p.has("mw")) state.minwidth = Math.max(0, parseFloat(p.get("mw")) || 0);
    if (p.has("s")) state.sort = p.get("s");
    if (p.has("asc")) state.desc = p.get("asc") !== "1";
    if (p.has("heavy")) state.heavy = p.get("heavy") === "1";
    if (p.has("bu")) state.bottomUp = p.get("bu") === "1";
    if (p.has("names")) state.names = p.get("names") === "full" ? "full" : "short";
    if (p.get("v") === "sandwich" && p.get("fn")) { state.view = "sandwich"; state.fn = p.get("fn"); }
    const zoom = p.get("z");
    state.zoom = zoom ? zoom.split(".").map((x) => parseInt(x, 10)).filter((x) => x >= 0) : [];
    try {
      const t = JSON.parse(p.get("t") || "[]");
      state.transforms = Array.isArray(t) ? t.filter((x) => Array.isArray(x) && typeof x[0] === "string") : [];
    } catch (e) { state.transforms = []; }
    return state;
  }
  // The fragment of `state`: only what differs from `base`.
  function encode(state, base) {
    const p = new URLSearchParams();
    if (state.metric !== base.metric) p.set("m", state.metric);
    if (state.search) p.set("q", state.search);
    if (state.icicle !== base.icicle) p.set("icicle", state.icicle ? "1" : "0");
    if (state.threads !== base.threads) p.set("threads", state.threads ? "1" : "0");
    if (state.normalise) p.set("norm", "1");
    if (state.minwidth !== base.minwidth) p.set("mw", state.minwidth);
    if (state.sort !== base.sort) p.set("s", state.sort);
    if (state.desc !== base.desc) p.set("asc", state.desc ? "0" : "1");
    if (state.heavy !== base.heavy) p.set("heavy", state.heavy ? "1" : "0");
    if (state.bottomUp !== base.bottomUp) p.set("bu", state.bottomUp ? "1" : "0");
    if (state.names !== base.names) p.set("names", state.names);
    if (state.transforms.length) p.set("t", JSON.stringify(state.transforms));
    if (state.zoom.length) p.set("z", state.zoom.join("."));
    if (state.view === "sandwich" && state.fn) { p.set("v", "sandwich"); p.set("fn", state.fn); }
    return "#" + p.toString();
  }
  function write(state, base, push) {
    const hash = encode(state, base);
    if (hash === (location.hash || "#")) return;
    if (push) history.pushState(null, "", hash); else history.replaceState(null, "", hash);
  }
  return { defaults, read, encode, write };
})();
