/* viewer.js -- the icicle viewer of sertrace's HTML report (embedded at
 * build time by embed.py; no library, no network).
 *
 * The page holds one JSON block per dump (export_html.c): its nodes in
 * pre-order as columns.  A dump is parsed when it is shown; node 0 is
 * added for the dump itself (its own bytes: the serializer's header and
 * trailer), so the top bar is the payload.  Layout is one pass: a node's
 * x is where its previous sibling ended (bytes), its row its depth.
 * Drawing walks only what is visible: a run of siblings each narrower
 * than MIN_PX is drawn as one grey "merged" box and its subtrees are not
 * visited, so the cost follows the pixels, not the node count.
 */
"use strict";
(function () {
  const ROW = 18, MIN_PX = 1.5, LABEL_PX = 34, MAX_CANVAS = 30000;
  /* core node flags (analyzers/core/core.h) and the export's OVERSIZED */
  const F = { NO_ENTER: 1, NO_EXIT: 2, UNFINISHED: 4, PARTIAL: 8, CHILD_INEXACT: 16,
              ERROR: 32, MALFORMED: 64, FAILED: 128, EXIT_UNSURE: 256, LOWER_BOUND: 512,
              OVERSIZED: 4096 };
  const FLAG_WORDS = [[F.ERROR, "!! UNSERIALIZABLE"], [F.OVERSIZED, "!! OVERSIZED"],
    [F.UNFINISHED, "!! UNFINISHED (the process stopped inside it)"],
    [F.FAILED, "!! FAILED inside (the dump ended with an error)"],
    [F.NO_EXIT, "?? exit lost"], [F.NO_ENTER, "?? enter lost"],
    [F.PARTIAL, "?? records lost inside"], [F.MALFORMED, "?? malformed positions"],
    [F.EXIT_UNSURE, "?? its exit may be a later node's"],
    [F.CHILD_INEXACT, "self bytes not exact (a child's size is not)"],
    [F.LOWER_BOUND, "the dump's sizes are lower bounds"]];
  const ALERT = F.ERROR | F.OVERSIZED | F.UNFINISHED | F.FAILED;
  const LOSS = F.NO_ENTER | F.NO_EXIT | F.PARTIAL | F.MALFORMED | F.EXIT_UNSURE;
  const BOUND = ["", "\u2265 ", "\u2264 ", "? "];

  const $ = (id) => document.getElementById(id);
  const index = JSON.parse($("sertrace-index").textContent);
  const dumps = index.dumps;
  const canvas = $("icicle"), ctx = canvas.getContext("2d"), tip = $("tooltip");

  let cur = null;      /* the dump shown (see load) */
  let zoom = 0;        /* node whose subtree fills the width */
  let range = null;    /* or [lo, hi): a run of its merged children, in bytes */
  let matches = null;  /* Uint8Array: 1 = search match, or null */
  let drawn = [];      /* per row: [x, w, node, mergedCount, mergedBytes, runStart] */
  let canvasW = 0, viewBase = 0, viewScale = 1; /* bytes = viewBase + x / viewScale */

  function fmtSize(b) {
    if (b < 1024) return b + " B";
    const u = ["KiB", "MiB", "GiB", "TiB"];
    let v = b / 1024, i = 0;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return v.toFixed(1) + " " + u[i];
  }
  function fmtExact(b) { return b.toLocaleString("en-US") + " B"; }
  function tagText(t) { const e = index.tags[t]; return e ? e[0] : "K" + t; }
  function tagMeaning(t) { const e = index.tags[t]; return e ? e[1] : "unknown kind"; }
  function esc(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
  }
  function dumpTitle(d) {
    return "dump " + d.dump_id + (d.pid >= 0 ? " \u00b7 pid " + d.pid : "") + " \u00b7 " + d.serializer;
  }

  /* ---- one dump ---------------------------------------------------------- */

  function load(k) {
    const raw = JSON.parse($("sertrace-dump-" + k).textContent);
    const n = raw.depth.length, N = n + 1;
    const c = { raw: raw, N: N, depth: new Uint32Array(N), bytes: new Float64Array(N),
                self: new Float64Array(N), flags: new Uint32Array(N), tag: new Uint16Array(N),
                type: new Uint32Array(N), bound: new Uint8Array(N), end: new Uint32Array(N),
                parent: new Int32Array(N), start: new Float64Array(N), errors: new Map(), notes: new Map(),
                maxDepth: 0, name: [] };
    c.bytes[0] = raw.total; c.self[0] = raw.dump_self; c.parent[0] = -1;
    for (let i = 0; i < n; i++) {
      c.depth[i + 1] = raw.depth[i]; c.bytes[i + 1] = raw.bytes[i]; c.self[i + 1] = raw.self[i];
      c.flags[i + 1] = raw.flags[i]; c.tag[i + 1] = raw.tag[i]; c.type[i + 1] = raw.type[i];
      c.bound[i + 1] = raw.bound[i];
    }
    /* parent, subtree end and x (in bytes) in one pre-order pass */
    const stack = new Int32Array(N + 1), next = new Float64Array(N);
    let top = 0;
    for (let i = 0; i < N; i++) {
      while (top > 0 && c.depth[stack[top - 1]] >= c.depth[i]) c.end[stack[--top]] = i;
      const p = top > 0 ? stack[top - 1] : -1;
      c.parent[i] = p;
      if (p >= 0) { c.start[i] = next[p]; next[p] += c.bytes[i]; }
      next[i] = c.start[i];
      if (c.depth[i] > c.maxDepth) c.maxDepth = c.depth[i];
      stack[top++] = i;
    }
    while (top > 0) c.end[stack[--top]] = N;
    for (const e of raw.error_list) {
      const at = e[0] + 1;
      if (!c.errors.has(at)) c.errors.set(at, []);
      c.errors.get(at).push({ message: e[1], path: e[2] });
    }
    for (const e of raw.note_list || []) {
      const at = e[0] + 1; /* -1: a note on the dump itself, shown on the top bar */
      if (!c.notes.has(at)) c.notes.set(at, []);
      c.notes.get(at).push(e[1] + " = " + e[2]);
    }
    return c;
  }

  function nodeName(c, i) {
    if (i === 0) return "[" + dumpTitle(c.raw) + "]";
    const t = c.type[i] ? c.raw.types[c.type[i]] : null;
    return t != null ? t : tagText(c.tag[i]);
  }
  function nodeLabel(c, i) {
    if (i === 0) return dumpTitle(c.raw);
    const t = c.type[i] ? c.raw.types[c.type[i]] : null;
    return tagText(c.tag[i]) + (t != null ? " " + t : "");
  }
  /* The node's place: types from the root (stand-in for its path, until the
   * trace carries paths: then a "path" column of the block is shown). */
  function chain(c, i) {
    if (c.raw.path) return c.raw.path[i - 1];
    const parts = [];
    for (let j = i; j > 0; j = c.parent[j]) parts.push(nodeName(c, j));
    parts.reverse();
    if (parts.length > 14) parts.splice(2, parts.length - 12, "\u2026 (" + (parts.length - 12) + " levels)");
    return parts.join(" \u203a ");
  }
  function sizeText(c, i) {
    const b = c.bytes[i], bd = BOUND[c.bound[i]] || "";
    return bd + fmtExact(b) + (b >= 1024 ? " (" + bd + fmtSize(b) + ")" : "");
  }

  /* ---- colours ----------------------------------------------------------- */

  const hueCache = new Map();
  function hue(name) {
    let h = hueCache.get(name);
    if (h === undefined) {
      let x = 2166136261;
      for (let k = 0; k < name.length; k++) x = Math.imul(x ^ name.charCodeAt(k), 16777619);
      h = 20 + ((x >>> 0) % 200); /* away from the alert red */
      hueCache.set(name, h);
    }
    return h;
  }
  function fill(c, i, ancestor) {
    const f = c.flags[i];
    if (matches && i > 0 && matches[i]) return "#c026d3";
    let col;
    if (i === 0) col = "hsl(210, 12%, 72%)";
    else if (f & ALERT) col = "#d62728";
    else if (f & LOSS) col = "#f28e2b";
    else col = "hsl(" + hue(nodeName(c, i)) + ", 55%, " + (ancestor ? 82 : 68) + "%)";
    return col;
  }

  /* ---- drawing ----------------------------------------------------------- */

  function rowsFor(c, z) {
    const dpr = window.devicePixelRatio || 1;
    let deepest = c.depth[z];
    for (let i = z; i < c.end[z]; i++) if (c.depth[i] > deepest) deepest = c.depth[i];
    return { rows: Math.min(deepest + 1, Math.floor(MAX_CANVAS / (ROW * dpr))), deepest: deepest };
  }

  function rect(c, i, x, w, row, merged, mergedBytes, ancestor, runAt) {
    const y = row * ROW;
    if (x < 0) { w += x; x = 0; } /* a range zoom: clipped to the canvas */
    if (x + w > canvasW) w = canvasW - x;
    ctx.fillStyle = merged ? "#b9b9b9" : fill(c, i, ancestor);
    if (matches && !merged && i > 0 && !matches[i]) ctx.globalAlpha = 0.35;
    ctx.fillRect(x, y, Math.max(w - (w > 3 ? 1 : 0), 0.5), ROW - 1);
    ctx.globalAlpha = 1;
    if (!merged && (c.flags[i] & ALERT) && w > 3) {
      ctx.strokeStyle = "#7a0b0b"; ctx.lineWidth = 1.5;
      ctx.strokeRect(x + 0.75, y + 0.75, w - 2.5, ROW - 2.5);
    }
    if (w > LABEL_PX) {
      let s = merged ? "\u2026 " + merged.toLocaleString("en-US") + " nodes, " + fmtSize(mergedBytes)
                     : nodeLabel(c, i) + "  " + (BOUND[c.bound[i]] || "") + fmtSize(c.bytes[i]);
      const fit = Math.floor((w - 6) / 6.6);
      if (s.length > fit) s = fit > 1 ? s.slice(0, fit - 1) + "\u2026" : "";
      if (s) {
        ctx.fillStyle = (!merged && (c.flags[i] & ALERT)) || (matches && matches[i] && !merged) ? "#fff" : "#111";
        ctx.fillText(s, x + 3, y + 13);
      }
    }
    if (!drawn[row]) drawn[row] = [];
    drawn[row].push([x, w, i, merged, mergedBytes, runAt]);
  }

  function draw() {
    const c = cur, z = zoom;
    const view = $("view"), dpr = window.devicePixelRatio || 1;
    const W = Math.max(view.clientWidth, 200);
    canvasW = W;
    const { rows, deepest } = rowsFor(c, z);
    canvas.style.width = W + "px"; canvas.style.height = rows * ROW + "px";
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(rows * ROW * dpr);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, rows * ROW);
    ctx.font = "11px system-ui, sans-serif";
    drawn = [];
    /* the zoomed node's ancestors: full-width bars above it */
    for (let a = c.parent[z]; a >= 0; a = c.parent[a]) rect(c, a, 0, W, c.depth[a], 0, 0, true);
    const base = range ? range[0] : c.start[z];
    const scale = W / Math.max(range ? range[1] - range[0] : c.bytes[z], 1);
    viewBase = base; viewScale = scale;
    const todo = [z];
    while (todo.length) {
      const v = todo.pop();
      /* the zoomed node fills the width, even one of 0 bytes (a failed node) */
      const x = v === z && !range ? 0 : (c.start[v] - base) * scale;
      const w = v === z && !range ? W : c.bytes[v] * scale;
      rect(c, v, x, w, c.depth[v], 0, 0, false);
      if (c.depth[v] + 1 >= rows) continue;
      let runN = 0, runBytes = 0, runX = 0;
      const right = Math.min(x + w, W);
      for (let ch = v + 1; ch < c.end[v]; ch = c.end[ch]) {
        const cx = (c.start[ch] - base) * scale;
        if (cx >= right) break; /* past the canvas, or past the parent's end (inexact sizes) */
        const cw = Math.min(c.bytes[ch] * scale, right - cx);
        if (cx + cw <= 0) continue; /* a range zoom: left of the canvas */
        if (cw >= MIN_PX) {
          if (runN) { rect(c, v, runX, runBytes * scale, c.depth[v] + 1, runN, runBytes, false, base + runX / scale); runN = 0; runBytes = 0; }
          todo.push(ch);
        } else {
          if (!runN) runX = cx;
          runN += c.end[ch] - ch; runBytes += c.bytes[ch];
        }
      }
      if (runN) rect(c, v, runX, Math.min(runBytes * scale, right - runX), c.depth[v] + 1, runN, runBytes, false, base + runX / scale);
    }
    $("note").textContent = deepest + 1 > rows
      ? "Levels below " + (rows - 1) + " are not drawn (the tree is " + deepest + " deep): click a deep node to zoom in." : "";
    crumbs();
  }

  function crumbs() {
    const c = cur, el = $("crumbs"), parts = [];
    for (let a = zoom; a >= 0; a = c.parent[a]) parts.push(a);
    parts.reverse();
    el.innerHTML = "zoom: " + parts.map((a) => a === zoom && !range
      ? "<b>" + esc(a === 0 ? "whole dump" : nodeLabel(c, a)) + "</b> (" + esc(fmtSize(c.bytes[a])) + ")"
      : '<a data-node="' + a + '">' + esc(a === 0 ? "whole dump" : nodeLabel(c, a)) + "</a>").join(" \u203a ") +
      (range ? " \u203a <b>" + esc(fmtSize(range[1] - range[0])) + " of small nodes</b>" : "");
  }

  function hit(ev) {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, row = Math.floor((ev.clientY - r.top) / ROW);
    const list = drawn[row];
    if (!list) return null;
    for (const d of list) if (x >= d[0] && x < d[0] + Math.max(d[1], 1)) return d;
    return null;
  }

  /* ---- tooltip ----------------------------------------------------------- */

  function tipHtml(d) {
    const c = cur, i = d[2];
    if (d[3]) {
      return '<div class="t">' + d[3] + " nodes too small to draw, merged</div>" +
        '<div><span class="k">bytes</span>' + esc(fmtExact(d[4])) + "</div>" +
        '<div><span class="k">under</span><span class="p">' + esc(i === 0 ? "the dump" : chain(c, i)) + "</span></div>" +
        '<div class="muted">click to zoom in (16 times closer)</div>';
    }
    const total = c.bytes[0] || 1;
    let h = '<div class="t">' + esc(nodeLabel(c, i)) + "</div>";
    if (i === 0) {
      const r = c.raw;
      h += '<div><span class="k">payload</span>' + (r.payload_bytes == null ? "unknown (no dump_end)" : esc(fmtExact(r.payload_bytes))) + "</div>" +
        '<div><span class="k">root</span>' + esc(fmtExact(r.root_bytes)) + "</div>" +
        '<div><span class="k">self</span>' + esc(fmtExact(r.dump_self)) + " (header and trailer)</div>" +
        '<div><span class="k">status</span>' + esc(r.status) + (r.complete ? ", complete" : ", INCOMPLETE") + "</div>";
      for (const t of c.notes.get(0) || []) h += '<div class="p">@ ' + esc(t) + "</div>";
      for (const e of c.errors.get(0) || [])
        h += '<div class="f">' + esc(e.message) + (e.path ? " at " + esc(e.path) : "") + "</div>";
      return h;
    }
    h += '<div><span class="k">tag</span>' + esc(tagText(c.tag[i]) + " \u2014 " + tagMeaning(c.tag[i])) + "</div>" +
      '<div><span class="k">type</span>' + esc(c.type[i] && c.raw.types[c.type[i]] != null ? c.raw.types[c.type[i]] : "\u2014") + "</div>" +
      '<div><span class="k">path</span><span class="p">' + esc(chain(c, i)) + "</span></div>" +
      '<div><span class="k">bytes</span>' + esc(sizeText(c, i)) + "</div>" +
      '<div><span class="k">self</span>' + esc(fmtExact(c.self[i])) + "</div>" +
      '<div><span class="k">share</span>' + (100 * c.bytes[i] / total).toFixed(2) + " % of the dump</div>" +
      '<div><span class="k">depth</span>' + c.depth[i] + "</div>";
    for (const [bit, word] of FLAG_WORDS) if (c.flags[i] & bit) h += '<div class="f">' + esc(word) + "</div>";
    for (const e of c.errors.get(i) || [])
      h += '<div class="f">' + esc(e.message) + (e.path ? " at " + esc(e.path) : "") + "</div>";
    for (const t of c.notes.get(i) || []) h += '<div class="p">@ ' + esc(t) + "</div>";
    return h;
  }

  canvas.addEventListener("mousemove", (ev) => {
    const d = hit(ev);
    if (!d) { tip.hidden = true; return; }
    tip.innerHTML = tipHtml(d);
    tip.hidden = false;
    const pad = 14, tw = tip.offsetWidth, th = tip.offsetHeight;
    let x = ev.clientX + pad, y = ev.clientY + pad;
    if (x + tw > window.innerWidth) x = Math.max(0, ev.clientX - tw - pad);
    if (y + th > window.innerHeight) y = Math.max(0, ev.clientY - th - pad);
    tip.style.left = x + "px"; tip.style.top = y + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  canvas.addEventListener("click", (ev) => {
    const d = hit(ev);
    if (!d) return;
    if (d[3]) {
      /* a merged run: 16 times closer around the click, within the run */
      const at = viewBase + (ev.clientX - canvas.getBoundingClientRect().left) / viewScale;
      const span = Math.max(Math.min(d[4], canvasW / viewScale / 16), 1);
      const lo = Math.max(d[5], Math.min(at - span / 2, d[5] + d[4] - span));
      setZoom(d[2], [lo, lo + span]);
      return;
    }
    let to = d[2];
    if (to === zoom && !range) to = Math.max(cur.parent[zoom], 0); /* click the zoomed node: one level out */
    setZoom(to);
  });
  document.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && document.activeElement !== $("search")) setZoom(0);
  });
  $("summary").addEventListener("click", (ev) => {
    const el = cur && cur.raw.error_list.find((e) => e[0] >= 0);
    if (ev.target.id === "goto-error" && el) setZoom(el[0] + 1);
  });
  $("crumbs").addEventListener("click", (ev) => {
    const a = ev.target.closest("a[data-node]");
    if (a) setZoom(+a.dataset.node);
  });

  function setZoom(i, r) { zoom = i; range = r || null; tip.hidden = true; draw(); }

  /* ---- search ------------------------------------------------------------ */

  function search() {
    const q = $("search").value.trim(), c = cur, out = $("search-result");
    if (!q) { matches = null; out.textContent = ""; draw(); return; }
    let re;
    try { re = new RegExp(q, "i"); } catch (e) { re = new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "i"); }
    const types = c.raw.types.map((t) => t != null && re.test(t));
    const tags = new Map();
    matches = new Uint8Array(c.N);
    let count = 0, bytes = 0;
    for (let i = 1; i < c.N; i++) {
      let m = types[c.type[i]];
      if (!m) {
        if (!tags.has(c.tag[i])) tags.set(c.tag[i], re.test(tagText(c.tag[i])));
        m = tags.get(c.tag[i]);
      }
      if (!m && c.raw.path) m = re.test(c.raw.path[i - 1]);
      if (m) { matches[i] = 1; count++; }
    }
    /* bytes of the outermost matches only (nested ones are inside them) */
    for (let i = 1; i < c.N;) { if (matches[i]) { bytes += c.bytes[i]; i = c.end[i]; } else i++; }
    out.textContent = count + " match" + (count === 1 ? "" : "es") + (count
      ? " \u00b7 " + fmtSize(bytes) + " (" + (100 * bytes / (c.bytes[0] || 1)).toFixed(1) + " % of the dump)" : "");
    draw();
  }
  let searchTimer = 0;
  $("search").addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(search, 120); });

  /* ---- dump selector ----------------------------------------------------- */

  function summary() {
    const r = cur.raw, parts = [];
    parts.push("<b>" + esc(dumpTitle(r)) + "</b>" + (r.tid >= 0 ? " \u00b7 tid " + r.tid : ""));
    parts.push("protocol " + r.protocol);
    parts.push("payload <b id=\"payload-size\">" + (r.payload_bytes == null ? "unknown" : esc(fmtExact(r.payload_bytes))) + "</b>");
    parts.push("root <b id=\"root-size\">" + esc(fmtExact(r.root_bytes)) + "</b>" +
      (r.root_bytes >= 1024 ? " (" + fmtSize(r.root_bytes) + ")" : ""));
    parts.push(r.nodes.toLocaleString("en-US") + " nodes \u00b7 depth " + r.max_depth);
    parts.push("status " + esc(r.status));
    if (!r.complete) parts.push('<span class="loss">INCOMPLETE' +
      (r.unfinished ? ": unfinished" : r.end_lost ? ": end lost" : ": records lost") + "</span>");
    if (r.lower_bounds) parts.push('<span class="loss">sizes are lower bounds</span>');
    if (r.errors) parts.push('<a class="flag" id="goto-error" title="zoom to it">' + r.errors + " unserializable</a>");
    if (r.flagged) parts.push('<span class="flag">' + r.flagged + " flagged nodes</span>");
    $("summary").innerHTML = parts.join(" \u00b7 ");
  }

  function show(k) {
    cur = load(k);
    zoom = 0;
    range = null;
    matches = null;
    summary();
    if ($("search").value.trim()) search(); else { $("search-result").textContent = ""; draw(); }
  }

  function init() {
    $("title").textContent = index.title;
    const sel = $("dump-select"), frag = document.createDocumentFragment();
    dumps.forEach((d, k) => {
      const o = document.createElement("option");
      o.value = k;
      o.textContent = dumpTitle(d) + " \u00b7 " + (d.payload_bytes == null ? "payload unknown" : fmtSize(d.payload_bytes)) +
        " \u00b7 " + d.nodes.toLocaleString("en-US") + " nodes \u00b7 " + d.status + (d.complete ? "" : " \u00b7 INCOMPLETE") +
        (d.errors || d.flagged ? " \u00b7 !!" : "");
      frag.appendChild(o);
    });
    sel.appendChild(frag);
    sel.addEventListener("change", () => show(+sel.value));
    let lost = "";
    if (index.discarded_events || index.lost_records_events)
      lost = " \u00b7 the tracer discarded " + index.discarded_events + " events";
    $("dump-count").textContent = dumps.length + " dump" + (dumps.length === 1 ? "" : "s") + lost;
    if (dumps.length) show(0);
    else $("summary").textContent = "No dump in this trace (none kept by the filters?).";
    let resizeTimer = 0;
    window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(() => cur && draw(), 100); });
  }

  /* What tests and scripts can ask the page (read-only views). */
  window.sertrace = {
    index: index,
    dump: () => cur && cur.raw,
    zoom: () => zoom,
    range: () => range,
    zoomTo: setZoom,
    nodeLabel: (i) => nodeLabel(cur, i),
    /* drawn boxes: {x, y, w, h, node, merged} in CSS pixels of the canvas */
    boxes: () => drawn.flatMap((list, row) => (list || []).map((d) =>
      ({ x: d[0], y: row * ROW, w: d[1], h: ROW, node: d[2], merged: d[3] }))),
    show: show,
  };
  init();
  window.sertrace.ready = true;
})();
