// HTTP calls to the server that served this page, with the API key when one is set.

const KEY_STORAGE = "whiz.apiKey";

/** An error the server answered with: its HTTP status and OpenAI-style error object. */
export class ApiError extends Error {
  constructor(status, error, body) {
    super(error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = error?.code || "http_error";
    this.body = body;
  }
}

export class Api {
  constructor() {
    // Per tab: a key typed here is not left behind in the browser's long-term storage.
    this.key = sessionStorage.getItem(KEY_STORAGE) || null;
    this.onUnauthorized = () => {};
  }

  setKey(key) {
    this.key = key || null;
    if (this.key) sessionStorage.setItem(KEY_STORAGE, this.key);
    else sessionStorage.removeItem(KEY_STORAGE);
  }

  headers(extra = {}) {
    const h = { ...extra };
    if (this.key) h.Authorization = `Bearer ${this.key}`;
    return h;
  }

  /** GET or POST JSON; throws ApiError on an error status (401 also calls onUnauthorized). */
  async request(method, path, body) {
    const init = { method, headers: this.headers() };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    let data = null;
    try {
      data = await res.json();
    } catch {
      data = null;
    }
    if (!res.ok) {
      const err = new ApiError(res.status, data?.error, data);
      if (res.status === 401) this.onUnauthorized(err);
      throw err;
    }
    return data;
  }

  get(path) {
    return this.request("GET", path);
  }

  post(path, body = {}) {
    return this.request("POST", path, body);
  }

  /** Whether a key works, without side effects: the model list needs it when keys are set. */
  async tryKey(key) {
    const res = await fetch("/v1/models", { headers: { Authorization: `Bearer ${key}` } });
    return res.ok;
  }
}
