// The chat view: sessions on the left, the conversation, and the composer with Send and Stop.
//
// Each session gets its own WebSocket connection while the page is open, so its conversation
// stays warm in the server's KV cache and every turn sends only the new message with
// previous_response_id. A session from an earlier visit sends its whole history once.

import { Connection } from "./connection.js";
import { el, formatMs, renderReply } from "./render.js";
import { SessionStore } from "./sessions.js";
import { TurnMeter } from "./speed.js";

const MAX_OUTPUT_TOKENS = 1024;

/** The reply length limit; localStorage "whiz.maxOutputTokens" overrides it (the tests keep turns short). */
function maxOutputTokens() {
  const set = Number(localStorage.getItem("whiz.maxOutputTokens"));
  return Number.isInteger(set) && set > 0 ? set : MAX_OUTPUT_TOKENS;
}

export class ChatView {
  constructor({ api, speed, modes, onAuthError, onConnState }) {
    this.api = api;
    this.speed = speed;
    this.modes = modes;
    this.onAuthError = onAuthError;
    this.onConnState = onConnState;
    this.store = new SessionStore();
    this.connections = new Map(); // session id -> Connection
    this.running = null; // {session, conn, message, node}
    this.$ = (id) => document.getElementById(id);
    this.current = this.store.sessions[0] || this.store.create(modes.mode);
    this.bind();
    this.renderSessions();
    this.renderMessages();
  }

  bind() {
    this.$("composer").addEventListener("submit", (e) => {
      e.preventDefault();
      this.send();
    });
    this.$("prompt").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        this.send();
      }
      if (e.key === "Escape") this.stop();
    });
    this.$("stop").addEventListener("click", () => this.stop());
    this.$("new-session").addEventListener("click", () => {
      // An empty session is already a new one: reuse it rather than piling up blank entries.
      const empty = this.store.sessions.find((s) => !s.messages.length);
      this.select(empty || this.store.create(this.modes.mode));
    });
  }

  connection(session) {
    let conn = this.connections.get(session.id);
    if (!conn) {
      conn = new Connection(this.api.key, (state, ev) => this.connState(state, ev));
      this.connections.set(session.id, conn);
    }
    return conn;
  }

  /** Drop every connection (after the key changed): they reopen with the new key on next use. */
  reset() {
    for (const conn of this.connections.values()) conn.close();
    this.connections.clear();
  }

  connState(state, ev) {
    this.onConnState(state, ev);
    if (state === "error" && ev?.error?.code && /api_key/.test(ev.error.code)) this.onAuthError(ev.error);
  }

  select(session) {
    this.current = session;
    this.renderSessions();
    this.renderMessages();
    this.$("prompt").focus();
  }

  renderSessions() {
    const list = this.$("session-list");
    list.replaceChildren(
      ...this.store.sessions.map((s) =>
        el(
          "li",
          { class: s.id === this.current.id ? "active" : "", "data-session": s.id },
          el("button", { class: "session-title", text: s.title, title: new Date(s.createdAt).toLocaleString(), onclick: () => this.select(s) }),
          el("button", {
            class: "icon delete",
            title: "delete session",
            text: "×",
            onclick: (e) => {
              e.stopPropagation();
              this.remove(s);
            },
          }),
        ),
      ),
    );
  }

  remove(session) {
    if (this.running?.session === session) this.stop();
    this.connections.get(session.id)?.close();
    this.connections.delete(session.id);
    this.store.remove(session.id);
    if (this.current.id === session.id) this.current = this.store.sessions[0] || this.store.create(this.modes.mode);
    this.renderSessions();
    this.renderMessages();
  }

  renderMessages() {
    const box = this.$("messages");
    box.replaceChildren(...this.current.messages.map((m) => this.messageNode(m)));
    if (!this.current.messages.length) {
      box.append(el("div", { class: "empty", text: "Ask for code, an explanation, or a fix. Replies stream as they are written." }));
    }
    box.scrollTop = box.scrollHeight;
  }

  messageNode(m) {
    const body = el("div", { class: "body" });
    if (m.role === "assistant") body.append(renderReply(m.text));
    else body.textContent = m.text;
    const node = el("div", { class: `msg ${m.role}`, "data-status": m.status || "" }, el("div", { class: "who", text: m.role === "user" ? "you" : m.model || "whiz" }), body);
    const foot = this.footer(m);
    if (foot) node.append(foot);
    return node;
  }

  footer(m) {
    if (m.role !== "assistant") return null;
    const bits = [];
    if (m.status && m.status !== "completed") bits.push(m.status === "in_progress" ? "streaming…" : m.status);
    if (m.error) bits.push(m.error);
    const w = m.whiz;
    if (w) {
      bits.push(`${w.decode_tokens} tokens`, `${(w.tokens_per_s || 0).toFixed(1)} tok/s`, `TTFT ${formatMs(w.ttft_ms)}`);
      if (w.draft_accepted) bits.push(`${w.draft_accepted} draft tokens accepted`);
    }
    return bits.length ? el("div", { class: "foot", text: bits.join(" · ") }) : null;
  }

  setRunning(running) {
    this.$("send").hidden = running;
    this.$("stop").hidden = !running;
  }

  async send() {
    const input = this.$("prompt");
    const text = input.value.trim();
    if (!text || this.running) return;
    const session = this.current;
    const model = this.modes.model();
    if (!model) return;
    input.value = "";
    if (!session.messages.length) session.title = text.slice(0, 48);
    session.mode = this.modes.mode;
    const user = { role: "user", text };
    const reply = { role: "assistant", text: "", status: "in_progress", model };
    session.messages.push(user, reply);
    this.store.save();
    this.renderSessions();
    this.renderMessages();
    const node = this.$("messages").lastElementChild;
    const conn = this.connection(session);
    const meter = new TurnMeter();
    this.speed.follow(meter);
    this.running = { session, conn, reply, node, meter };
    this.setRunning(true);

    const body = { model, max_output_tokens: maxOutputTokens(), whiz: { timeline: true } };
    if (session.lastResponseId && conn.latestId === session.lastResponseId) {
      body.previous_response_id = session.lastResponseId;
      body.input = [{ type: "message", role: "user", content: text }];
    } else {
      body.input = SessionStore.inputItems(session);
    }
    await this.dispatch(body);
  }

  async dispatch(body) {
    const r = this.running;
    try {
      await r.conn.create(body, {
        onEvent: (ev) => this.onEvent(ev),
        onDone: (response) => this.finish(response),
        onError: (error) => {
          if (error.code === "previous_response_not_found" && body.previous_response_id) {
            // The server no longer holds that response: send the whole history instead.
            const full = { ...body, input: SessionStore.inputItems(r.session) };
            delete full.previous_response_id;
            this.dispatch(full);
          } else this.fail(error);
        },
        onClosed: (ev) => this.fail({ message: `connection closed (${ev.code}${ev.reason ? ` ${ev.reason}` : ""})`, code: ev.reason }),
      });
    } catch (exc) {
      this.fail({ message: exc.message });
    }
  }

  onEvent(ev) {
    const r = this.running;
    if (!r) return;
    if (ev.type === "response.output_text.delta") {
      r.reply.text += ev.delta;
      r.meter.delta();
      this.speed.update();
      if (!r.painting) {
        // Re-render (and re-highlight) at most once a frame, however fast the deltas come.
        r.painting = true;
        requestAnimationFrame(() => {
          r.painting = false;
          if (this.running !== r) return;
          r.node.querySelector(".body").replaceChildren(renderReply(r.reply.text));
          const box = this.$("messages");
          if (box.scrollHeight - box.scrollTop - box.clientHeight < 160) box.scrollTop = box.scrollHeight;
        });
      }
    }
  }

  finish(response) {
    const r = this.running;
    if (!r) return;
    this.running = null;
    r.reply.status = response?.status || "completed";
    r.reply.whiz = response?.whiz || null;
    if (r.reply.status !== "failed" && response?.id) r.session.lastResponseId = response.id;
    if (response?.error) r.reply.error = response.error.message;
    r.meter.finish(response);
    this.speed.follow(r.meter);
    this.store.save();
    this.replaceNode(r);
    this.setRunning(false);
  }

  fail(error) {
    const r = this.running;
    if (!r) return;
    this.running = null;
    r.reply.status = "failed";
    r.reply.error = error.message || "failed";
    r.meter.status = "failed";
    this.speed.update();
    r.session.lastResponseId = null; // resend the full history next time
    this.store.save();
    this.replaceNode(r);
    this.setRunning(false);
    if (error.code && /api_key/.test(error.code)) this.onAuthError(error);
  }

  replaceNode(r) {
    if (this.current !== r.session) return;
    const fresh = this.messageNode(r.reply);
    r.node.replaceWith(fresh);
  }

  stop() {
    // The server stops within a decode step and ends the response as cancelled (incomplete).
    this.running?.conn.cancel();
  }
}
