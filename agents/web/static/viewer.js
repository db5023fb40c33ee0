// Draws Cold Iron's table from a state the Python engine computed (agents/web/views.py):
// [action, turn, hurt, deck, phase, iron, hand, drawn, marked, runs]. Shared by the report
// (report.js) and the play page (play.js). No rules here: only drawing.
"use strict";

const ColdIron = (() => {
  const SUIT_SIGNS = { H: "\u2665", D: "\u2666", C: "\u2663", S: "\u2660" };
  const A = 0, TURN = 1, HURT = 2, DECK = 3, PHASE = 4, IRON = 5, HAND = 6, DRAWN = 7, MARKED = 8, RUNS = 9;

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined) node.append(child);
    }
    return node;
  }

  // card characters -> card ids
  const decode = (meta, chars) => Array.from(chars, (c) => meta.chars.indexOf(c));

  function card(meta, id, extra = "") {
    const code = meta.cards[id];
    const suit = code.slice(-1), rank = code.slice(0, -1);
    const red = suit === "H" || suit === "D";
    const text = code === "JK" ? "Joker" : rank + (SUIT_SIGNS[suit] || suit);
    return el("span", { class: `card${red ? " red" : ""}${extra}`, "data-card": code }, text);
  }

  function clock(turn) {
    const minutes = (turn - 1) * 15, hour = 18 + Math.floor(minutes / 60);
    const shown = hour % 12 || 12, suffix = hour % 24 >= 12 ? "pm" : "am";
    return `${shown}:${String(minutes % 60).padStart(2, "0")}${suffix}`;
  }

  // The table at one state. opts: seen (card ids discarded so far), turns, outcome, why,
  // chosen (the action taken from here), estimates ([[action, chance], ...]), onAct(action).
  function table(meta, state, opts = {}) {
    const hand = decode(meta, state[HAND]), marked = new Set(decode(meta, state[MARKED]));
    const phase = meta.phases[state[PHASE]];
    const over = phase === "over";
    const hurtPips = Array.from({ length: meta.max_hurt }, (_, i) =>
      el("span", { class: `pip${i < state[HURT] ? " hurt" : ""}` }));
    const header = el("div", { class: "status" },
      el("span", { class: "turn", "data-turn": state[TURN] }, `Turn ${state[TURN]}/${opts.turns || 24}`),
      el("span", { class: "clock" }, clock(state[TURN])),
      el("span", { class: "phase", "data-phase": phase }, `phase: ${phase}`),
      state[IRON] ? el("span", { class: "iron" }, `Iron ${state[IRON]}/3 this turn`) : null,
      el("span", { class: "hurt", "data-hurt": state[HURT] }, "Hurt ", ...hurtPips, ` ${state[HURT]}/${meta.max_hurt}`),
      el("span", { class: "deck", "data-deck": state[DECK] }, `Deck ${state[DECK]} cards`));
    const rows = meta.suits.map((name, s) => {
      const held = hand.filter((id) => Math.floor(id / 10) === s && id < 40);
      const done = state[RUNS][s] === "3";
      return el("div", { class: "suit", "data-suit": name },
        el("span", { class: "suit-name" }, name),
        el("span", { class: "held" }, held.length ? held.map((id) => card(meta, id, marked.has(id) ? " marked" : "")) : "-"),
        el("span", { class: `run${done ? " done" : ""}` }, done ? "run complete" : `run ${state[RUNS][s]}/3`));
    });
    const drawn = decode(meta, state[DRAWN]);
    const seen = opts.seen || [];
    const parts = [header, el("div", { class: "hand" }, rows),
      el("div", { class: "drawn" }, "Drew: ", drawn.length ? drawn.map((id) => card(meta, id)) : "nothing"),
      el("details", { class: "seen" }, el("summary", {}, `Cards seen (${seen.length})`),
        el("div", {}, seen.map((id) => card(meta, id, " small"))))];
    if (over) {
      const ending = opts.outcome || "over";
      parts.push(el("div", { class: `outcome ${ending}`, "data-outcome": ending },
        `Game over: ${ending}${opts.why ? ` (${opts.why})` : ""}`));
    } else {
      parts.push(actions(meta, state, opts));
    }
    return el("div", { class: "table" }, parts);
  }

  function actions(meta, state, opts) {
    const legal = meta.legal[state[PHASE]];
    const chances = new Map(opts.estimates || []);
    const buttons = legal.map((a) => {
      const chosen = opts.chosen === a;
      const p = chances.get(a);
      return el("button", {
        class: `action${chosen ? " chosen" : ""}${p !== undefined ? " weighed" : ""}`,
        "data-action": a, title: meta.labels[a],
        ...(opts.onAct ? { onclick: () => opts.onAct(a) } : { disabled: "" }),
      }, `${a} ${meta.actions[a]}`,
      p !== undefined ? el("span", { class: "chance", style: `--p:${p}` }, ` ${(100 * p).toFixed(1)}%`) : null);
    });
    return el("div", { class: "actions" }, el("div", { class: "legal-title" },
      opts.estimates ? "Legal actions (the search's estimated win chance of those it weighed)" : "Legal actions"),
      buttons);
  }

  // Cards discarded up to step k: every card drawn so far that is not in the hand.
  function seenAt(meta, states, k) {
    const hand = new Set(decode(meta, states[k][HAND]));
    const out = [];
    for (let i = 1; i <= k; i++) {
      for (const id of decode(meta, states[i][DRAWN])) if (!hand.has(id)) out.push(id);
    }
    return out;
  }

  // Horizontal bars with Wilson 95% whiskers, as SVG.
  function chart(agents) {
    const w = 640, row = 28, left = 170, right = 60, h = agents.length * row + 40;
    const scale = (x) => left + x * (w - left - right) / Math.max(0.05, ...agents.map((a) => a.ci_high));
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
    svg.setAttribute("class", "chart");
    const add = (tag, attrs, text) => {
      const node = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
      if (text !== undefined) node.textContent = text;
      svg.append(node);
    };
    agents.forEach((a, i) => {
      const y = 10 + i * row;
      add("text", { x: left - 8, y: y + 16, "text-anchor": "end" }, a.agent);
      add("rect", { x: left, y: y + 4, width: scale(a.win_rate) - left, height: 16, class: "bar" });
      add("line", { x1: scale(a.ci_low), x2: scale(a.ci_high), y1: y + 12, y2: y + 12, class: "whisker" });
      add("text", { x: scale(a.ci_high) + 6, y: y + 16 }, `${(100 * a.win_rate).toFixed(2)}%`);
    });
    add("text", { x: left, y: h - 6 }, "win rate, Wilson 95% interval");
    return svg;
  }

  return { el, decode, card, table, seenAt, chart, clock, A, TURN, PHASE };
})();
