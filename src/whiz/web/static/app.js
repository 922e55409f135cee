// Start-up: what the server offers (/whiz/info), the API key when one is needed, then the views.

import { Api } from "./api.js";
import { ChatView } from "./chat.js";
import { Modes } from "./modes.js";
import { SpeedView, TurnMeter } from "./speed.js";
import { WorkspaceView } from "./workspace.js";

const $ = (id) => document.getElementById(id);

class App {
  constructor() {
    this.api = new Api();
    this.api.onUnauthorized = (err) => this.askKey(err.message);
    this.speed = new SpeedView({ tps: $("gauge-tps"), ttft: $("gauge-ttft"), canvas: $("speed-plot"), stats: $("turn-stats") });
    this.modes = new Modes($("modes"), $("model-name"));
    this.keyWaiters = [];
  }

  async start() {
    this.info = await (await fetch("/whiz/info")).json();
    $("key-button").hidden = !this.info.auth_required;
    $("key-button").addEventListener("click", () => this.askKey());
    // Without a key nothing works: Esc must not dismiss the dialog and leave a dead page.
    $("key-dialog").addEventListener("cancel", (e) => {
      if (!this.api.key) e.preventDefault();
    });
    $("key-form").addEventListener("submit", (e) => {
      e.preventDefault();
      this.submitKey();
    });
    if (this.info.auth_required && !this.api.key) await this.askKey();
    await this.loadModels();
    this.chat = new ChatView({
      api: this.api,
      speed: this.speed,
      modes: this.modes,
      onAuthError: (error) => this.askKey(error.message),
      onConnState: (state, ev) => this.connState(state, ev),
    });
    for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => this.show(tab.dataset.view));
    if (this.info.workspace) {
      $("tab-workspace").hidden = false;
      const info = await this.api.get("/whiz/workspace");
      this.workspace = new WorkspaceView({ api: this.api, info, speed: this.speed, modes: this.modes, meterFor: () => new TurnMeter() });
      await this.workspace.start();
    }
    this.show(location.hash === "#workspace" && this.info.workspace ? "workspace" : "chat");
    this.speed.draw();
    document.body.dataset.ready = "true";
  }

  async loadModels() {
    for (;;) {
      try {
        const data = await this.api.get("/v1/models");
        this.modes.setModels(data.data || []);
        return;
      } catch (exc) {
        if (exc.status !== 401) {
          $("model-name").textContent = `models: ${exc.message}`;
          return;
        }
        await this.askKey(exc.message); // loops until a key works
      }
    }
  }

  show(view) {
    for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.view === view);
    $("view-chat").hidden = view !== "chat";
    $("side-chat").hidden = view !== "chat";
    $("view-workspace").hidden = view !== "workspace";
    $("side-workspace").hidden = view !== "workspace";
    history.replaceState(null, "", view === "workspace" ? "#workspace" : "#");
  }

  connState(state, ev) {
    const dot = $("conn-status");
    dot.dataset.state = state;
    dot.title = state === "closed" && ev?.code !== 1000 && ev?.code !== 1005 ? `closed: ${ev.code} ${ev.reason || ""}` : state;
  }

  /** Show the key dialog; resolves once a key that the server accepts has been entered. */
  askKey(message = "") {
    const dialog = $("key-dialog");
    $("key-error").textContent = message && this.api.key ? `Key refused: ${message}` : message;
    if (!dialog.open) dialog.showModal();
    $("key-input").focus();
    return new Promise((resolve) => this.keyWaiters.push(resolve));
  }

  async submitKey() {
    const key = $("key-input").value.trim();
    if (!key) return;
    $("key-submit").disabled = true;
    try {
      if (!(await this.api.tryKey(key))) {
        $("key-error").textContent = "Key refused: the server does not accept this key.";
        return;
      }
      this.api.setKey(key);
      this.chat?.reset();
      $("key-dialog").close();
      $("key-input").value = "";
      const waiters = this.keyWaiters.splice(0);
      for (const resolve of waiters) resolve(key);
    } finally {
      $("key-submit").disabled = false;
    }
  }
}

const app = new App();
window.whiz = app; // for the console and the end-to-end tests
app.start().catch((exc) => {
  document.body.dataset.ready = "error";
  $("model-name").textContent = `failed to start: ${exc.message}`;
});
