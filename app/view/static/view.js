// rag view: filter, search, sort and page the case rows — embedded in the page as JSON
// (rag view) or read from the rows-<n>.js files beside it (the static export, where each
// file pushes its rows onto window.RAG_ROWS). All rows are filtered and sorted; 50 are in
// the DOM at a time. A large run served by rag view (spec.rows_url) embeds none: each page
// is asked of the server, which filters, searches and sorts by the same rules
// (app/view/index.py). Rows are rendered with textContent only: a case's text is never
// parsed as HTML.
"use strict";
(function () {
  const data = document.getElementById("rows");
  const spec_el = document.getElementById("table-spec");
  if (!spec_el) return;
  const spec = JSON.parse(spec_el.textContent);
  const parsed = (v) => (typeof v === "string" ? JSON.parse(v) : v);  // see export._data
  const remote = spec.rows_url || null;
  const rows = remote ? [] : data ? JSON.parse(data.textContent) : [].concat(...(window.RAG_ROWS || []).map(parsed));
  if (!remote && spec.total !== undefined && rows.length !== spec.total) {
    const warn = document.createElement("p");
    warn.className = "warn";
    warn.textContent = "only " + rows.length + " of the run's " + spec.total + " case rows could be read: a rows-<n>.js file beside this page is missing";
    document.getElementById("cases").before(warn);
  }
  const PAGE = spec.page || 50;
  const $ = (id) => document.getElementById(id);
  const tbody = document.querySelector("#cases tbody");
  const state = { sort: spec.sort || "id", dir: 1, page: 0, sel: 0, shown: [] };

  function val(row, key) {
    if (key in (row.m || {})) return row.m[key];
    if (key in (row.d || {})) return row.d[key];
    return row[key];
  }
  function cmp(a, b) {
    const x = val(a, state.sort), y = val(b, state.sort);
    if (x === y) return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
    if (x === null || x === undefined) return 1;   // no data sorts last either way
    if (y === null || y === undefined) return -1;
    return (x < y ? -1 : 1) * state.dir;
  }
  function keep(row) {
    const f = (id) => ($(id) ? $(id).value : "");
    const tag = f("f-tag"), diff = f("f-difficulty"), verdict = f("f-verdict");
    const q = f("f-search").trim().toLowerCase();
    if (tag && !row.tags.includes(tag)) return false;
    if (diff && row.difficulty !== diff) return false;
    const outcome = f("f-outcome");
    if (outcome && row.outcome !== outcome) return false;
    if (verdict) {
      if (verdict === "bad") { if (!row.verdict || row.verdict === "ok") return false; }
      else if (verdict === "errors") { if (!row.errors) return false; }
      else if (spec.kind === "compare") { if (!row[verdict]) return false; }
      else if (row.verdict !== verdict) return false;
    }
    const metric = f("f-metric");
    if (metric) {
      const v = val(row, metric), lo = f("f-min"), hi = f("f-max");
      if (v === null || v === undefined) { if (lo !== "" || hi !== "") return false; }
      else {
        if (lo !== "" && v < parseFloat(lo)) return false;
        if (hi !== "" && v > parseFloat(hi)) return false;
      }
    }
    if (q) {
      const hay = [row.id, row.q, row.a, row.a_base, row.a_new, (row.why || []).join(" "), row.tags.join(" ")]
        .join("\n").toLowerCase();
      if (!hay.includes(q)) return false;
    }
    return true;
  }
  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }
  function num(v, signed) {
    if (v === null || v === undefined) return "no data";
    const s = Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(3);
    return signed && v > 0 ? "+" + s : s;
  }
  let asked = 0;  // the latest page asked of the server: an older answer is dropped
  function query() {
    const f = (id) => ($(id) ? $(id).value : "");
    const p = new URLSearchParams({
      tag: f("f-tag"), difficulty: f("f-difficulty"), verdict: f("f-verdict"),
      outcome: f("f-outcome"), metric: f("f-metric"), min: f("f-min"), max: f("f-max"),
      q: f("f-search"), sort: state.sort, dir: String(state.dir), page: String(state.page),
    });
    return remote + "?" + p.toString();
  }
  function render() {
    if (remote) {
      const mine = ++asked;
      document.getElementById("cases").dataset.state = "loading";
      fetch(query(), { headers: { Accept: "application/json" } })
        .then((r) => r.json())
        .then((res) => {
          if (mine !== asked) return;
          if (res.error) { $("count").textContent = "cannot list the cases: " + res.error; return; }
          state.page = res.page;
          draw(res.rows, res.shown, res.total, res.pages);
          document.getElementById("cases").dataset.state = "ready";
        })
        .catch((err) => { if (mine === asked) $("count").textContent = "cannot list the cases: " + err; });
      return;
    }
    state.shown = rows.filter(keep).sort(cmp);
    const pages = Math.max(1, Math.ceil(state.shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const start = state.page * PAGE;
    draw(state.shown.slice(start, start + PAGE), state.shown.length, rows.length, pages);
  }
  function draw(list, shown, total, pages) {
    tbody.replaceChildren();
    list.forEach((row, i) => {
      const tr = document.createElement("tr");
      tr.tabIndex = 0;
      tr.dataset.href = row.href;
      tr.dataset.id = row.id;
      const td = document.createElement("td");
      const a = document.createElement("a");
      a.href = row.href; a.textContent = row.id;
      td.appendChild(a); tr.appendChild(td);
      const qtd = cell(tr, row.q);
      if (spec.kind === "compare") {
        cell(tr, row.a_base, "small");
        cell(tr, row.a_new, "small");
        const flags = ["changed", "improved", "regressed", "newly_refused", "newly_answered"]
          .filter((k) => row[k]).map((k) => k.replace("_", " "));
        cell(tr, flags.join(", ") || "unchanged", row.regressed ? "regressed" : row.improved ? "improved" : "");
        spec.metrics.forEach((m) => cell(tr, num(row.d[m], true), "num" + (row.d[m] === null ? " nodata" : "")));
      } else {
        row.tags.forEach((t) => { const s = document.createElement("span"); s.className = "tag"; s.textContent = t; qtd.appendChild(s); });
        cell(tr, row.difficulty);
        const v = cell(tr, row.verdict === "ok" ? "ok" : row.verdict.replace("-", " ") + ": " + row.why.join("; "), row.verdict);
        v.classList.add("small");
        if (spec.outcomes) cell(tr, spec.outcomes[row.outcome] || "", "small outcome-" + (row.outcome || "none"));
        cell(tr, row.errors ? String(row.errors) : "", row.errors ? "num fail" : "num");
        spec.metrics.forEach((m) => cell(tr, num(row.m[m]), "num" + (row.m[m] === null ? " nodata" : "")));
        cell(tr, spec.priced ? "$" + row.cost.toFixed(4) : "unpriced", "num");
        cell(tr, row.latency_ms === null ? "—" : row.latency_ms.toFixed(0), "num");
      }
      tr.addEventListener("click", (ev) => { if (ev.target.tagName !== "A") location.href = row.href; });
      tbody.appendChild(tr);
      if (i === state.sel) tr.classList.add("sel");
    });
    $("count").textContent = shown + " of " + total + " cases · page " + (state.page + 1) + "/" + pages;
    $("prev").disabled = state.page === 0;
    $("next").disabled = state.page >= pages - 1;
  }
  function select(i) {
    const trs = tbody.querySelectorAll("tr");
    if (!trs.length) return;
    state.sel = Math.max(0, Math.min(trs.length - 1, i));
    trs.forEach((tr, j) => tr.classList.toggle("sel", j === state.sel));
    trs[state.sel].focus();
  }
  document.querySelectorAll(".filters input, .filters select").forEach((el) =>
    el.addEventListener("input", () => { state.page = 0; state.sel = 0; render(); }));
  document.querySelectorAll("#cases th button[data-sort]").forEach((b) =>
    b.addEventListener("click", () => {
      const key = b.dataset.sort;
      state.dir = state.sort === key ? -state.dir : 1;
      state.sort = key;
      render();
    }));
  $("prev").addEventListener("click", () => { state.page--; render(); });
  $("next").addEventListener("click", () => { state.page++; render(); });
  document.addEventListener("keydown", (ev) => {
    const typing = ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement.tagName);
    if (ev.key === "/" && !typing) { ev.preventDefault(); $("f-search").focus(); return; }
    if (typing) { if (ev.key === "Escape") document.activeElement.blur(); return; }
    if (ev.key === "j") select(state.sel + 1);
    else if (ev.key === "k") select(state.sel - 1);
    else if (ev.key === "Enter" && document.activeElement.dataset.href) location.href = document.activeElement.dataset.href;
    else if (ev.key === "n" && !$("next").disabled) { state.page++; state.sel = 0; render(); }
    else if (ev.key === "p" && !$("prev").disabled) { state.page--; state.sel = 0; render(); }
  });
  render();
})();
