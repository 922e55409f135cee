// The mode switch (fast, deep, auto) over the models the server lists at /v1/models.
//
// Until the server routes modes itself (issue 5), a mode is only a choice of model: fast is the
// server's first model, deep a larger one when the server lists one, and auto starts fast.
// A mode the server cannot serve is shown disabled, never mapped to something it isn't.

const STORAGE = "whiz.mode";

/** Which listed model a mode uses, or null when the server has none for it. */
export function modelFor(mode, models) {
  if (!models.length) return null;
  const ids = models.map((m) => m.id);
  const deep = ids.slice(1).find((id) => /deep|1\.5b/i.test(id)) || (ids.length > 1 ? ids[1] : null);
  if (mode === "deep") return deep;
  return ids[0];
}

export class Modes {
  constructor(root, label) {
    this.root = root;
    this.label = label;
    this.models = [];
    this.mode = localStorage.getItem(STORAGE) || "fast";
    this.onChange = () => {};
    for (const button of root.querySelectorAll("[data-mode]")) {
      button.addEventListener("click", () => {
        if (!button.disabled) this.set(button.dataset.mode);
      });
    }
  }

  setModels(models) {
    this.models = models;
    for (const button of this.root.querySelectorAll("[data-mode]")) {
      const model = modelFor(button.dataset.mode, models);
      button.disabled = !model;
      button.title = model
        ? button.dataset.mode === "auto"
          ? `${model} (auto starts fast; escalation to deep arrives with the server's modes)`
          : model
        : "this server lists no model for this mode";
    }
    if (!modelFor(this.mode, models)) this.mode = "fast";
    this.set(this.mode);
  }

  set(mode) {
    this.mode = mode;
    localStorage.setItem(STORAGE, mode);
    for (const button of this.root.querySelectorAll("[data-mode]")) {
      const on = button.dataset.mode === mode;
      button.classList.toggle("active", on);
      button.setAttribute("aria-checked", String(on));
    }
    const model = this.model();
    // A model given as a file path is known by its file name.
    this.label.textContent = model ? model.split("/").pop() : "no model";
    this.label.title = this.models.length ? `models on this server: ${this.models.map((m) => m.id).join(", ")}` : "";
    this.onChange(mode, model);
  }

  /** The model id to request for the current mode. */
  model() {
    return modelFor(this.mode, this.models);
  }
}
