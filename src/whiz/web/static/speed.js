// The speed view: a live gauge (tokens/s, TTFT) and a plot of tokens/s over the turn.
//
// While a turn streams, the page counts text deltas (about one per token) as they arrive. When
// it finishes, the server's own figures replace them: `whiz.tokens_per_s`, `whiz.ttft_ms`, and
// `whiz.timeline`, rows of [ms since the request, tokens, accepted draft tokens], which splits
// the speed into tokens decoded one by one and draft tokens verified in a batch.

import { el, formatMs } from "./render.js";

const COLORS = { decoded: "#4f8ff7", accepted: "#3fcf8e", live: "#8a93a6", axis: "#59606e", text: "#a9b1c1" };

/** One turn's measurements, client-side while it streams and the server's once it ends. */
export class TurnMeter {
  constructor() {
    this.sentAt = performance.now();
    this.firstAt = null;
    this.rows = []; // live: [ms since sent, tokens, accepted]
    this.final = null; // the server's `whiz` object
    this.status = "running";
  }

  delta() {
    const now = performance.now() - this.sentAt;
    if (this.firstAt === null) this.firstAt = now;
    this.rows.push([now, 1, 0]);
  }

  finish(response) {
    this.status = response?.status || "completed";
    this.final = response?.whiz || null;
    if (this.final?.timeline?.length) this.rows = this.final.timeline;
  }

  get live() {
    return this.final === null || !this.final.timeline;
  }

  get ttftMs() {
    return this.final?.ttft_ms ?? this.firstAt;
  }

  get tokensPerS() {
    if (this.final) return this.final.tokens_per_s;
    const n = this.rows.length;
    if (n < 2) return null;
    return ((n - 1) * 1000) / (this.rows[n - 1][0] - this.rows[0][0] || 1);
  }
}

export class SpeedView {
  constructor({ tps, ttft, canvas, stats }) {
    this.tpsEl = tps;
    this.ttftEl = ttft;
    this.canvas = canvas;
    this.statsEl = stats;
    this.meter = null;
    this.frame = null;
  }

  /** Follow `meter` (a new turn); redraws at most once a frame. */
  follow(meter) {
    this.meter = meter;
    this.update();
  }

  update() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = null;
      this.draw();
    });
  }

  draw() {
    const m = this.meter;
    const tps = m?.tokensPerS;
    this.tpsEl.textContent = tps ? tps.toFixed(1) : "–";
    this.ttftEl.textContent = m && m.ttftMs !== null ? formatMs(m.ttftMs) : "–";
    this.drawPlot();
    this.drawStats();
  }

  drawStats() {
    const m = this.meter;
    this.statsEl.replaceChildren();
    if (!m) return;
    const f = m.final;
    const rows = [
      ["status", m.status],
      ["TTFT", formatMs(m.ttftMs)],
      ["tokens/s", m.tokensPerS ? m.tokensPerS.toFixed(1) : "–"],
    ];
    if (f) {
      const accepted = f.draft_accepted ?? 0;
      const total = f.decode_tokens || 0;
      rows.push(["output tokens", String(total)]);
      rows.push(["accepted drafts", total ? `${accepted} (${Math.round((100 * accepted) / total)}%)` : "0"]);
      rows.push(["prefill", `${f.prefill_tokens} tok · ${formatMs(f.prefill_ms)}`]);
    } else {
      rows.push(["deltas", String(m.rows.length)]);
    }
    for (const [k, v] of rows) this.statsEl.append(el("dt", { text: k }), el("dd", { text: v }));
  }

  drawPlot() {
    const cv = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = cv.clientWidth || 300;
    const h = cv.clientHeight || 150;
    if (cv.width !== Math.round(w * dpr)) {
      cv.width = Math.round(w * dpr);
      cv.height = Math.round(h * dpr);
    }
    const ctx = cv.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const m = this.meter;
    const pad = { l: 34, r: 6, t: 8, b: 18 };
    const pw = w - pad.l - pad.r;
    const ph = h - pad.t - pad.b;
    ctx.font = "10px system-ui, sans-serif";
    ctx.fillStyle = COLORS.text;
    if (!m || !m.rows.length) {
      ctx.fillText("no turn yet", pad.l + 4, pad.t + ph / 2);
      return;
    }
    const end = Math.max(m.rows[m.rows.length - 1][0], 1);
    const nBars = Math.max(1, Math.min(48, Math.round(pw / 6)));
    const bucketMs = end / nBars;
    const decoded = new Array(nBars).fill(0);
    const accepted = new Array(nBars).fill(0);
    for (const [t, n, a] of m.rows) {
      const i = Math.min(nBars - 1, Math.floor(t / bucketMs));
      decoded[i] += n - a;
      accepted[i] += a;
    }
    const rate = (count) => (count * 1000) / bucketMs;
    const peak = Math.max(1, ...decoded.map((d, i) => rate(d + accepted[i])));
    const y = (r) => pad.t + ph - (r / peak) * ph;
    const bw = pw / nBars;
    for (let i = 0; i < nBars; i++) {
      const x = pad.l + i * bw;
      const rd = rate(decoded[i]);
      const ra = rate(accepted[i]);
      ctx.fillStyle = m.live ? COLORS.live : COLORS.decoded;
      ctx.fillRect(x + 0.5, y(rd), Math.max(1, bw - 1), pad.t + ph - y(rd));
      if (ra > 0) {
        ctx.fillStyle = COLORS.accepted;
        ctx.fillRect(x + 0.5, y(rd + ra), Math.max(1, bw - 1), y(rd) - y(rd + ra));
      }
    }
    // Axes: the peak rate, the turn's length, and where the first token came.
    ctx.strokeStyle = COLORS.axis;
    ctx.beginPath();
    ctx.moveTo(pad.l, pad.t);
    ctx.lineTo(pad.l, pad.t + ph);
    ctx.lineTo(pad.l + pw, pad.t + ph);
    ctx.stroke();
    ctx.fillStyle = COLORS.text;
    ctx.textAlign = "right";
    ctx.fillText(peak >= 100 ? peak.toFixed(0) : peak.toFixed(1), pad.l - 3, pad.t + 8);
    ctx.fillText("0", pad.l - 3, pad.t + ph);
    ctx.fillText(formatMs(end), pad.l + pw, h - 4);
    ctx.textAlign = "left";
    ctx.fillText("tok/s", 2, pad.t + ph / 2);
    const ttft = m.ttftMs;
    if (ttft) {
      const x = pad.l + (Math.min(ttft, end) / end) * pw;
      ctx.setLineDash([3, 3]);
      ctx.beginPath();
      ctx.moveTo(x, pad.t);
      ctx.lineTo(x, pad.t + ph);
      ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillText("TTFT", Math.min(x + 3, pad.l + pw - 26), h - 4);
    }
  }
}
