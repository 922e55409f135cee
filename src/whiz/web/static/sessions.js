// Chat sessions, kept in this browser's localStorage (the server keeps only the KV cache).
//
// A session is {id, title, mode, createdAt, messages: [{role, text, status, whiz}], lastResponseId}.
// lastResponseId can be continued only on the connection that produced it; elsewhere the full
// history is sent again (the protocol's answer to previous_response_not_found).

const STORAGE = "whiz.sessions";
const MAX_SESSIONS = 50;

export class SessionStore {
  constructor(storage = localStorage) {
    this.storage = storage;
    this.sessions = this.load();
  }

  load() {
    try {
      const data = JSON.parse(this.storage.getItem(STORAGE) || "[]");
      return Array.isArray(data) ? data.filter((s) => s && s.id && Array.isArray(s.messages)) : [];
    } catch {
      return []; // a damaged entry must not keep the page from loading
    }
  }

  save() {
    this.sessions = this.sessions.slice(0, MAX_SESSIONS);
    try {
      this.storage.setItem(STORAGE, JSON.stringify(this.sessions));
    } catch {
      // Storage full: drop the oldest half and try once more.
      this.sessions = this.sessions.slice(0, Math.max(1, this.sessions.length >> 1));
      this.storage.setItem(STORAGE, JSON.stringify(this.sessions));
    }
  }

  create(mode) {
    const session = {
      id: `s_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`,
      title: "New session",
      mode,
      createdAt: Date.now(),
      messages: [],
      lastResponseId: null,
    };
    this.sessions.unshift(session);
    this.save();
    return session;
  }

  get(id) {
    return this.sessions.find((s) => s.id === id) || null;
  }

  remove(id) {
    this.sessions = this.sessions.filter((s) => s.id !== id);
    this.save();
  }

  /** The session's history as Responses input items, for a connection that doesn't hold it. */
  static inputItems(session) {
    return session.messages
      .filter((m) => m.text && (m.role === "user" || m.role === "assistant"))
      .map((m) => ({ type: "message", role: m.role, content: m.text }));
  }
}
