// Healing in the workspace view: ask for N candidate edits, each tested by the server with its
// --test-cmd in its own copy of the workspace, and see them side by side, one row per round, each
// with a pass/fail badge, its diff and its test output. Accepting one goes through the same
// POST /accept as any proposed edit, so "Undo last accept" undoes it.
//
// The server runs one heal at a time in the background: POST /heal starts it, GET /candidates
// tells where it is (polled while it runs, also after a reload), POST /heal/cancel stops it.

import { el, formatMs, hljs } from "./render.js";

const BASE = "/whiz/workspace";
const POLL_MS = 500;
const BADGES = { passed: "pass", failed: "fail", timeout: "timeout", malformed: "malformed", tests_changed: "changed the tests", no_edit: "no edit", duplicate: "repeat", cancelled: "cancelled" };

export class HealView {
  constructor({ api, info, modes, status, afterAccept }) {
    this.api = api;
    this.info = info;
    this.modes = modes;
    this.status = status;
    this.afterAccept = afterAccept;
    this.timer = null;
    this.deciding = false;
    this.$ = (id) => document.getElementById(id);
    this.bind();
  }

  bind() {
    const form = this.$("heal-form");
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.start();
    });
    this.$("heal-cancel").addEventListener("click", () => this.cancel());
    const testCmd = this.info.test_cmd;
    for (const input of form.querySelectorAll("input, button")) input.disabled = !testCmd;
    this.$("heal-task").placeholder = testCmd
      ? `Heal: say what to fix; each candidate is tested with ${testCmd}`
      : "Healing needs a test command: start whiz serve with --test-cmd";
  }

  /** The form as a request body; the number fields are bounded by the inputs and again by the server. */
  body() {
    const number = (id) => Number(this.$(id).value);
    return {
      task: this.$("heal-task").value.trim(),
      n: number("heal-n"),
      temperature: number("heal-temperature"),
      max_tokens: number("heal-max-tokens"),
      rounds: number("heal-rounds"),
      all_candidates: this.$("heal-all").checked,
      model: this.modes.model(),
    };
  }

  async start() {
    const body = this.body();
    if (!body.task) return this.status("Say what the candidates should fix.", "error");
    try {
      const data = await this.api.post(`${BASE}/heal`, body);
      this.show(data.heal, []);
      this.poll();
    } catch (exc) {
      this.status(`heal: ${exc.message}`, "error");
    }
  }

  async cancel() {
    this.$("heal-cancel").disabled = true;
    try {
      await this.api.post(`${BASE}/heal/cancel`);
    } catch (exc) {
      if (exc.code !== "no_heal_running") this.status(`cancel: ${exc.message}`, "error");
    } finally {
      this.$("heal-cancel").disabled = false;
    }
    await this.load();
  }

  /** Fetch the latest heal and its candidates; keeps polling while it runs. */
  async load() {
    let data;
    try {
      data = await this.api.get(`${BASE}/candidates`);
    } catch (exc) {
      this.status(`candidates: ${exc.message}`, "error");
      return;
    }
    this.show(data.heal, data.candidates);
    if (data.heal?.status === "running") this.poll();
  }

  poll() {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load(), POLL_MS);
  }

  show(heal, candidates) {
    const running = heal?.status === "running";
    this.$("heal-submit").hidden = running;
    this.$("heal-cancel").hidden = !running;
    const section = this.$("candidates");
    section.hidden = !heal;
    section.dataset.status = heal?.status || "";
    if (!heal) return;
    const elapsed = running ? Date.now() - heal.started_at * 1000 : heal.duration_ms;
    const before = heal.baseline ? `before: ${verdict(heal.baseline)} · ` : "";
    this.$("heal-progress").textContent = `${before}${heal.phase}${heal.error ? `: ${heal.error}` : ""} · ${formatMs(elapsed)}`;
    this.$("heal-progress").dataset.kind = running ? "working" : heal.status === "completed" && heal.winner ? "ok" : "error";
    this.$("heal-title").textContent = `Healing candidates: ${heal.task}`;
    const rounds = new Map();
    for (const c of candidates) {
      if (!rounds.has(c.round)) rounds.set(c.round, []);
      rounds.get(c.round).push(c);
    }
    // Candidates arrive as each one's tests finish; the cards stay in candidate order.
    for (const list of rounds.values()) list.sort((a, b) => a.index - b.index);
    // Rebuilding the cards would close an open test output and reset scrolling on every poll.
    const key = JSON.stringify(candidates.map((c) => [c.id, c.edit?.state, c.chosen]));
    if (key === this.shown) return;
    this.shown = key;
    this.$("candidate-grid").replaceChildren(
      ...[...rounds].map(([round, list]) => {
        const info = heal.rounds.find((r) => r.round === round);
        const passed = list.filter((c) => c.status === "passed").length;
        const how = info ? ` · decoded ${info.method === "n" ? "in parallel" : info.method} in ${formatMs(info.decode_ms)}` : "";
        return el(
          "div",
          { class: "candidate-round", "data-round": round },
          el("h4", { text: `Round ${round}: ${passed} of ${list.length} pass${how}` }),
          el("div", { class: "candidate-row" }, ...list.map((c) => this.card(c))),
        );
      }),
    );
  }

  card(c) {
    const passed = c.status === "passed";
    const tone = passed ? "pass" : c.status === "cancelled" ? "cancelled" : "fail";
    const facts = [`#${c.index}`];
    if (c.exit_code !== null && c.exit_code !== undefined) facts.push(`exit ${c.exit_code}`);
    if (c.diff_lines) facts.push(`${c.diff_lines} diff lines`);
    if (c.output_tokens) facts.push(`${c.output_tokens} tokens`);
    if (c.same_as !== null && c.same_as !== undefined) facts.push(`same edit as #${c.same_as}`);
    const diff = el("div", { class: "diff" });
    if (c.diff) {
      const opts = { outputFormat: "line-by-line", drawFileList: false, matching: "lines", highlight: true, colorScheme: "dark", fileContentToggle: false, stickyFileHeaders: false };
      new window.Diff2HtmlUI(diff, c.diff, opts, hljs).draw();
    } else {
      diff.append(el("p", { class: "note", text: c.error || "no edit in this reply" }));
    }
    const state = c.edit?.state;
    const action =
      state === "pending"
        ? el("button", {
            class: "accept",
            text: passed ? "Accept" : "Accept anyway",
            title: `apply this candidate to the workspace${passed ? "" : " although its tests fail"} (undo restores)`,
            onclick: () => this.accept(c),
          })
        : state
          ? el("span", { class: `decided ${state}`, text: state })
          : null;
    return el(
      "article",
      { class: `candidate ${tone}${c.chosen ? " chosen" : ""}`, "data-status": c.status, "data-id": c.id },
      el(
        "header",
        {},
        el("span", { class: `badge ${tone}`, text: BADGES[c.status] || c.status }),
        c.chosen ? el("span", { class: "badge chosen", text: "chosen", title: "passes, with the smallest diff, then the fewest tokens" }) : null,
        el("span", { class: "facts", text: facts.join(" · ") }),
        el("span", { class: "spacer" }),
        action,
      ),
      c.error && c.diff ? el("p", { class: "error", text: c.error }) : null,
      diff,
      c.test_output || ["passed", "failed", "timeout"].includes(c.status)
        ? el("details", { class: "test-output" }, el("summary", { text: "test output" }), el("pre", { text: c.test_output || "(no output)" }))
        : null,
      c.reply ? el("details", { class: "reply" }, el("summary", { text: "the model's reply" }), el("pre", { text: c.reply })) : null,
    );
  }

  async accept(c) {
    if (this.deciding) return;
    this.deciding = true;
    try {
      const data = await this.api.post(`${BASE}/accept`, { id: c.edit.id });
      this.status(`Applied candidate #${c.index} of round ${c.round} to ${data.applied.join(", ")}. Undo restores the files.`, "ok");
      await this.afterAccept();
    } catch (exc) {
      this.status(`accept: ${exc.message}`, "error");
    } finally {
      this.deciding = false;
    }
    await this.load();
  }
}

function verdict(run) {
  if (run.timed_out) return "tests time out";
  return run.exit_code === 0 ? "tests pass" : `tests fail (exit ${run.exit_code})`;
}
