// The play page (agents/web/server.py serves it): the engine deals and judges, the page draws
// and sends the actions clicked. Each tab plays its own game. ?seed=S in the URL deals seed S.
"use strict";

(async () => {
  const { el, table, seenAt } = ColdIron;
  const meta = await (await fetch("/meta")).json();
  const game = { id: null, states: [] };
  const $ = (id) => document.getElementById(id);

  async function call(method, path, body) {
    const reply = await fetch(path, { method, headers: { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body) });
    const data = await reply.json();
    if (!reply.ok) throw new Error(data.error || reply.statusText);
    return data;
  }

  function draw(status) {
    game.states.push(status.state);
    $("hints").replaceChildren();
    $("table").replaceChildren(table(meta, status.state, {
      seen: seenAt(meta, game.states, game.states.length - 1), turns: status.turns,
      outcome: status.outcome, why: status.why, onAct: act }));
    document.body.dataset.phase = meta.phases[status.state[4]];
    document.body.dataset.moves = String(game.states.length - 1);  // moves played: tests wait on it
  }

  async function attempt(work) {
    $("error").textContent = "";
    try { await work(); } catch (err) { $("error").textContent = String(err.message || err); }
  }

  const act = (action) => attempt(async () => draw(await call("POST", `/games/${game.id}/act`, { action })));

  async function deal(request) {
    const status = await call("POST", "/games", request);
    game.id = status.id;
    game.states = [];
    draw(status);
  }

  $("new").addEventListener("submit", (e) => {
    e.preventDefault();
    const deck = $("deck").value.trim(), seed = $("seed").value;
    attempt(() => deal(deck ? { deck: deck.split(/[\s,]+/) } : seed !== "" ? { seed: Number(seed) } : {}));
  });
  $("hint").addEventListener("click", () => attempt(async () => {
    $("hints").textContent = "the planner is sampling orders of the unseen cards...";
    const hint = await call("POST", `/games/${game.id}/hint`);
    const rows = Object.entries(hint.chances).map(([a, p]) =>
      el("tr", { "data-action": a }, el("td", {}, `${a} ${meta.actions[a]}`), el("td", {}, `${(100 * p).toFixed(1)}%`)));
    const parts = rows.length ? [el("p", {}, "The planner's estimated win chance of each legal action "
      + "(each from 200 sampled orders of the unseen cards):"), el("table", { id: "hint-table" }, rows)] : [];
    if (hint.why) parts.push(el("p", { class: "why" }, hint.why));
    $("hints").replaceChildren(...parts);
  }));
  $("save").addEventListener("click", () => attempt(async () => {
    const saved = await call("GET", `/games/${game.id}/save`);
    const link = el("a", { href: URL.createObjectURL(new Blob([JSON.stringify(saved, null, 2)])),
      download: "cold-iron-game.json" });
    link.click();
  }));
  document.addEventListener("keydown", (e) => {  // a digit plays that action when one is legal
    if (e.target.tagName !== "INPUT" && /^[0-9]$/.test(e.key)) {
      const button = document.querySelector(`button.action[data-action="${e.key}"]`);
      if (button) button.click();
    }
  });

  const seed = new URLSearchParams(location.search).get("seed");
  await attempt(() => deal(seed !== null ? { seed: Number(seed) } : {}));
  window.coldironReady = true;
})();
