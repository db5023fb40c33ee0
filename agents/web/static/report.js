// The evaluation report (agents/web/report.py writes the data): results, pairs, chart, the
// deals where two agents differ, and a replay of any deal, one agent or two side by side.
// Keys: left/right a step, up/down the previous/next deal of the list, Home/End. The URL's
// fragment (#deal=12&step=3&a=heuristic&b=trained) names what is shown: a link opens it.
"use strict";

(() => {
  const { el, chart, table, seenAt, decode } = ColdIron;
  const data = JSON.parse(document.getElementById("summary").textContent);
  const packed = JSON.parse(document.getElementById("chunks").textContent);
  const meta = data.meta, names = data.agents.map((a) => a.agent);
  const opened = new Map();  // chunk index -> promise of its games
  const view = { deal: 0, step: 0, a: names[0], b: names[1] || "", list: [] };
  const pct = (x) => `${(100 * x).toFixed(2)}%`;

  function games(deal) {
    const index = Math.floor(deal / data.chunk);
    if (!opened.has(index)) {
      const bytes = Uint8Array.from(atob(packed[index]), (c) => c.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      opened.set(index, new Response(stream).text().then(JSON.parse));
    }
    return opened.get(index).then((chunk) => chunk[deal]);
  }

  function results() {
    const head = ["agent", "deals", "win rate", "95% interval", ...meta.outcomes, "mean turns"];
    const rows = data.agents.map((a) => el("tr", {}, el("td", {}, a.agent), el("td", {}, a.episodes),
      el("td", {}, pct(a.win_rate)), el("td", {}, `[${pct(a.ci_low)}, ${pct(a.ci_high)}]`),
      meta.outcomes.map((o) => el("td", {}, a.outcomes[o])), el("td", {}, a.mean_turns.toFixed(2))));
    const pairs = data.paired.map((p) => el("tr", {}, el("td", {}, `${p.agent} - ${p.against}`),
      el("td", {}, `${(100 * p.difference).toFixed(2)} points [${(100 * p.difference_ci95[0]).toFixed(2)}, ${(100 * p.difference_ci95[1]).toFixed(2)}]`),
      el("td", {}, p.only_other_wins), el("td", {}, p.only_base_wins), el("td", {}, p.p_two_sided > 0 ? p.p_two_sided.toPrecision(2) : "< 1e-300")));
    return [el("table", { id: "results" }, el("tr", {}, head.map((h) => el("th", {}, h))), rows),
      pairs.length ? el("table", { id: "paired" }, el("tr", {}, ["paired, on the same deals", "difference (95%)",
        "only_other_wins", "only_base_wins", "McNemar p"].map((h) => el("th", {}, h))), pairs) : null];
  }

  function select(id, chosen, allowNone) {
    const options = (allowNone ? [""] : []).concat(names).map((n) =>
      el("option", n === chosen ? { value: n, selected: "" } : { value: n }, n || "(none)"));
    return el("select", { id, onchange: (e) => { view[id] = e.target.value; differ(); go(view.deal, 0); } }, options);
  }

  // the deals where A and B end differently (all deals with one agent)
  function differ() {
    const a = data.agents[names.indexOf(view.a)], b = data.agents[names.indexOf(view.b)];
    view.list = [];
    for (let d = 0; d < a.by_deal.length; d++) if (!b || a.by_deal[d] !== b.by_deal[d]) view.list.push(d);
    const shown = view.list.slice(0, 400).map((d) => el("a", { href: `#deal=${d}&a=${view.a}&b=${view.b}`, class: "deal-link",
      "data-deal": d }, `${d}`));
    const words = b ? `${view.list.length} deals where ${view.a} and ${view.b} end differently` : `${view.list.length} deals`;
    document.getElementById("differ").replaceChildren(el("p", {}, words + (view.list.length > 400 ? " (the first 400 listed)" : "") + ":"),
      el("div", { class: "deal-list" }, shown));
  }

  function column(name, game, step, other) {
    const states = game.s, k = Math.min(step, states.length - 1), state = states[k];
    const code = data.agents[names.indexOf(name)].by_deal[view.deal];
    const outcome = meta.outcomes[Number(code)];
    let parted = "";
    if (other) {
      const p = game.s.findIndex((s, i) => !other.s[i] || s[0] !== other.s[i][0]);
      parted = p >= 0 && p < game.s.length - 1 ? `choices part at step ${p} (turn ${game.s[p][1]})` : "the same moves";
    }
    return el("div", { class: "column", "data-agent": name },
      el("h3", {}, `${name}: ${outcome} in ${states.length - 1} steps`),
      el("p", { class: "where" }, `step ${k} of ${states.length - 1}${parted ? `; ${parted}` : ""}`),
      table(meta, state, { seen: seenAt(meta, states, k), outcome, chosen: state[0] >= 0 ? state[0] : undefined,
        estimates: game.e ? game.e[k] : undefined }));
  }

  async function show() {
    const deal = await games(view.deal);
    const a = deal[view.a], b = view.b ? deal[view.b] : null;
    const last = Math.max(a.s.length, b ? b.s.length : 0) - 1;
    view.step = Math.max(0, Math.min(view.step, last));
    document.getElementById("replay").replaceChildren(
      el("div", { class: "columns" }, column(view.a, a, view.step, b), b ? column(view.b, b, view.step, a) : null));
    document.getElementById("deal").value = view.deal;
    const hash = `#deal=${view.deal}&step=${view.step}&a=${view.a}${view.b ? `&b=${view.b}` : ""}`;
    if (location.hash !== hash) history.replaceState(null, "", hash);
  }

  function go(deal, step) {
    view.deal = Math.max(0, Math.min(deal, data.episodes - 1));
    view.step = step;
    return show();
  }

  function fromHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    if (params.has("a") && names.includes(params.get("a"))) view.a = params.get("a");
    if (params.has("b")) view.b = names.includes(params.get("b")) ? params.get("b") : "";
    document.getElementById("a").value = view.a;
    document.getElementById("b").value = view.b;
    differ();
    return go(Number(params.get("deal") || 0), Number(params.get("step") || 0));
  }

  document.body.append(
    el("h1", {}, "Cold Iron: an evaluation"),
    el("p", { class: "about" }, `${data.episodes} ${data.deal_set} deals of seed ${data.seed}; Wilson 95% intervals; `,
      "paired: each agent against ", el("b", {}, data.paired.length ? data.paired[0].against : "-"),
      " on the same deals (McNemar's exact test). ", el("code", {}, data.command)),
    ...results().filter(Boolean), chart(data.agents),
    el("h2", {}, "Deals to replay"),
    el("div", { class: "controls" }, "agent ", select("a", view.a, false), " beside ", select("b", view.b, true),
      " deal ", el("input", { id: "deal", type: "number", min: 0, max: data.episodes - 1, value: 0,
        onchange: (e) => go(Number(e.target.value), 0) }),
      el("button", { id: "prev", onclick: () => go(view.deal, view.step - 1) }, "\u2190 step"),
      el("button", { id: "next", onclick: () => go(view.deal, view.step + 1) }, "step \u2192")),
    el("div", { id: "differ" }), el("div", { id: "replay" }));

  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
    const at = view.list.indexOf(view.deal);
    const moves = { ArrowLeft: () => go(view.deal, view.step - 1), ArrowRight: () => go(view.deal, view.step + 1),
      Home: () => go(view.deal, 0), End: () => go(view.deal, 1e9),
      ArrowUp: () => go(view.list[Math.max(0, at - 1)] ?? view.deal, 0),
      ArrowDown: () => go(view.list[at + 1] ?? view.deal, 0) };
    if (moves[e.key]) { e.preventDefault(); moves[e.key](); }
  });
  window.addEventListener("hashchange", fromHash);
  window.coldironReady = fromHash();
})();
