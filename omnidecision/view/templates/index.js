/* The run list of `omnidecision view`: filters and pages over window.OMNI_VIEW (assets/runs.js).
   Plain DOM, no library, no network; data goes into the page as text only (textContent), never as markup.
   The filter state lives in the URL hash, so coming back from a run page keeps it. */
(function () {
  "use strict";
  var data = window.OMNI_VIEW;
  var F = {};
  data.fields.forEach(function (name, i) { F[name] = i; });
  var FILTERS = ["planner", "outcome", "correct", "level", "category"];
  var FIELD_OF = {planner: "src", outcome: "outcome", correct: "correct", level: "level", category: "category"};
  var rowsEl = document.getElementById("rows");
  var countEl = document.getElementById("count");
  var textEl = document.getElementById("f-text");
  var sizeEl = document.getElementById("f-size");
  var state = {page: 0};

  function label(key, value) {
    if (key === "planner") { return data.sources[value].label; }
    return value === "" ? "(none)" : String(value);
  }

  // the options of each filter: every value present, with its count
  FILTERS.forEach(function (key) {
    var sel = document.getElementById("f-" + key);
    var counts = {};
    data.rows.forEach(function (r) {
      var v = r[F[FIELD_OF[key]]];
      counts[v] = (counts[v] || 0) + 1;
    });
    Object.keys(counts).sort().forEach(function (v) {
      var opt = document.createElement("option");
      opt.value = v;
      opt.textContent = label(key, v) + " (" + counts[v] + ")";
      sel.appendChild(opt);
    });
    sel.addEventListener("change", function () { state.page = 0; update(); });
  });
  textEl.addEventListener("input", function () { state.page = 0; update(); });
  sizeEl.addEventListener("change", function () { state.page = 0; update(); });
  document.getElementById("prev").addEventListener("click", function () { state.page -= 1; update(); });
  document.getElementById("next").addEventListener("click", function () { state.page += 1; update(); });
  document.getElementById("f-reset").addEventListener("click", function () {
    FILTERS.forEach(function (key) { document.getElementById("f-" + key).value = ""; });
    textEl.value = "";
    state.page = 0;
    update();
  });

  function chosen() {
    var out = {};
    FILTERS.forEach(function (key) {
      var v = document.getElementById("f-" + key).value;
      if (v !== "") { out[key] = v; }
    });
    return out;
  }

  function matches(r, want, text) {
    for (var key in want) {
      if (String(r[F[FIELD_OF[key]]]) !== want[key]) { return false; }
    }
    if (text) {
      var hay = (r[F.task] + " " + r[F.question] + " " + r[F.answer]).toLowerCase();
      if (hay.indexOf(text) < 0) { return false; }
    }
    return true;
  }

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    td.textContent = text;
    if (cls) { td.className = cls; }
    tr.appendChild(td);
    return td;
  }

  function link(parent, href, text) {
    var a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    parent.appendChild(a);
    return a;
  }

  function writeHash(want, text) {
    var parts = [];
    Object.keys(want).forEach(function (k) { parts.push(k + "=" + encodeURIComponent(want[k])); });
    if (text) { parts.push("text=" + encodeURIComponent(text)); }
    if (state.page) { parts.push("page=" + (state.page + 1)); }
    var hash = parts.join("&");
    if (location.hash.slice(1) !== hash) { history.replaceState(null, "", hash ? "#" + hash : location.pathname); }
  }

  function readHash() {
    location.hash.slice(1).split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i < 0) { return; }
      var k = kv.slice(0, i), v = decodeURIComponent(kv.slice(i + 1));
      if (FILTERS.indexOf(k) >= 0) {
        var sel = document.getElementById("f-" + k);
        if (sel.querySelector("option[value='" + CSS.escape(v) + "']")) { sel.value = v; }
      } else if (k === "text") { textEl.value = v; } else if (k === "page") { state.page = Math.max(0, (parseInt(v, 10) || 1) - 1); }
    });
  }

  function update() {
    var want = chosen();
    var text = textEl.value.trim().toLowerCase();
    var hits = data.rows.filter(function (r) { return matches(r, want, text); });
    var size = parseInt(sizeEl.value, 10) || 100;
    var pages = Math.max(1, Math.ceil(hits.length / size));
    state.page = Math.min(Math.max(0, state.page), pages - 1);
    var start = state.page * size, page = hits.slice(start, start + size);
    var frag = document.createDocumentFragment();
    page.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.className = "run o-" + r[F.outcome];
      tr.dataset.outcome = r[F.outcome];
      tr.dataset.correct = r[F.correct];
      tr.dataset.planner = data.sources[r[F.src]].label;
      link(cell(tr, ""), r[F.href], r[F.task]);
      cell(tr, String(r[F.sample]));
      cell(tr, data.sources[r[F.src]].label);
      cell(tr, r[F.question], "q");
      cell(tr, r[F.level]);
      cell(tr, r[F.category]);
      cell(tr, r[F.outcome], "badge-cell o-" + r[F.outcome]);
      cell(tr, r[F.correct], "c-" + r[F.correct]);
      cell(tr, String(r[F.steps]), "num");
      cell(tr, String(r[F.tools]), "num");
      cell(tr, r[F.answer]);
      cell(tr, r[F.gold]);
      var pairs = cell(tr, "");
      r[F.pairs].forEach(function (p) { link(pairs, p[1], "vs " + data.sources[p[0]].label); });
      frag.appendChild(tr);
    });
    rowsEl.replaceChildren(frag);
    countEl.textContent = hits.length ? ("runs " + (start + 1) + "–" + (start + page.length) + " of " + hits.length +
      (hits.length !== data.rows.length ? " matching (" + data.rows.length + " in all)" : "") +
      " · page " + (state.page + 1) + "/" + pages) : "no run matches (" + data.rows.length + " in all)";
    document.getElementById("prev").disabled = state.page === 0;
    document.getElementById("next").disabled = state.page >= pages - 1;
    writeHash(want, textEl.value.trim());
  }

  readHash();
  update();
  document.body.dataset.ready = "1";
})();
