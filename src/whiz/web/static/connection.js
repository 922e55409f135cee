// One Responses WebSocket-mode connection (docs/protocol.md): one response at a time, cancel,
// and `latestId`, the only response this connection can continue with previous_response_id.

/** base64url without padding, so any key fits in a subprotocol token. */
function base64url(text) {
  const bytes = new TextEncoder().encode(text);
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

export function socketUrl() {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/v1/responses`;
}

export class Connection {
  /** @param {string|null} key  sent as the `whiz-key.<base64url>` subprotocol (browsers can't set headers) */
  constructor(key, onState = () => {}) {
    this.key = key;
    this.onState = onState;
    this.ws = null;
    this.latestId = null;
    this.turn = null; // handlers of the response in flight
    this.opening = null;
  }

  open() {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) return Promise.resolve();
    if (this.opening) return this.opening;
    const protocols = ["whiz"];
    if (this.key) protocols.push(`whiz-key.${base64url(this.key)}`);
    this.onState("connecting");
    this.opening = new Promise((resolve, reject) => {
      const ws = new WebSocket(socketUrl(), protocols);
      this.ws = ws;
      let opened = false;
      ws.onopen = () => {
        opened = true;
        this.opening = null;
        this.onState("open");
        resolve();
      };
      ws.onmessage = (msg) => this.dispatch(JSON.parse(msg.data));
      ws.onclose = (ev) => {
        this.opening = null;
        this.latestId = null; // the server forgets this connection's conversation
        this.onState("closed", ev);
        if (!opened) reject(new Error(`connection refused (${ev.code} ${ev.reason || ""})`.trim()));
        if (this.turn) {
          const turn = this.turn;
          this.turn = null;
          turn.onClosed?.(ev);
        }
      };
    });
    return this.opening;
  }

  dispatch(event) {
    if (event.type === "error") {
      const turn = this.turn;
      // An error event ends the request it answers; the connection goes on.
      if (turn) {
        this.turn = null;
        turn.onError?.(event.error || {}, event);
      } else {
        this.onState("error", event);
      }
      return;
    }
    const turn = this.turn;
    if (!turn) return;
    turn.onEvent?.(event);
    if (event.type === "response.completed" || event.type === "response.incomplete" || event.type === "response.failed") {
      this.turn = null;
      if (event.response?.status !== "failed") this.latestId = event.response?.id || null;
      turn.onDone?.(event.response);
    }
  }

  /** Send one response.create; `handlers` get onEvent, onDone(response), onError(error), onClosed. */
  async create(body, handlers) {
    await this.open();
    if (this.turn) throw new Error("a response is already running on this connection");
    this.turn = handlers;
    this.ws.send(JSON.stringify({ type: "response.create", ...body }));
  }

  cancel() {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: "response.cancel" }));
  }

  close() {
    if (this.ws) this.ws.close();
    this.ws = null;
  }
}
