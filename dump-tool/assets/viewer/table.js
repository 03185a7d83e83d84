// The functions table: per function (by the label the graph shows) its
// self value (stacks whose leaf it is) and total (stacks containing it,
// each stack once), with, in a comparison, the change of each judged by the
// reports' one rule (stats.js) on the summed variances: a change is
// coloured only where it is significant. Sorted by any column; the headers
// are buttons. Each name links to the function's callers and callees.
"use strict";
const hdTable = (function () {
  const { fmt, signed, pct, escapeText } = hdFormat;
  const SINGLE = [["name", "function"], ["self", "self"], ["selfp", "self %"], ["total", "total"], ["totalp", "total %"]];
  const DIFF = [["name", "function"], ["self", "self (new)"], ["dself", "self Δ"], ["total", "total (new)"], ["dtotal", "total Δ"], ["btotal", "total (base)"]];

  // o: { stacks, labelOf(frame id), data {nv, nvar, bv, bvar}, k, baseScale,
  //      diff, change(b, n, vb, vn), searchTest, limit }
  function entries(o) {
    const byLabel = new Map(), list = [];
    const entryOf = new Map();
    const entry = (frame) => {
      let e = entryOf.get(frame);
      if (e === undefined) {
        const name = o.labelOf(frame);
        e = byLabel.get(name);
        if (e === undefined) {
          e = { name, self: 0, total: 0, bself: 0, btotal: 0, vself: 0, vtotal: 0, bvself: 0, bvtotal: 0, stamp: -1 };
          byLabel.set(name, e);
          list.push(e);
        }
        entryOf.set(frame, e);
      }
      return e;
    };
    const { nv, nvar, bv, bvar } = o.data, k = o.k, s2 = o.baseScale * o.baseScale;
    for (const [i, f] of o.stacks) {
      if (!f.length) continue;
      const at = 4 * i + k;
      const v = nv[at], vv = nvar[at];
      const b = o.diff ? bv[at] * o.baseScale : 0, vb = o.diff ? bvar[at] * s2 : 0;
      const leaf = entry(f[f.length - 1]);
      leaf.self += v; leaf.vself += vv; leaf.bself += b; leaf.bvself += vb;
      for (const frame of f) {
        const e = entry(frame);
        if (e.stamp === i) continue;
        e.stamp = i;
        e.total += v; e.vtotal += vv; e.btotal += b; e.bvtotal += vb;
      }
    }
    for (const e of list) {
      e.selfp = e.self; e.totalp = e.total;
      if (o.diff) {
        e.cself = o.change(e.bself, e.self, e.bvself, e.vself);
        e.ctotal = o.change(e.btotal, e.total, e.bvtotal, e.vtotal);
        e.dself = e.cself.value; e.dtotal = e.ctotal.value;
      }
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
