// The workspace view: browse the files `whiz serve --workspace DIR` offers, ask the model for an
// edit, review it as a diff (diff2html, highlighted by highlight.js), accept or reject it, undo,
// and run the configured test command; heal (heal.js). All paths are checked again by the server.

import { HealView } from "./heal.js";
import { codeBlock, el, formatMs, hljs, languageOf } from "./render.js";

const BASE = "/whiz/workspace";

export class WorkspaceView {
  constructor({ api, info, speed, modes, meterFor }) {
    this.api = api;
    this.modes = modes;
    this.info = info;
    this.speed = speed;
    this.meterFor = meterFor;
    this.path = null;
    this.edits = [];
    this.busy = false;
    this.$ = (id) => document.getElementById(id);
    this.diffStyle = localStorage.getItem("whiz.diffStyle") || "side-by-side";
    this.$("diff-style").value = this.diffStyle;
    this.bind();
    this.heal = new HealView({
      api,
      info,
      modes,
      status: (text, kind) => this.status(text, kind),
      afterAccept: () => this.refreshOpen(),
    });
  }

  bind() {
    this.$("refresh-files").addEventListener("click", () => this.loadFiles());
    this.$("edit-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.askEdit();
    });
    this.$("undo").addEventListener("click", () => this.undo());
    this.$("run-tests").addEventListener("click", () => this.runTests());
    this.$("run-tests").disabled = !this.info.test_cmd;
    this.$("run-tests").title = this.info.test_cmd ? `runs: ${this.info.test_cmd}` : "start whiz serve with --test-cmd to run tests here";
    this.$("diff-style").addEventListener("change", (e) => {
      this.diffStyle = e.target.value;
      localStorage.setItem("whiz.diffStyle", this.diffStyle);
      this.renderEdits();
    });
  }

  async start() {
    this.$("workspace-name").textContent = this.info.name || "Files";
    await Promise.all([this.loadFiles(), this.loadEdits(), this.heal.load()]);
  }

  status(text, kind = "") {
    const box = this.$("ws-status");
    box.textContent = text;
    box.dataset.kind = kind;
  }

  async guard(label, fn) {
    if (this.busy) return;
    this.busy = true;
    document.body.classList.add("busy");
    try {
      return await fn();
    } catch (exc) {
      this.status(`${label}: ${exc.message}`, "error");
    } finally {
      this.busy = false;
      document.body.classList.remove("busy");
    }
  }

  async loadFiles() {
    try {
      const data = await this.api.get(`${BASE}/files`);
      const list = this.$("file-list");
      list.replaceChildren(
        ...data.files.map((path) =>
          el("li", { class: path === this.path ? "active" : "", "data-path": path }, el("button", { text: path, title: path, onclick: () => this.open(path) })),
        ),
      );
      if (data.truncated) list.append(el("li", { class: "note", text: `first ${data.files.length} files shown` }));
    } catch (exc) {
      this.status(`files: ${exc.message}`, "error");
    }
  }

  async open(path) {
    try {
      const data = await this.api.get(`${BASE}/file?path=${encodeURIComponent(path)}`);
      this.path = path;
      this.$("file-path").textContent = path;
      this.$("file-view").replaceChildren(codeBlock(data.content, languageOf(path)));
      for (const li of this.$("file-list").children) li.classList.toggle("active", li.dataset.path === path);
      this.$("edit-instruction").focus();
    } catch (exc) {
      this.status(`${path}: ${exc.message}`, "error");
    }
  }

  async askEdit() {
    const instruction = this.$("edit-instruction").value.trim();
    if (!this.path) return this.status("Open a file first.", "error");
    if (!instruction) return this.status("Say what to change.", "error");
    await this.guard("edit", async () => {
      this.status(`Asking the model to edit ${this.path}…`, "working");
      const meter = this.meterFor();
      let data;
      try {
        data = await this.api.post(`${BASE}/edit`, { path: this.path, instruction, model: this.modes.model() });
      } catch (exc) {
        meter.finish({ status: "failed", whiz: exc.body?.whiz });
        this.speed.follow(meter);
        if (exc.body?.reply) this.showReply(exc.body.reply);
        throw exc;
      }
      meter.finish({ status: "completed", whiz: data.whiz });
      this.speed.follow(meter);
      this.edits.push(data.edit);
      this.$("edit-instruction").value = "";
      this.status(`The model proposes changes to ${data.edit.changes.map((c) => c.path).join(", ")}. Review, then accept or reject.`, "ok");
      this.renderEdits();
    });
  }

  showReply(text) {
    const holder = this.$("pending-edits");
    holder.prepend(el("details", { class: "reply", open: true }, el("summary", { text: "The model's reply" }), el("pre", { text })));
  }

  async loadEdits() {
    try {
      const data = await this.api.get(`${BASE}/edits`);
      this.edits = data.edits;
      this.renderEdits();
    } catch (exc) {
      this.status(`edits: ${exc.message}`, "error");
    }
  }

  renderEdits() {
    const holder = this.$("pending-edits");
    holder.replaceChildren(...this.edits.map((edit) => this.editNode(edit)));
  }

  editNode(edit) {
    const diff = el("div", { class: "diff" });
    const text = edit.changes.map((c) => c.diff).join("\n");
    // diff2html parses the unified diff and builds escaped HTML; highlight.js colours the code.
    const ui = new window.Diff2HtmlUI(diff, text, {
      outputFormat: this.diffStyle,
      drawFileList: false,
      matching: "lines",
      highlight: true,
      colorScheme: "dark",
      fileContentToggle: false,
      stickyFileHeaders: false,
    }, hljs);
    ui.draw();
    return el(
      "article",
      { class: "edit", "data-edit": edit.id },
      el(
        "header",
        {},
        el("span", { class: "instruction", text: edit.instruction }),
        el("span", { class: "spacer" }),
        el("button", { class: "accept", text: "Accept", onclick: () => this.decide(edit, "accept") }),
        el("button", { class: "reject danger", text: "Reject", onclick: () => this.decide(edit, "reject") }),
      ),
      diff,
    );
  }

  async decide(edit, verdict) {
    await this.guard(verdict, async () => {
      const data = await this.api.post(`${BASE}/${verdict}`, { id: edit.id });
      this.edits = this.edits.filter((e) => e.id !== edit.id);
      this.renderEdits();
      if (verdict === "accept") {
        this.status(`Applied to ${data.applied.join(", ")}. Undo restores the files.`, "ok");
        await this.refreshOpen();
      } else {
        this.status("Edit rejected; nothing was written.", "ok");
      }
    });
  }

  async undo() {
    await this.guard("undo", async () => {
      const data = await this.api.post(`${BASE}/undo`);
      this.status(`Restored ${data.restored.join(", ")}.`, "ok");
      // The undone edit is pending again on the server: its proposal or candidate card says so.
      await Promise.all([this.refreshOpen(), this.loadEdits(), this.heal.load()]);
    });
  }

  async refreshOpen() {
    await this.loadFiles();
    if (this.path) await this.open(this.path);
  }

  async runTests() {
    await this.guard("tests", async () => {
      this.status(`Running ${this.info.test_cmd}…`, "working");
      const panel = this.$("test-panel");
      panel.hidden = false;
      this.$("test-output").textContent = "";
      const r = await this.api.post(`${BASE}/test`);
      const verdict = r.timed_out ? "timed out" : r.exit_code === 0 ? "passed" : `failed (exit ${r.exit_code})`;
      this.$("test-summary").textContent = `${verdict} in ${formatMs(r.duration_ms)}`;
      panel.dataset.result = r.exit_code === 0 ? "pass" : "fail";
      this.$("test-output").textContent = r.output || "(no output)";
      this.status(`Tests ${verdict}.`, r.exit_code === 0 ? "ok" : "error");
    });
  }
}
