// The orbench HTML report's prompt browser (orbench_pytest/reports/html.py embeds it).
// Every value in the data is untrusted: it only ever reaches the page through textContent,
// an <option>'s value or a CSV cell; nothing is parsed as HTML and no link is made from it.
// The data are two gzip'd, base64'd JSON blocks: the rows' short fields, read first to draw the
// list, and their texts (prompt, answer, the baseline's answer), read right after.
async function unpack(id) {
  const packed = document.getElementById(id).textContent;
  const bytes = Uint8Array.fromBase64 ? Uint8Array.fromBase64(packed)
    : Uint8Array.from(atob(packed), (ch) => ch.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

(async function () {
  "use strict";
  const ROW_H = 28;
  const data = await unpack("orbench-rows");
  const C = {};
  data.columns.forEach((name, i) => { C[name] = i; });
  const rows = data.rows;
  let texts = null;  // [prompt, answer, base_answer] per row, once read
  let textsRead = null;  // the promise of them
  const T = { prompt: 0, answer: 1, base_answer: 2, whole: 3 };
  function textOf(i, name) { return texts === null ? "" : texts[i][T[name]]; }
  function withTexts(then) {
    if (texts !== null) then();
    else textsRead.then(then);
  }
  const $ = (id) => document.getElementById(id);
  const list = $("list"), spacer = $("spacer"), detail = $("detail"), head = $("list-head");
  const WIDTHS = {
    id: "minmax(150px, 1.2fr)", suite: "minmax(70px, .6fr)", category: "minmax(80px, .7fr)",
    expect: "70px", verdict: "105px", outcome: "95px", baseline: "85px", samples: "70px",
    prompt: "minmax(200px, 4fr)",
  };
  // A column no row fills (no baseline, no samples) is left out.
  const SHOWN = [
    ["id", "prompt id"], ["suite", "suite"], ["category", "category"], ["expect", "expected"],
    ["verdict", "verdict"], ["outcome", "outcome"], ["baseline", "baseline"],
    ["samples", "refused"], ["prompt", "prompt"],
  ].filter(([key]) => key === "prompt" || rows.some((r) => r[C[key]] !== null && r[C[key]] !== ""));
  $("prompts").style.setProperty("--columns", SHOWN.map(([key]) => WIDTHS[key]).join(" "));
  const PAIRINGS = new Set(["regression", "fixed", "known"]);
  const LABEL_COLUMNS = $("export").dataset.columns.split(",");
  let view = rows.map((_, i) => i);  // indexes of the rows shown, in order
  let selected = -1;  // a position in view
  let sortKey = "", sortDown = false;
  let lower = null;  // prompts and answers in lower case, made at the first search

  function el(tag, text, cls) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function refused(row) {
    const n = row[C.samples];
    if (n === null || n === undefined) return "";
    return row[C.refusals] + "/" + n;
  }

  function cell(i, key) {
    if (key === "prompt") return textOf(i, "prompt");
    return key === "samples" ? refused(rows[i]) : rows[i][C[key]];
  }

  // --- filters ------------------------------------------------------------------------------
  const FILTERS = ["suite", "category", "expect", "verdict"];
  FILTERS.forEach((key) => {
    const select = $("f-" + key);
    const values = Array.from(new Set(rows.map((r) => r[C[key]]))).sort();
    values.forEach((value) => {
      const option = el("option", value === "" ? "(none)" : value);
      option.value = value;
      select.appendChild(option);
    });
  });
  SHOWN.forEach(([key, title]) => {
    const option = el("option", title);
    option.value = key;
    $("f-sort").appendChild(option);
    const span = el("span", title);
    span.dataset.key = key;
    span.addEventListener("click", () => {
      sortDown = sortKey === key ? !sortDown : false;
      sortKey = key;
      $("f-sort").value = key;
      apply();
    });
    head.appendChild(span);
  });

  function matches(i, want, text) {
    const row = rows[i];
    for (const key of FILTERS) {
      if (want[key] !== null && row[C[key]] !== want[key]) return false;
    }
    if (want.mismatch && !row[C.mismatch]) return false;
    if (want.regression && row[C.baseline] !== "regression") return false;
    if (text && lower[i].indexOf(text) < 0) return false;
    return true;
  }

  function apply(keepNode) {
    const want = {};
    FILTERS.forEach((key) => {
      const select = $("f-" + key);
      want[key] = select.selectedIndex > 0 ? select.value : null;
    });
    want.mismatch = $("f-mismatch").checked;
    want.regression = $("f-regression").checked;
    const text = $("f-text").value.trim().toLowerCase();
    if ((text || $("f-sort").value === "prompt") && texts === null) {
      // searched or sorted by prompt before the texts were read: done once they are
      withTexts(() => apply(keepNode));
      return;
    }
    if (text && lower === null) {
      lower = rows.map((r, i) => (textOf(i, "prompt") + "\n" + textOf(i, "answer") + "\n"
        + r[C.id]).toLowerCase());
    }
    const current = selected >= 0 ? view[selected] : -1;
    view = [];
    for (let i = 0; i < rows.length; i++) {
      if (matches(i, want, text)) view.push(i);
    }
    sortKey = $("f-sort").value;
    if (sortKey) {
      const key = sortKey, sign = sortDown ? -1 : 1;
      const value = key === "samples"
        ? (i) => { const r = rows[i]; return r[C.samples] ? r[C.refusals] / r[C.samples] : -1; }
        : (i) => { const v = cell(i, key); return String(v === null ? "" : v); };
      view.sort((a, b) => {
        const x = value(a), y = value(b);
        return (x < y ? -1 : x > y ? 1 : a - b) * sign;
      });
    }
    const keep = keepNode !== undefined ? keepNode : current;
    selected = view.indexOf(keep);
    $("count").textContent = "showing " + view.length + " of " + rows.length + " prompts";
    spacer.style.height = view.length * ROW_H + "px";
    draw(true);
  }

  // --- the list: only the rows on screen are in the page --------------------------------------
  let drawn = [-1, -1];
  function draw(force) {
    const first = Math.max(0, Math.floor(list.scrollTop / ROW_H) - 5);
    const last = Math.min(view.length, first + Math.ceil(list.clientHeight / ROW_H) + 10);
    if (!force && first === drawn[0] && last === drawn[1]) return;
    drawn = [first, last];
    const rowsShown = document.createDocumentFragment();
    for (let p = first; p < last; p++) {
      const row = rows[view[p]];
      const div = el("div", null, "row");
      if (row[C.mismatch]) div.classList.add("mismatch");
      if (PAIRINGS.has(row[C.baseline])) div.classList.add(row[C.baseline]);
      if (p === selected) div.classList.add("selected");
      div.style.top = p * ROW_H + "px";
      div.dataset.pos = p;
      SHOWN.forEach(([key]) => { div.appendChild(el("span", cell(view[p], key), key)); });
      rowsShown.appendChild(div);
    }
    spacer.replaceChildren(rowsShown);
  }
  list.addEventListener("scroll", () => draw(false));
  window.addEventListener("resize", () => draw(true));
  list.addEventListener("click", (event) => {
    const target = event.target.closest(".row");
    if (!target) return;
    select(Number(target.dataset.pos));
    open();
  });

  function select(position) {
    if (!view.length) return;
    selected = Math.max(0, Math.min(view.length - 1, position));
    const top = selected * ROW_H;
    if (top < list.scrollTop) list.scrollTop = top;
    else if (top + ROW_H > list.scrollTop + list.clientHeight) {
      list.scrollTop = top + ROW_H - list.clientHeight;
    }
    draw(true);
  }

  // --- one prompt, whole ----------------------------------------------------------------------
  function open() {
    if (selected < 0) return;
    const nodeid = rows[view[selected]][C.nodeid] || rows[view[selected]][C.id];
    const hash = "#" + encodeURIComponent(nodeid);
    if (location.hash !== hash) history.replaceState(null, "", hash);
    show(view[selected]);
  }

  function show(i) {
    withTexts(() => showWhole(i));
  }

  function showWhole(i) {
    const row = rows[i];
    const nodeid = row[C.nodeid] || row[C.id];
    detail.replaceChildren();
    detail.hidden = false;
    const title = el("h3", row[C.id]);
    detail.appendChild(title);
    const link = el("a", "permalink");
    link.href = "#" + encodeURIComponent(nodeid);  // this page's own anchor, never the data's
    link.id = "permalink";
    detail.appendChild(link);
    const facts = el("dl");
    const add = (name, value) => {
      if (value === null || value === undefined || value === "") return;
      facts.appendChild(el("dt", name));
      facts.appendChild(el("dd", value));
    };
    add("node id", nodeid);
    add("suite", row[C.suite] + (row[C.variant] ? " [" + row[C.variant] + "]" : ""));
    add("category", row[C.category]);
    add("expected", row[C.expect]);
    add("verdict", row[C.verdict]);
    add("outcome", row[C.outcome]);
    add("judge", row[C.judge]);
    add("judge's reason", row[C.judge_reason]);
    add("gate", row[C.reason]);
    add("baseline", row[C.baseline]);
    if (row[C.samples]) {
      add("samples", row[C.refusals] + " of " + row[C.samples] + " answers refused ("
        + (100 * row[C.refusals] / row[C.samples]).toFixed(1) + "%)");
    }
    add("disputed", row[C.disputed]);
    detail.appendChild(facts);
    detail.appendChild(el("h3", "Prompt"));
    detail.appendChild(el("pre", textOf(i, "prompt") || "(not in the results file)", "prompt"));
    const answerTitle = textOf(i, "whole") ? "Answer" : "Answer (excerpt: the run's whole answers "
      + "were past their total bound)";
    if (row[C.base_verdict] !== null && row[C.base_verdict] !== undefined) {
      const pair = el("div", null, "pair");
      const now = el("div");
      now.appendChild(el("h3", answerTitle + ": " + row[C.verdict]));
      now.appendChild(el("pre", textOf(i, "answer"), "answer"));
      const before = el("div");
      before.appendChild(el("h3", "Baseline's answer: " + row[C.base_verdict]));
      before.appendChild(el("pre", textOf(i, "base_answer"), "base-answer"));
      pair.appendChild(now);
      pair.appendChild(before);
      detail.appendChild(pair);
    } else {
      detail.appendChild(el("h3", answerTitle));
      detail.appendChild(el("pre", textOf(i, "answer") || "(empty)", "answer"));
    }
  }

  function fromHash() {
    let wanted = location.hash.slice(1);
    if (!wanted) return;
    try { wanted = decodeURIComponent(wanted); } catch (e) { /* kept as it is */ }
    let i = rows.findIndex((r) => r[C.nodeid] === wanted);
    if (i < 0) i = rows.findIndex((r) => r[C.id] === wanted);
    if (i < 0) return;
    if (view.indexOf(i) < 0) {  // filtered out: show everything again
      FILTERS.forEach((key) => { $("f-" + key).selectedIndex = 0; });
      $("f-mismatch").checked = $("f-regression").checked = false;
      $("f-text").value = "";
      apply(i);
    }
    select(view.indexOf(i));
    show(i);
    detail.scrollIntoView();
  }
  window.addEventListener("hashchange", fromHash);

  // --- keys -----------------------------------------------------------------------------------
  document.addEventListener("keydown", (event) => {
    const tag = event.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "j") { select(selected + 1); event.preventDefault(); }
    else if (event.key === "k") { select(selected - 1); event.preventDefault(); }
    else if (event.key === "Enter") { open(); event.preventDefault(); }
  });

  // --- CSV: the labels file's columns, cells safe in a spreadsheet (core/untrusted.csv_cell) -
  function csvCell(text) {
    text = String(text);
    text = text.replace(/\\(?=u\{)|[\p{C}\p{Zl}\p{Zp}]/gu, (ch) =>
      ch === "\n" || ch === "\t" ? ch : "\\u{" + ch.codePointAt(0).toString(16) + "}");
    text = text.replace(/^([ \t]*):(?=:)/gm, "$1\\u{3a}");
    text = text.split("##[").join("#\\u{23}[");
    const rest = text.replace(/^'+/, "");
    return rest && "=+-@\t\r".indexOf(rest[0]) >= 0 ? "'" + text : text;
  }

  function csvLine(cells) {
    return cells.map((value) => {
      const text = csvCell(value === null || value === undefined ? "" : value);
      return /[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
    }).join(",") + "\r\n";
  }

  $("export").addEventListener("click", () => withTexts(exportCsv));
  function exportCsv() {
    const parts = [csvLine(LABEL_COLUMNS)];
    for (const i of view) {
      const r = rows[i];
      // label, labelled_at: for the reader to fill in; stratum_size left empty: a filtered
      // view is not the random sample judge-check would correct the run's rates with.
      const cells = { judge_verdict: r[C.verdict], prompt: textOf(i, "prompt"),
                      response: textOf(i, "answer") };
      parts.push(csvLine(LABEL_COLUMNS.map((name) =>
        name in cells ? cells[name] : name in C ? r[C[name]] : "")));
    }
    const url = URL.createObjectURL(new Blob(parts, { type: "text/csv" }));
    const a = el("a");
    a.href = url;
    a.download = "orbench-labels.csv";
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  let typing = 0;
  ["f-suite", "f-category", "f-expect", "f-verdict", "f-mismatch", "f-regression", "f-sort"]
    .forEach((id) => $(id).addEventListener("change", () => apply()));
  $("f-text").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => apply(), 150);
  });

  textsRead = new Promise((done) => setTimeout(done, 0))
    .then(() => unpack("orbench-texts"))
    .then((read) => {
      texts = read.rows;
      draw(true);
      document.body.dataset.textsMs = String(Math.round(performance.now()));
      document.body.dataset.texts = "1";
    });
  apply();
  fromHash();
  // For the browser tests and the benchmark: drawn, and when (ms since navigation began).
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
})();
