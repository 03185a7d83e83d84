// A flame graph (root at the bottom) or icicle graph (root at the top) of
// one call tree on one canvas inside a scrolling box: layout, drawing, the
// frame under the mouse, and a keyboard cursor (arrows move it, Enter zooms
// into its frame, `s` shows its callers and callees). The box is scrolled
// to the root whenever the graph is laid out anew, so deep stacks open at
// the root. Labels, colours and what a frame says come from the hooks.
"use strict";
const hdFlame = (function () {
  const ROW = 16;
  // hooks: label(id), colour(id), zoom(id), select(id), moved(id)
  function create(canvas, box, hooks) {
    const ctx = canvas.getContext("2d");
    let tree = null, opts = null, rows = [], memo = [], cursor = null, width = 300;

    // Children drawn, widest first (left-heavy) or by name.
    function children(id) {
      let list = memo[id];
      if (!list) {
        list = [];
        for (let c = id + 1; c < tree.end[id]; c = tree.end[c]) if (opts.widths[c] > 0) list.push(c);
        if (opts.heavy) list.sort((a, b) => opts.widths[b] - opts.widths[a] || byName(a, b));
        else list.sort(byName);
        memo[id] = list;
      }
      return list;
    }
    function byName(a, b) {
      const x = hooks.label(a), y = hooks.label(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    // A new tree or new widths: lay out again; show the root unless
    // `keepScroll` (the same graph, only recoloured or re-measured).
    function set(newTree, newOpts, keepScroll) {
      if (newTree !== tree) cursor = null;
      tree = newTree; opts = newOpts; memo = [];
      draw();
      if (!keepScroll) showRoot();
    }
    function showRoot() {
      box.scrollTop = opts.icicle ? 0 : box.scrollHeight;
    }
    function rowY(depth) { return (opts.icicle ? depth : rows.length - 1 - depth) * ROW; }
    function draw() {
      if (!tree) return;
      width = Math.max(300, box.clientWidth);
      const zoom = opts.zoom, top = opts.top || 0;
      const scale = opts.widths[zoom] > 0 ? width / opts.widths[zoom] : 0;
      rows = [];
      const put = (depth, x, w, id) => { (rows[depth] = rows[depth] || []).push([x, w, id]); };
      // Ancestors of the zoomed frame (up to `top`) span the whole width.
      const chain = [];
      for (let id = zoom; id >= top; id = tree.parent[id]) { chain.unshift(id); if (id === top) break; }
      chain.forEach((id, d) => put(d, 0, width, id));
      const minw = opts.minwidth;
      (function lay(id, x, depth) {
        let cx = x;
        for (const c of children(id)) {
          const w = opts.widths[c] * scale;
          if (w >= minw) { put(depth, cx, w, c); lay(c, cx, depth + 1); }
          cx += w;
        }
      })(zoom, 0, chain.length);
      const dpr = window.devicePixelRatio || 1;
      const height = Math.max(1, rows.length) * ROW;
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.height = height + "px";
      ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
      ctx.clearRect(0, 0, width, height);
      ctx.font = "11px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      rows.forEach((row, depth) => {
        const y = rowY(depth);
        for (const [x, w, id] of row) {
          ctx.fillStyle = hooks.colour(id);
          ctx.fillRect(x, y, Math.max(w - 0.5, 0.5), ROW - 1);
          if (w > 20) {
            const chars = Math.floor((w - 6) / 6.2);
            if (chars >= 2) {
              const name = hooks.label(id);
              ctx.fillStyle = "#000";
              ctx.fillText(name.length > chars ? name.slice(0, chars - 1) + "…" : name, x + 3, y + ROW / 2);
            }
          }
          if (id === cursor) {
            ctx.strokeStyle = "#000"; ctx.lineWidth = 2;
            ctx.strokeRect(x + 1, y + 1, Math.max(w - 2, 1), ROW - 3);
          }
        }
      });
    }
    function hit(ev) {
      const r = canvas.getBoundingClientRect();
      const x = ev.clientX - r.left, row = Math.floor((ev.clientY - r.top) / ROW);
      const list = rows[opts.icicle ? row : rows.length - 1 - row];
      if (!list) return null;
      for (const [rx, w, id] of list) if (x >= rx && x < rx + w) return id;
      return null;
    }
    // Where a drawn node is: depth and index in its row.
    function place(id) {
      for (let d = 0; d < rows.length; d++) {
        const i = rows[d].findIndex((e) => e[2] === id);
        if (i >= 0) return [d, i];
      }
      return null;
    }
    // The drawn node's box in client coordinates (centre, size).
    function boxOf(id) {
      const at = place(id);
      if (!at) return null;
      const [x, w] = rows[at[0]][at[1]];
      const r = canvas.getBoundingClientRect();
      return { x: r.left + x + w / 2, y: r.top + rowY(at[0]) + ROW / 2, left: r.left + x, width: w };
    }
    // The first drawn node for which `test(id)` holds.
    function find(test) {
      for (const row of rows) for (const e of row) if (test(e[2])) return e[2];
      return null;
    }
    function moveTo(id) {
      cursor = id;
      draw();
      const at = place(id);
      if (at) {
        const y = rowY(at[0]);
        if (y < box.scrollTop) box.scrollTop = y;
        else if (y + ROW > box.scrollTop + box.clientHeight) box.scrollTop = y + ROW - box.clientHeight;
      }
      hooks.moved(id);
    }
    function step(direction) {
      if (cursor === null || !place(cursor)) { moveTo(opts.zoom); return; }
      const [d, i] = place(cursor);
      let next = null;
      if (direction === "leaf") {
        const row = rows[d + 1] || [];
        const child = row.find((e) => tree.parent[e[2]] === cursor);
        if (child) next = child[2];
      } else if (direction === "root") {
        if (d > 0) next = tree.parent[cursor];
      } else {
        const e = rows[d][i + (direction === "left" ? -1 : 1)];
        if (e) next = e[2];
      }
      if (next !== null && next >= 0) moveTo(next);
    }
    canvas.addEventListener("keydown", (e) => {
      const up = opts.icicle ? "root" : "leaf", down = opts.icicle ? "leaf" : "root";
      const moves = { ArrowUp: up, ArrowDown: down, ArrowLeft: "left", ArrowRight: "right" };
      if (moves[e.key]) { e.preventDefault(); step(moves[e.key]); }
      else if ((e.key === "Enter" || e.key === " ") && cursor !== null) { e.preventDefault(); hooks.zoom(cursor); }
      else if (e.key === "s" && cursor !== null) { e.preventDefault(); hooks.select(cursor); }
    });
    canvas.addEventListener("focus", () => { if (cursor === null || !place(cursor)) moveTo(opts.zoom); });
    return { set, draw, hit, boxOf, find, showRoot, cursor: () => cursor, moveTo, rows: () => rows };
  }
  return { create, ROW };
})();
