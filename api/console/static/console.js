// The console works without this script. Where it runs, it adds:
// a live preview of the issue being written, a segment's audience
// counted as its expression is typed, and progress (sending, importing)
// that updates itself instead of the page reloading.
"use strict";

(function () {
  // Live preview: post the editor's form as the writer pauses typing,
  // put the mail into the sandboxed frame.
  const editor = document.querySelector("form[data-preview]");
  if (editor) {
    const frame = document.querySelector("iframe.preview");
    const status = document.getElementById("preview-status");
    let timer = null;
    let seq = 0;
    const refresh = async () => {
      const mine = ++seq;
      const body = new URLSearchParams(new FormData(editor));
      try {
        const resp = await fetch(editor.dataset.preview, {
          method: "POST", body, credentials: "same-origin",
          headers: { "X-Preview": "fragment" },
        });
        const text = await resp.text();
        if (mine !== seq) return; // a newer preview is on its way
        if (resp.ok) {
          frame.srcdoc = text;
          if (status) status.textContent = "Live preview";
        } else if (status) {
          status.textContent = text;
        }
      } catch (e) {
        if (status) status.textContent = "Preview not updated (offline?)";
      }
    };
    editor.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(refresh, 400);
    });
    const button = editor.querySelector("button[data-preview-button]");
    if (button) button.hidden = true; // the preview follows the typing
  }

  // Live count: ask how many people the segment's expression matches as
  // the publisher pauses typing (a read: GET, the session's cookie); a
  // mistake shows the parser's message where the count goes. The Count
  // button is for where no script runs.
  const counted = document.querySelector("form[data-count]");
  if (counted) {
    const expr = counted.querySelector("[name=expr]");
    const out = document.getElementById("segment-count");
    let timer = null;
    let seq = 0;
    const count = async () => {
      const mine = ++seq;
      if (expr.value.trim() === "") {
        out.textContent = "";
        out.classList.remove("error");
        return;
      }
      try {
        const resp = await fetch(counted.dataset.count + "?expr=" + encodeURIComponent(expr.value), {
          headers: { Accept: "application/json" }, credentials: "same-origin",
        });
        const p = await resp.json();
        if (mine !== seq) return; // a newer count is on its way
        out.textContent = resp.ok ? p.text : p.error;
        out.classList.toggle("error", !resp.ok);
        if (resp.ok) out.dataset.active = String(p.active);
        else delete out.dataset.active;
      } catch (e) {
        if (mine === seq) out.textContent = "Count not updated (offline?)";
      }
    };
    expr.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(count, 300);
    });
    const button = counted.querySelector("button[data-count-button]");
    if (button) button.hidden = true; // the count follows the typing
  }

  // listText shows a list of the progress JSON, one item a line: a
  // rejected line as "line N: reason".
  const listText = (items, empty) => {
    if (items.length === 0) return empty || "";
    return items.map((x) => (x !== null && typeof x === "object" ? "line " + x.line + ": " + x.reason : String(x))).join("\n");
  };

  // A colour picker fills its text field (the one the form posts, which
  // stays typable and is checked as #rrggbb), and follows it when a
  // valid colour is typed.
  for (const pick of document.querySelectorAll("input[data-pick-for]")) {
    const text = document.getElementById(pick.dataset.pickFor);
    if (!text) continue;
    pick.addEventListener("input", () => { text.value = pick.value; });
    text.addEventListener("input", () => {
      if (/^#[0-9a-fA-F]{6}$/.test(text.value)) pick.value = text.value.toLowerCase();
    });
  }

  // refreshReport swaps the live report (tiles, links, chart) for the
  // one the server makes now; a failed read leaves the one shown.
  const refreshReport = async () => {
    const shown = document.querySelector("[data-report=live]");
    if (!shown) return;
    try {
      const resp = await fetch(location.pathname, { credentials: "same-origin" });
      if (!resp.ok) return;
      const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
      const fresh = doc.querySelector("[data-report]");
      if (fresh) shown.replaceWith(document.importNode(fresh, true));
    } catch (e) {
      // The next tick tries again.
    }
  };

  // Progress: poll the JSON beside the page and update the numbers; the
  // page's <meta refresh> is for where no script runs, so drop it.
  const live = document.querySelector("[data-progress]");
  if (live) {
    const meta = document.querySelector("meta[http-equiv=refresh]");
    if (meta) meta.remove();
    const url = live.dataset.progress;
    const bar = live.querySelector("progress");
    let ticks = 0;
    const poll = async () => {
      try {
        const resp = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
        if (!resp.ok) throw new Error(String(resp.status));
        const p = await resp.json();
        for (const el of live.querySelectorAll("[data-field]")) {
          const v = p[el.dataset.field];
          if (v === undefined || v === null) continue;
          el.textContent = Array.isArray(v) ? listText(v, el.dataset.empty) : String(v);
        }
        if (bar) {
          const total = Number(p[bar.dataset.total] || 0);
          const done = bar.dataset.done.split(",").reduce((n, f) => n + Number(p[f] || 0), 0);
          bar.max = Math.max(total, 1);
          bar.value = Math.min(done, bar.max);
        }
        const state = p.status || p.state;
        if (live.dataset.state !== state) {
          // It moved (began sending, ended, paused): the page's actions
          // change with it.
          location.replace(location.pathname); // without the last action's notice
        } else if (state === "sending" || state === "running" || state === "scheduled") {
          if (++ticks % 10 === 0) refreshReport();
          setTimeout(poll, 1000);
        }
      } catch (e) {
        setTimeout(poll, 3000);
      }
    };
    if (live.dataset.state === "sending" || live.dataset.state === "running" || live.dataset.state === "scheduled") poll();
  }

})();
