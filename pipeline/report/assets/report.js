// beam-bpe report: the live box. Encodes the text typed into it with each
// tokenizer's own merges, exactly as bpe.Tokenizer.encode does (ordinary text,
// no special tokens): the pre-tokenizer's regex (translated to an exact
// JavaScript form by pipeline/report/pattern.py) splits the text into pieces,
// each piece's UTF-8 bytes (lone surrogates as their 3-byte forms, like
// Python's "surrogatepass") are merged by repeatedly joining every occurrence,
// left to right, of the adjacent pair learned first. Before it shows anything,
// each encoder re-encodes check texts whose IDs Python computed; any
// difference, or a pattern without an exact JavaScript form, turns the box off
// for that tokenizer with the reason.
"use strict";

function utf8(text) {
  const out = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (cp < 0x80) out.push(cp);
    else if (cp < 0x800) out.push(0xc0 | (cp >> 6), 0x80 | (cp & 63));
    else if (cp < 0x10000) out.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
    else out.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
  }
  return out;
}

class Encoder {
  constructor(spec) {
    this.name = spec.name;
    this.merges = spec.merges; // flat: left0, right0, left1, right1, ...
    this.made = spec.made; // the ID merge i makes: 256 + i, past any special token between merges
    this.rankOf = new Map(this.made.map((id, rank) => [id, rank]));
    this.base = (this.made.length ? this.made[this.made.length - 1] : 255) + 2;
    this.ranks = new Map();
    for (let rank = 0; rank < this.merges.length / 2; rank++) {
      const key = this.merges[2 * rank] * this.base + this.merges[2 * rank + 1];
      if (!this.ranks.has(key)) this.ranks.set(key, rank);
    }
    this.regex = spec.pattern === null ? null : new RegExp(spec.pattern, "gu");
    this.cache = new Map();
    this.bytesOf = new Map();
  }

  pieces(text) {
    const out = [];
    let end = 0;
    this.regex.lastIndex = 0;
    for (const match of text.matchAll(this.regex)) {
      if (match[0].length === 0) throw new Error("the pattern matched the empty string");
      if (match.index > end) out.push(text.slice(end, match.index));
      out.push(match[0]);
      end = match.index + match[0].length;
    }
    if (end < text.length) out.push(text.slice(end));
    return out;
  }

  encodePiece(piece) {
    const cached = this.cache.get(piece);
    if (cached !== undefined) return cached;
    let ids = utf8(piece);
    const ranks = this.ranks, base = this.base;
    while (ids.length > 1) {
      let best = Infinity;
      for (let i = 0; i + 1 < ids.length; i++) {
        const rank = ranks.get(ids[i] * base + ids[i + 1]);
        if (rank !== undefined && rank < best) best = rank;
      }
      if (best === Infinity) break;
      const left = this.merges[2 * best], right = this.merges[2 * best + 1], made = this.made[best];
      const next = [];
      for (let i = 0; i < ids.length; i++) {
        if (i + 1 < ids.length && ids[i] === left && ids[i + 1] === right) { next.push(made); i++; }
        else next.push(ids[i]);
      }
      ids = next;
    }
    if (this.cache.size > 200000) this.cache.clear();
    this.cache.set(piece, ids);
    return ids;
  }

  encode(text) {
    const out = [];
    for (const piece of this.pieces(text)) for (const id of this.encodePiece(piece)) out.push(id);
    return out;
  }

  tokenBytes(id) {
    if (id < 256) return [id];
    let found = this.bytesOf.get(id);
    if (found === undefined) {
      const rank = this.rankOf.get(id);
      found = this.tokenBytes(this.merges[2 * rank]).concat(this.tokenBytes(this.merges[2 * rank + 1]));
      this.bytesOf.set(id, found);
    }
    return found;
  }
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

function hex(bytes) { return bytes.map((b) => b.toString(16).padStart(2, "0")).join(" "); }

function tokenSpan(encoder, id, index) {
  const span = document.createElement("span");
  const bytes = encoder.tokenBytes(id);
  span.className = "tok c" + (index % 6);
  span.dataset.id = String(id);
  span.title = "ID " + id + " · bytes " + hex(bytes);
  let text = null;
  try { text = strictUtf8.decode(new Uint8Array(bytes)); } catch (e) { text = null; }
  if (text === null) { span.classList.add("partial"); span.textContent = bytes.map((b) => "\\x" + b.toString(16).padStart(2, "0")).join(""); }
  else span.textContent = text;
  return span;
}

function setUp() {
  const specs = JSON.parse(document.getElementById("tokenizer-data").textContent);
  const box = document.getElementById("live-input");
  const rows = [];
  for (const spec of specs) {
    const row = document.getElementById("live-" + spec.index);
    const status = row.querySelector(".live-status");
    let encoder = null, reason = spec.unsupported;
    if (reason === null) {
      try {
        encoder = new Encoder(spec);
        for (const check of spec.checks) {
          const got = encoder.encode(check.text);
          if (got.length !== check.ids.length || got.some((id, i) => id !== check.ids[i])) {
            reason = "the browser's encoder gives other IDs than Python on a check text, so none are shown";
            break;
          }
        }
      } catch (e) { reason = "the browser cannot run this pattern exactly: " + e.message; }
    }
    if (reason !== null) { encoder = null; status.textContent = "Live encoding is off for this tokenizer: " + reason + "."; row.classList.add("off"); }
    else status.textContent = "Verified against " + spec.checks.length + " texts encoded by Python.";
    rows.push({ row, encoder });
  }
  function update() {
    for (const { row, encoder } of rows) {
      if (encoder === null) continue;
      const out = row.querySelector(".live-tokens");
      const count = row.querySelector(".live-count");
      let ids;
      try { ids = encoder.encode(box.value); }
      catch (e) { out.textContent = ""; count.textContent = "not shown: " + e.message; continue; }
      const fragment = document.createDocumentFragment();
      ids.forEach((id, i) => fragment.appendChild(tokenSpan(encoder, id, i)));
      out.replaceChildren(fragment);
      count.textContent = ids.length + " tokens";
      out.dataset.ids = ids.join(",");
    }
  }
  // For tests and the curious: the encoders (null where the box is off), by tokenizer.
  window.liveEncoders = rows.map((r) => r.encoder);
  box.addEventListener("input", update);
  update();
  document.body.dataset.ready = "1";
}

document.addEventListener("DOMContentLoaded", setUp);
