// The age of live memory: per allocating function, a small bar chart of
// its live bytes by birth time (the slices of `heapdiff ages`, whose
// numbers the model carries: nothing is estimated here), each bar's 95 %
// interval in its tooltip, and the function's class (accumulating, recent
// only, start-up). A leak's bars spread over the run; start-up state sits
// in the first bar; a cache's in the last ones. Where the dumps carry no
// births, the one line saying so. `bars` also draws the growing panel's
// of `heapdiff serve`.
"use strict";
const hdAges = (function () {
  const SVG = "http://www.w3.org/2000/svg";
  const { bytes, duration, escapeText } = hdFormat;
  const KINDS = { accumulating: ["accumulating", "born steadily over the run: a leak candidate"],
    "recent-only": ["recent only", "born lately: a cache or working set that turns over"],
    "start-up": ["start-up", "born at start-up and kept"],
    "early-after-attach": ["early after the attach", "born in the first 10 % after the attach and kept"],
    empty: ["nothing live", ""] };
  const BAR = 9, H = 22;

  function bars(slices, slicesNs) {
    const svg = document.createElementNS(SVG, "svg");
    const max = Math.max(1, ...slices.map((s) => s[0]));
    svg.setAttribute("width", slices.length * BAR);
    svg.setAttribute("height", H);
    svg.setAttribute("class", "age-bars");
    slices.forEach(([estimate, low, high], i) => {
      const h = estimate > 0 ? Math.max(1, (H - 2) * estimate / max) : 0;
      const rect = document.createElementNS(SVG, "rect");
      rect.setAttribute("x", i * BAR + 1);
      rect.setAttribute("y", H - 1 - h);
      rect.setAttribute("width", BAR - 2);
      rect.setAttribute("height", h);
      rect.setAttribute("class", "age-bar");
      rect.dataset.slice = i;
      rect.dataset.bytes = estimate;
      rect.dataset.low = low;
      rect.dataset.high = high;
      const title = document.createElementNS(SVG, "title");
      const [from, to] = slicesNs[i];
      title.textContent = "born " + duration(from / 1e9) + " – " + duration(to / 1e9) + (i === slices.length - 1 ? " or later" : "") +
        ": " + bytes(estimate) + " live, 95 % [" + bytes(low) + ", " + bytes(high) + "]";
      rect.appendChild(title);
      // A hit area the whole height of the slice, so an empty one has a tooltip too.
      const hit = document.createElementNS(SVG, "rect");
      hit.setAttribute("x", i * BAR); hit.setAttribute("y", 0);
      hit.setAttribute("width", BAR); hit.setAttribute("height", H);
      hit.setAttribute("class", "age-hit");
      hit.appendChild(title.cloneNode(true));
      svg.appendChild(hit);
      svg.appendChild(rect);
    });
    return svg;
  }

  // Fill `box` with the model's ages; `search(name)` is called when a
  // function's name is clicked.
  function render(box, ages, search) {
    if (!ages) { box.hidden = true; return; }
    const summary = '<summary>Age of live memory</summary>';
    if (ages.missing) {
      box.innerHTML = summary + '<p class="ages-missing">' + escapeText(ages.missing) + "</p>";
      return;
    }
    const n = ages.slices_ns.length;
    box.innerHTML = summary + '<p class="hint">Live bytes per function by birth, in ' + n + " slices of the " +
      escapeText(duration(ages.run_ns / 1e9)) + " run (hover a bar for its 95 % interval)" +
      (ages.more ? "; " + ages.more + " smaller functions left out" : "") + ".</p>" +
      '<table class="ages"><thead><tr><th>program frame ← via function</th><th>live</th><th>by birth</th><th>kind</th></tr></thead><tbody></tbody></table>';
    const body = box.querySelector("tbody");
    for (const f of ages.functions) {
      const tr = document.createElement("tr");
      tr.dataset.name = f.name;
      tr.dataset.class = f.class;
      // Led by the program's own frame when it is another function, as
      // `heapdiff ages` prints it.
      const program = f.program_frame && f.program_frame !== f.name
        ? '<span class="program">' + escapeText(f.program_frame) + '</span> <span class="via">← via</span> ' : "";
      if (f.program_frame) tr.dataset.program = f.program_frame;
      tr.innerHTML = '<td class="name">' + program + '<a href="#" title="' + escapeText(f.name) + '">' + escapeText(f.name) + "</a></td>" +
        '<td class="live" title="95 % [' + escapeText(bytes(f.live[1])) + ", " + escapeText(bytes(f.live[2])) + ']">' + escapeText(bytes(f.live[0])) +
        '</td><td class="bars"></td><td class="kind" title="' + escapeText((KINDS[f.class] || [])[1] || "") + '">' +
        escapeText((KINDS[f.class] || [f.class])[0]) + "</td>";
      tr.querySelector(".bars").appendChild(bars(f.slices, ages.slices_ns));
      tr.querySelector("a").addEventListener("click", (e) => { e.preventDefault(); search(f.name); });
      body.appendChild(tr);
    }
  }
  return { render, bars };
})();
