// rag view: draws one case page from its data — for `rag view` (the data is embedded in
// the page) and for the static export (case.html#<chunk>/<case id>: the case is read from
// the data file c-<chunk>.js beside it, a script, since a page opened from disk cannot
// fetch() a file). Every text from the report is set with textContent / append(string):
// a case's text is never parsed as HTML, and no link or attribute is made from it.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const main = document.querySelector("main");

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v; else e.setAttribute(k, String(v));
    }
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      e.append(k instanceof Node ? k : String(k));
    }
    return e;
  }
  const isNum = (v) => typeof v === "number" && isFinite(v);
  const fmt = (v, d) => (v === null || v === undefined ? "no data" : isNum(v) ? v.toFixed(d === undefined ? 3 : d) : String(v));
  const list = (v) => (Array.isArray(v) ? v : []);
  const obj = (v) => (v && typeof v === "object" && !Array.isArray(v) ? v : {});
  function join(items, sep) {
    const out = [];
    items.forEach((it, i) => { if (i) out.push(sep); out.push(it); });
    return out;
  }
  function say(text, cls) {
    main.replaceChildren(el("p", { class: cls || "nodata", id: "case-message" }, text));
  }

  function answerParts(c, t) {
    const text = typeof c.answer === "string" ? c.answer : "";
    const valid = {};
    list(t.citations).forEach((ck) => { valid[ck.n] = !!ck.valid; });
    const out = [];
    let pos = 0;
    for (const m of text.matchAll(/\[(\d{1,3})\]/g)) {
      if (m.index > pos) out.push(text.slice(pos, m.index));
      const ok = valid[parseInt(m[1], 10)];
      out.push(el("span", {
        class: ok ? "cite-ok" : "cite-bad",
        title: ok ? "citation checked: in the supplied documents" : "citation outside the supplied documents",
      }, m[0]));
      pos = m.index + m[0].length;
    }
    if (pos < text.length) out.push(text.slice(pos));
    return out;
  }

  function promptRef(t) {
    const out = [el("code", null, t.prompt_version || "?"), " ", t.prompt_hash || ""];
    for (const [role, ver] of Object.entries(obj(t.prompt_versions))) out.push(" · " + role + " ", el("code", null, ver));
    return out;
  }

  function render(run, data) {
    const c = obj(data.c), x = obj(data.x);
    const t = c.trace && typeof c.trace === "object" ? c.trace : null;
    const tr = t || {};
    const golden = x.golden && typeof x.golden === "object" ? x.golden : null;
    document.title = c.id + " — run " + run.run_id;
    const back = $("back");
    if (back) { back.href = run.back; back.textContent = "← run " + run.run_id; }
    const parts = [];
    parts.push(el("h1", null, "Case " + c.id + " ", el("span", { class: "small muted" }, "run " + run.run_id + " · " + run.suite)));
    const state = c.refused === null || c.refused === undefined ? "no answer" : c.refused ? "refused" : "answered";
    parts.push(el("p", { id: "case-flags" },
      list(c.tags).map((tag) => el("span", { class: "tag" }, tag)),
      " difficulty " + (c.difficulty || "unspecified") + " · " + (c.expected_refusal ? "should refuse" : "should answer") + " · " + state,
      x.verdict && x.verdict !== "ok" ? [" · ", el("span", { class: x.verdict }, "bad case: " + list(x.why).join("; "))] : null));
    if (x.note) parts.push(el("p", { class: "warn" }, x.note));

    const q = el("section", { "aria-labelledby": "h-q" }, el("h2", { id: "h-q" }, "Question"));
    if (golden && list(golden.history).length) {
      q.append(el("h3", null, "History"));
      list(golden.history).forEach((turn) => q.append(el("div", { class: "text" }, el("b", null, turn[0] + ":"), " " + turn[1])));
    }
    q.append(el("div", { class: "text", id: "question" }, c.question));
    if (t && t.rewritten_query && t.rewritten_query !== c.question) {
      q.append(el("p", { class: "small" }, "rewritten query (" + obj(t.rewrite).strategy + "): ", el("span", { class: "text" }, t.rewritten_query)));
    }
    parts.push(q);

    const ans = el("div", null, el("h2", null, "Answer"));
    const answer = answerParts(c, tr);
    ans.append(el("div", { class: "text", id: "answer" },
      answer.length ? answer : el("span", { class: "nodata" }, "no answer (the pipeline failed: see errors)")));
    if (list(tr.citations).length) {
      ans.append(el("p", { class: "small" }, "citations: ", join(list(tr.citations).map((ck) =>
        [el("span", { class: ck.valid ? "cite-ok" : "cite-bad" }, "[" + ck.n + "]"), " " + (ck.chunk_id || "outside the documents")]), " · ")));
    }
    if (tr.rejected) ans.append(el("p", { class: "small warn" }, "a rejection keyword replaced the model's text; raw answer: ", el("span", { class: "text" }, tr.raw_answer)));
    const gold = el("div", null, el("h2", null, "Golden answer"));
    if (golden && golden.answer !== null && golden.answer !== undefined) gold.append(el("div", { class: "text", id: "golden" }, golden.answer));
    else gold.append(el("p", { class: "nodata" }, "not available"));
    // which terms the answer holds: the run's own finding (the metrics' detail), not redone
    const found = (metric, key) => {
      const d = obj(obj(obj(c.metrics)[metric]).detail)[key];
      return Array.isArray(d) ? d : null;
    };
    const missing = found("completeness", "missing"), violations = found("must_not_include", "violations");
    if (golden && list(golden.must_include).length) {
      gold.append(el("p", { id: "must-include" }, "must include: ", join(list(golden.must_include).map((term) =>
        missing === null ? el("span", { class: "nodata" }, "? " + term + " (not checked by this run)")
          : el("span", { class: missing.includes(term) ? "fail" : "pass" }, (missing.includes(term) ? "✗ " : "✓ ") + term)), " · ")));
    }
    if (golden && list(golden.must_not_include).length) {
      gold.append(el("p", { id: "must-not-include" }, "must not include: ", join(list(golden.must_not_include).map((term) =>
        violations === null ? el("span", { class: "nodata" }, "? " + term + " (not checked by this run)")
          : el("span", { class: violations.includes(term) ? "fail" : "pass" }, (violations.includes(term) ? "✗ present: " : "✓ absent: ") + term)), " · ")));
    }
    parts.push(el("section", { class: "sbs" }, ans, gold));

    if (list(c.errors).length) {
      parts.push(el("h2", null, "Errors"), list(c.errors).map((e) => el("p", { class: "fail" }, e)));
    }

    parts.push(el("h2", null, "Metrics"));
    const metrics = Object.entries(obj(c.metrics));
    parts.push(el("table", { id: "metrics" },
      el("thead", null, el("tr", null, el("th", null, "metric"), el("th", { class: "num" }, "value"), el("th", null, "reason / detail"))),
      el("tbody", null, metrics.map(([name, s]) => el("tr", null,
        el("th", { scope: "row" }, name),
        el("td", { class: "num" + (s.value === null ? " nodata" : "") }, fmt(s.value)),
        el("td", { class: "small" }, s.reason || ""))))));

    parts.push(el("h2", null, "Judge samples"));
    const judged = metrics.filter(([name]) => obj(obj(run.metrics)[name]).kind === "judge");
    if (!judged.length) parts.push(el("p", { class: "nodata" }, "no judge metric in this run"));
    judged.forEach(([name, s]) => {
      const detail = obj(s.detail), reasons = list(detail.reasoning);
      parts.push(el("h3", null, name + " = " + fmt(s.value),
        s.spread !== null && s.spread !== undefined ? [" ", el("span", { class: "small muted" }, "spread " + fmt(s.spread))] : null,
        " ", el("span", { class: "small muted" }, detail.judge_prompt || "")));
      if (s.reason) parts.push(el("p", { class: "small" }, s.reason));
      parts.push(el("table", { class: "judge" },
        el("thead", null, el("tr", null, el("th", { class: "num" }, "#"), el("th", { class: "num" }, "score"), el("th", null, "reasoning"))),
        el("tbody", null, list(s.samples).map((v, i) => el("tr", null,
          el("td", { class: "num" }, String(i + 1)),
          el("td", { class: "num" + (v === null ? " nodata" : "") }, fmt(v)),
          el("td", null, reasons[i] ? reasons[i] : "—"))))));
      list(detail.errors).forEach((e) => parts.push(el("p", { class: "fail small" }, e)));
    });

    parts.push(el("h2", null, "Retrieved chunks"));
    const hits = list(tr.retrieved), context = list(tr.context_chunk_ids);
    const goldenIds = golden ? list(golden.chunk_ids) : [];
    const acl = obj(x.acl);
    if (hits.length) {
      parts.push(el("table", { id: "chunks" },
        el("thead", null, el("tr", null, ["#", "chunk", "title", "score", "raw", "query", "ACL", "in prompt", "golden"].map((h, i) =>
          el("th", { class: [0, 3, 4].includes(i) ? "num" : null }, h)))),
        el("tbody", null, hits.map((h, i) => {
          const at = context.indexOf(h.chunk_id);
          const known = typeof acl[h.chunk_id] === "string";
          return el("tr", null,
            el("td", { class: "num" }, String(i + 1)), el("td", null, el("code", null, h.chunk_id)), el("td", null, h.title),
            el("td", { class: "num" }, fmt(h.score)), el("td", { class: "num" }, fmt(h.raw_score)), el("td", null, h.query),
            el("td", null, known ? acl[h.chunk_id] : "unknown (not in the KB)"),
            el("td", null, at >= 0 ? "[" + (at + 1) + "]" : "—"), el("td", null, goldenIds.includes(h.chunk_id) ? "✓" : ""));
        }))));
      if (t) parts.push(el("p", { class: "small muted" }, "user ACL: " + list(t.user_acl).join(", ")));
    } else parts.push(el("p", { class: "nodata" }, "no retrieval recorded"));

    parts.push(el("h2", null, "Prompt as sent"));
    const sent = list(tr.sent), texts = obj(x.texts);
    if (sent.length) {
      const box = el("div", { id: "prompt" }, el("p", { class: "small muted" }, promptRef(tr),
        " — the answer call's " + sent.length + " message(s) as handed to the provider"));
      sent.forEach((m) => {
        box.append(el("h3", { class: "small" }, m.role + " ", el("span", { class: "muted" },
          "· " + m.chars + " characters · sha256 " + String(m.sha256 || "").slice(0, 12) + "…")));
        const text = typeof m.content === "string" ? m.content : texts[m.sha256];
        if (typeof text !== "string") box.append(el("p", { class: "nodata" }, "text not in this report"));
        else {
          box.append(el("pre", { class: "sent" }, text));
          if (m.cut) box.append(el("p", { class: "small muted" }, "… " + m.cut + " more characters not kept (a trace keeps " + run.limit + " per message)"));
        }
      });
      parts.push(box);
    } else {
      let why;
      if (!t) why = ["no trace: the pipeline failed before it produced one"];
      else if (t.mode === "no_hits" || t.mode === "injection_refused") why = ["no model call: the pipeline answered without one (mode " + t.mode + ")"];
      else why = ["not recorded (a report written before the trace kept the sent messages) — ", promptRef(t), ". Re-render it with ", el("code", null, "rag prompts render")];
      parts.push(el("p", { class: "nodata", id: "prompt" }, why, "."));
    }

    parts.push(el("h2", null, "Cost and timing"));
    const cost = run.priced && isNum(c.cost_usd) ? "$" + c.cost_usd.toFixed(4) : "unpriced";
    if (t) {
      const tok = obj(t.tokens);
      parts.push(el("p", { id: "timing" }, "latency " + fmt(t.latency_ms, 0) + " ms · tokens in " + tok.input + " / out " + tok.output + " · " +
        tok.llm_calls + " LLM call(s), " + tok.cached_calls + " cached · model ", el("code", null, t.model), " · cost " + cost));
    } else parts.push(el("p", { class: "nodata", id: "timing" }, "no trace (the pipeline failed before it produced one) · cost " + cost));
    main.replaceChildren(...parts.flat(Infinity));
    main.dataset.case = c.id;
  }

  const embedded = $("case-data");
  if (embedded) { // rag view: the server put the case in the page
    render(JSON.parse($("run-info").textContent), JSON.parse(embedded.textContent));
    return;
  }
  // the static export: #<chunk>/<case id, URI-encoded>
  function show() {
    const run = typeof window.RAG_RUN === "string" ? JSON.parse(window.RAG_RUN) : window.RAG_RUN;
    const m = /^#(\d+)\/(.+)$/.exec(location.hash);
    if (!run) { say("run.js is missing beside this page: export the run again with rag report html", "fail"); return; }
    const back = $("back");
    if (back) { back.href = run.back; back.textContent = "← run " + run.run_id; }
    if (!m) { say("no case chosen: open a case from the run's table"); return; }
    let id;
    try { id = decodeURIComponent(m[2]); } catch (e) { say("not a case link: " + m[2], "fail"); return; }
    const chunk = m[1];
    const found = () => {
      let cases = (window.RAG_CASES || {})[chunk];
      if (typeof cases === "string") cases = JSON.parse(cases);  // see export._data
      if (!Array.isArray(cases)) { say("case data file c-" + chunk + ".js is missing beside this page", "fail"); return; }
      const hit = cases.find((d) => d.c && d.c.id === id);
      if (!hit) { say("case " + id + " is not in this export", "fail"); return; }
      render(run, hit);
    };
    if ((window.RAG_CASES || {})[chunk] !== undefined) { found(); return; }
    say("loading case " + id + " …");
    const s = document.createElement("script");
    s.src = "c-" + chunk + ".js";
    s.onload = found;
    s.onerror = () => say("case data file c-" + chunk + ".js is missing beside this page", "fail");
    document.body.appendChild(s);
  }
  window.addEventListener("hashchange", show);
  show();
})();
