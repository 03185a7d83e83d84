// The functions table: per function (by the label the graph shows) its
// self value (stacks whose leaf it is) and total (stacks containing it,
// each stack once), with, in a comparison, the change of each judged by the
// reports' one rule (stats.js) on the summed sums: a change is
// coloured only where it is significant. Sorted by any column; the headers
// are buttons. Each name links to the function's callers and callees.
"use strict";
const hdTable = (function () {
  const { fmt, signed, pct, escapeText } = hdFormat;
  const SINGLE = [["name", "function"], ["self", "self"], ["selfp", "self %"], ["total", "total"], ["totalp", "total %"]];
  const DIFF = [["name", "function"], ["self", "self (new)"], ["dself", "self Δ"], ["total", "total (new)"], ["dtotal", "total Δ"], ["btotal", "total (base)"]];

  // o: { stacks, labelOf(frame id), data {nv, nvar, ns, nw, bv, bvar, bs,
  //      bw, and the unshared parts av… and rv… or null}, k, baseScale,
  //      diff, change(base, new, parts) of two sides' sums {value,
  //      variance, floor, scale} (the base's unscaled; parts: {added,
  //      removed} sums, or null), searchTest, limit }
  function entries(o) {
    const byLabel = new Map(), list = [];
    const entryOf = new Map();
    const entry = (frame) => {
      let e = entryOf.get(frame);
      if (e === undefined) {
        const name = o.labelOf(frame);
        e = byLabel.get(name);
        if (e === undefined) {
          const sums = () => ({ value: 0, variance: 0, floor: 0, scale: 0 });
          e = { name, self: 0, total: 0, nself: sums(), ntotal: sums(), bself: sums(), btotal: sums(),
            aself: sums(), atotal: sums(), rself: sums(), rtotal: sums(), stamp: -1 };
          byLabel.set(name, e);
          list.push(e);
        }
        entryOf.set(frame, e);
      }
      return e;
    };
    const d = o.data, k = o.k, parts = o.diff && !!d.av;
    // Stack sums add; the weight scale is the largest.
    const add = (to, v, vv, s, w, at) => {
      to.value += v[at]; to.variance += vv[at]; to.floor += s[at]; to.scale = Math.max(to.scale, w[at]);
    };
    for (const [i, f] of o.stacks) {
      if (!f.length) continue;
      const at = 4 * i + k;
      const leaf = entry(f[f.length - 1]);
      const sides = (e, which) => {
        add(e["n" + which], d.nv, d.nvar, d.ns, d.nw, at);
        if (o.diff) add(e["b" + which], d.bv, d.bvar, d.bs, d.bw, at);
        if (parts) {
          add(e["a" + which], d.av, d.avar, d.as, d.aw, at);
          add(e["r" + which], d.rv, d.rvar, d.rs, d.rw, at);
        }
      };
      sides(leaf, "self");
      for (const frame of f) {
        const e = entry(frame);
        if (e.stamp === i) continue;
        e.stamp = i;
        sides(e, "total");
      }
    }
    for (const e of list) {
      e.self = e.nself.value; e.total = e.ntotal.value;
      e.selfp = e.self; e.totalp = e.total;
      if (o.diff) {
        const partsOf = (which) => (parts ? { added: e["a" + which], removed: e["r" + which] } : null);
        e.cself = o.change(e.bself, e.nself, partsOf("self"));
        e.ctotal = o.change(e.btotal, e.ntotal, partsOf("total"));
        e.dself = e.cself.value; e.dtotal = e.ctotal.value;
      }
      e.bself = e.bself.value * o.baseScale; e.btotal = e.btotal.value * o.baseScale;
    }
    return list.filter((e) => e.total !== 0 || e.btotal !== 0);
  }
  function sorted(list, column, descending) {
    return list.sort((a, b) => {
      const x = column === "name" ? a.name : a[column], y = column === "name" ? b.name : b[column];
      const c = x < y ? -1 : x > y ? 1 : 0;
      return (descending ? -c : c) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    });
  }
  function verdict(change) {
    if (!change.significant) return "noise";
    return change.value > 0 ? "grew" : "shrank";
  }
  // o adds: table element, sort, desc, unit, whole, caption, href(name), limit
  function render(table, o) {
    const columns = o.diff ? DIFF : SINGLE;
    const sort = columns.some(([c]) => c === o.sort) ? o.sort : o.diff ? "dself" : "total";
    let list = entries(o);
    if (o.searchTest) list = list.filter((e) => o.searchTest(e.name));
    const shown = sorted(list, sort, o.desc).slice(0, o.limit || 500);
    table.querySelector("caption").textContent = o.caption;
    table.querySelector("thead tr").innerHTML = columns.map(([c, label]) => {
      const aria = c === sort ? (o.desc ? "descending" : "ascending") : "none";
      const mark = c === sort ? (o.desc ? " ▼" : " ▲") : "";
      return '<th data-column="' + c + '" aria-sort="' + aria + '"><button type="button" data-column="' + c + '">' + label + mark + "</button></th>";
    }).join("");
    const unit = o.unit, html = [];
    for (const e of shown) {
      const cls = o.diff ? verdict(e.ctotal).replace("grew", "growth").replace("shrank", "shrink") : "";
      html.push('<tr class="' + cls + '"><td class="name" title="' + escapeText(e.name) + '"><a href="' +
        escapeText(o.href(e.name)) + '">' + escapeText(e.name) + "</a></td>");
      for (const [c] of columns.slice(1)) {
        let text, extra = "";
        if (c === "selfp") text = pct(e.self, o.whole);
        else if (c === "totalp") text = pct(e.total, o.whole);
        else if (c === "dself" || c === "dtotal") {
          text = signed(e[c], unit);
          extra = " delta " + verdict(c === "dself" ? e.cself : e.ctotal);
        } else text = fmt(e[c], unit);
        html.push('<td class="' + c + extra + '" data-value="' + e[c] + '">' + text + "</td>");
      }
      html.push("</tr>");
    }
    table.querySelector("tbody").innerHTML = html.join("");
    return sort;
  }
  return { render, entries };
})();
