/* Chapter 10's live classroom explorer: plain JavaScript, no build step, nothing loaded from another machine.
 *
 * It computes nothing about the task. The book's build exported the library's own computation
 * (crossprofile_lib/book/explorer_export.py: data/index.js and one file per template, loaded with <script>
 * elements, so it also works from the site folder opened as files); this script only looks things up and renders
 * them as crossprofile_lib/book/explorer.py's render() does. Decisions are the reference decider's: a normative
 * evidence counter, not a language model. tests/test_explorer_live.py proves, in headless Chromium, that view()
 * equals the library's Exploration.data() for every combination of a build's grid and that the rendered page
 * equals the library's HTML.
 */
(() => {
  "use strict";
  const SCRIPT = document.currentScript;
  const DATA = new URL("data/", SCRIPT ? SCRIPT.src : location.href);
  const waiting = {};            // file -> [resolve, reject]
  const templates = {};          // template id -> its data (inflated)
  const loading = {};            // template id -> Promise
  let INDEX = null;

  const esc = s => String(s).replace(/[&<>"']/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;",
                                                         "'": "&#x27;"})[c]);
  const signed = n => (n >= 0 ? "+" : "") + n;

  function loadScript(file) {
    return new Promise((resolve, reject) => {
      const el = document.createElement("script");
      el.src = new URL(file, DATA).href;
      el.async = true;
      waiting[file] = [resolve, reject];
      el.onerror = () => reject(new Error(`the explorer's data file ${file} did not load`));
      document.head.appendChild(el);
    });
  }

  async function inflate(b64) {
    if (typeof DecompressionStream === "undefined")
      throw new Error("this browser cannot inflate the explorer's data (it has no DecompressionStream)");
    const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  window.cpExplorerIndex = data => { const w = waiting["index.js"]; INDEX = data; if (w) w[0](data); };
  window.cpExplorerTemplate = (id, packed) => {
    const file = INDEX && (INDEX.templates.find(t => t[0] === id) || [])[2];
    const w = waiting[file];
    inflate(packed).then(d => { templates[id] = d; if (w) w[0](d); }, e => { if (w) w[1](e); });
  };

  const ready = loadScript("index.js");

  function load(id) {
    if (templates[id]) return Promise.resolve(templates[id]);
    const t = INDEX.templates.find(x => x[0] === id);
    if (!t) return Promise.reject(new Error(`no template ${id} in this build`));
    if (!loading[id]) loading[id] = loadScript(t[2]).catch(e => { delete loading[id]; throw e; });
    return loading[id];
  }

  // ------------------------------------------------------------------ look-ups (explorer.py's data dicts)
  const at = (list, x, what) => { const i = list.indexOf(x); if (i < 0) throw new Error(`no ${what} ${x}`); return i; };
  const policyNames = () => INDEX.policies.map(p => p[0]);
  const spLabels = () => INDEX.social_proof.map(s => s[0]);

  function taskOf(T, variant, seed) {
    const t = T.tasks[`${variant}/${seed}`];
    if (!t) throw new Error(`no task ${variant}/${seed} of ${T.id}`);
    return t;
  }

  function claimsOf(T, t) {
    const out = [];
    for (let i = 0; i < t.claims.length; i += 4)
      out.push({fact: t.claims[i], first: t.claims[i + 1], speakers: t.claims[i + 2], count: t.claims[i + 3]});
    return out;
  }

  function taskData(T, variant, seed) {
    const t = taskOf(T, variant, seed), v = INDEX.variants.find(x => x[0] === variant);
    const transcript = [];
    for (let i = 0; i < t.utt.length; i += 2) {
      const f = T.facts[t.utt[i + 1]];
      transcript.push([t.order[t.utt[i]], f[0], f[1]]);
    }
    return {template: T.id, title: T.title, variant, cell: v[1], attrs: v[2], seed, t_all: T.t_all,
            correct: T.options[T.correct], decoy: T.options[T.decoy], speaker_order: t.order, transcript,
            claims: claimsOf(T, t).map(c => [c.first + 1, c.speakers, c.count, T.facts[c.fact][0], T.facts[c.fact][1]])};
  }

  function caption(rule, policy, doc, budget, k) {
    if (rule === "fit")
      return `What ${policy} keeps within ${budget} tokens. Priority order: ${doc}; a line that does not fit is ` +
             "skipped and the walk goes on";
    if (rule === "packer") return `What ${policy} keeps within ${budget} tokens. Priority order: ${doc}; packed by its own rule`;
    if (rule === "fixed-k") return `What ${policy} keeps. Priority order: ${doc}; the first ${k} claims, whatever their cost`;
    if (rule === "transcript") return `What ${policy} shows: ${doc}, every line of the discussion, repeats included`;
    return `What ${policy} keeps: ${doc}, unbudgeted`;
  }

  function memoryData(T, variant, seed, budget, policy, sp) {
    const t = taskOf(T, variant, seed), pi = at(policyNames(), policy, "policy"), si = at(spLabels(), sp, "weight");
    const row = t.pol[budget];
    if (!row) throw new Error(`no budget ${budget}`);
    const [mi, oi, fate] = row.slice(3 * pi, 3 * pi + 3);
    const [tokens, support, decoy, irrelevant, netLead, lines, vref] = t.mems[mi];
    const V = T.verdicts[Array.isArray(vref) ? vref[si] : vref];
    const text = [];
    for (let i = 0; i < lines.length; i += 2) text.push(T.strings[lines[i]] + (lines[i + 1] >= 0 ? T.facts[lines[i + 1]][0] : ""));
    const scores = [];
    for (let i = 2; i < V.length; i += 2) scores.push([T.options[V[i]], V[i + 1]]);
    const [rule, doc, k] = T.rules[pi], B = T.budgets[budget], claims = claimsOf(T, t), order = t.orders[oi];
    const mask = Array.isArray(fate) ? fate[0] : fate, lefts = Array.isArray(fate) ? fate.slice(1) : [];
    const kept = order.map((_, r) => Math.floor(mask / 2 ** r) % 2 === 1);
    const used = order.reduce((u, c, r) => u + (kept[r] ? t.costs[c] : 0), 0);
    let nextLeft = 0;
    const steps = order.map((c, r) => {
      const cl = claims[c], f = T.facts[cl.fact], cost = t.costs[c];
      let why = "kept";
      if (!kept[r]) {
        if (rule === "fit") why = `dropped: its line needs ${cost} tokens, ${lefts[nextLeft++]} of ${B} left`;
        else if (rule === "fixed-k") why = `dropped: the fixed-k control keeps the first ${k} in priority order`;
        else if (rule === "packer")
          why = `dropped: its own packing rule (${doc}) did not take it; ${B - used} of ${B} tokens left`;
        else why = `dropped: ${policy} keeps ${doc}`;
      }
      const ranked = rule === "fit" || rule === "packer" || rule === "fixed-k";
      return [ranked ? String(r + 1) : "", cl.speakers, f[0], f[1], cost, why];
    });
    return {policy, support, decoy, irrelevant, net_lead: netLead, tokens, text: text.join("\n"),
            choice: T.options[V[0]], verdict: T.strings[V[1]], scores,
            caption: caption(rule, policy, doc, B, k), steps};
  }

  /** What explorer.py's Exploration.data() gives for these settings (the template's data must be loaded). */
  function view(s) {
    const T = templates[s.template];
    if (!T) throw new Error(`template ${s.template} is not loaded`);
    const seed = Number(s.seed), si = at(spLabels(), s.social_proof, "weight");
    const walk = INDEX.walk_policies, pols = walk.includes(s.policy) ? walk : [s.policy, ...walk];
    const mem = p => memoryData(T, s.variant, seed, s.budget, p, s.social_proof);
    return {...taskData(T, s.variant, seed), budget: s.budget, budget_tokens: T.budgets[s.budget],
            social_proof: s.social_proof, decider: INDEX.social_proof[si][1], policy: s.policy, focus: mem(s.policy),
            others: pols.filter(p => p !== s.policy).map(mem)};
  }

  /** What explorer.py's exercises_data() gives for the template, budget and seed. */
  function exercisesData(id, budget, seed) {
    const T = templates[id], x = INDEX.exercises;
    seed = Number(seed);
    const cells = x.cells.map(([variant, name]) => ({
      variant, name,
      kept: x.policies.map(p => { const d = memoryData(T, variant, seed, budget, p, "0");
                                  return [p, d.support, d.decoy, d.irrelevant, d.verdict]; }),
      all: memoryData(T, variant, seed, budget, "ALL", x.social_proof).verdict}));
    return {template: id, budget, seed, cells};
  }

  // ------------------------------------------------------------------ rendering (explorer.py's render())
  function memoryHtml(d, budgetTokens, open) {
    const scores = d.scores.map(([n, s]) => `${esc(n)} ${s}`).join(", ");
    const rows = d.steps.map(([r, who, text, role, cost, why]) =>
      `<tr><td>${r}</td><td>[${esc(who)}] ${esc(text)} <span class='cp-role cp-${role}'>${role}</span></td>` +
      `<td>${cost}</td><td>${esc(why)}</td></tr>`).join("");
    return `<details class='cp-memory' data-policy='${esc(d.policy)}'${open ? " open" : ""}><summary><b>` +
      `${esc(d.policy)}</b>: keeps ${d.support} support / ${d.decoy} decoy / ${d.irrelevant} irrelevant ` +
      `(${d.tokens} of ${budgetTokens} tokens); net lead ${signed(d.net_lead)}; the ${INDEX.reference} chooses ` +
      `<b>${esc(d.choice)}</b> (<span class='cp-verdict'>${esc(d.verdict)}</span>)</summary>` +
      `<p>Scores: ${scores}.</p><pre>${esc(d.text) || "(empty memory)"}</pre>` +
      `<div class='cp-scroll'><table class='cp-walk'><caption>${esc(d.caption)}</caption><tr><th>priority</th>` +
      `<th>claim</th><th>line tokens</th><th>kept or dropped, and why</th></tr>${rows}</table></div></details>`;
  }

  function render(d) {
    const tr = d.transcript.map(([s, text, role]) =>
      `<li><b>${esc(s)}</b>: ${esc(text)} <span class='cp-role cp-${role}'>${role}</span></li>`).join("");
    const cl = d.claims.map(([first, who, n, text, role]) =>
      `<tr><td>${first}</td><td>${esc(who)}</td><td>${n}</td><td>${esc(text)}</td><td>${role}</td></tr>`).join("");
    const others = d.others.map(m => memoryHtml(m, d.budget_tokens, false)).join("");
    const [sa, da, ia] = d.attrs;
    return `<div class='cp-explorer-view' data-variant='${d.variant}' data-policy='${esc(d.policy)}'>` +
      `<p><b>${esc(d.title)}</b> (${esc(d.template)}), variant <b>${d.variant}</b>${d.cell}: support ` +
      `${sa}, decoy ${da}, irrelevant ${ia}; seed ${d.seed}; budget ${d.budget_tokens} of T_all = ${d.t_all} ` +
      `tokens; social-proof weight ${d.social_proof}. Correct option <b>${esc(d.correct)}</b>, decoy option ` +
      `<b>${esc(d.decoy)}</b> (roles are never shown to a model). Decisions by the ${INDEX.reference} ` +
      `(${esc(d.decider)}), a normative evidence counter, not a language model.</p>` +
      memoryHtml(d.focus, d.budget_tokens, true) +
      `<details data-part='others'><summary>The other policies</summary>${others}</details>` +
      `<details data-part='discussion'><summary>Scripted discussion (${d.transcript.length} lines, speaker ` +
      `order ${d.speaker_order.join(", ")})</summary><ol>${tr}</ol></details>` +
      `<details data-part='claims'><summary>Claim list (${d.claims.length} claims)</summary><div ` +
      `class='cp-scroll'><table><tr><th>first</th><th>speakers</th><th>n</th><th>text</th><th>role</th></tr>` +
      `${cl}</table></div></details></div>`;
  }

  function renderExercises(d) {
    const items = d.cells.map(c => {
      const facts = c.kept.map(([p, s, dc, i, word]) => `${p} keeps ${s} support, ${dc} decoy and ${i} irrelevant ` +
        `facts and the ${INDEX.reference} ends at <b>${esc(word)}</b>`);
      return `<li><b>The ${c.name} cell, ${c.variant}.</b> <i>Predict</i>: at r = ${d.budget}, ` +
        "how many decoy facts does rarest-first (R1) keep, and how many does first-mention (B4) keep? Which " +
        "ends correct? Then raise the social-proof weight to 1 with policy ALL: does the decision change? " +
        `<i>Check</i> with the controls (variant ${c.variant}), then open the answer.` +
        `<details><summary>Answer for ${esc(d.template)}, seed ${d.seed}</summary><p>${facts.join("; ")}. ` +
        `With ALL and social-proof weight 1 the ${INDEX.reference} ends at <b>${esc(c.all)}</b>.</p></details></li>`;
    });
    return "<ol class='cp-exercises'>" + items.join("") + "</ol>";
  }

  // ------------------------------------------------------------------ the page: controls, state, rendering
  /** Buttons that set the controls to what an exercise asks about (the check, after the prediction). */
  function checksHtml() {
    const x = INDEX.exercises, buttons = [];
    for (const [variant, name] of x.cells) {
      for (const p of x.policies) buttons.push([{variant, policy: p, social_proof: "0"}, `${name} cell, ${p}`]);
      buttons.push([{variant, policy: "ALL", social_proof: x.social_proof}, `${name} cell, ALL at weight ${x.social_proof}`]);
    }
    return "<p class='cp-live-checks'>Check with the controls: " + buttons.map(([set, label]) =>
      `<button type='button' data-set='${esc(JSON.stringify(set))}'>${esc(label)}</button>`).join(" ") + "</p>";
  }

  function check(e) {
    const b = e.target.closest("button[data-set]");
    if (!b || !state) return;
    const root = document.querySelector("[data-cp-live='view']");
    window.cpExplorer.pending = show({...state, ...JSON.parse(b.dataset.set)}, true)
      .then(() => root && root.scrollIntoView({block: "start"}))
      .catch(err => status(root, "The explorer could not show this: " + err.message));
  }

  const FIELDS = ["template", "variant", "policy", "budget", "seed", "social_proof"];
  let state = null, uid = 0, rendered = 0;

  function options(name) {
    const x = INDEX;
    if (name === "template") return x.templates.map(t => [t[0], `${t[0]}: ${t[1]}`]);
    if (name === "variant") return x.variants.map(v => [v[0], `${v[0]}${v[1]}: support ${v[2][0]}, decoy ${v[2][1]}, ` +
                                                             `irrelevant ${v[2][2]}`]);
    if (name === "policy") return x.policies;
    if (name === "budget") return x.budgets.map(b => [b, /t$/.test(b) ? `${b.slice(0, -1)} tokens (fixed)` : `r = ${b}`]);
    if (name === "seed") return x.seeds.map(s => [String(s), String(s)]);
    return x.social_proof.map(s => [s[0], s[0]]);
  }

  function valid(s) {
    return s && FIELDS.every(f => options(f).some(o => o[0] === String(s[f])));
  }

  function fromHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    if (!h.has("template")) return null;
    const s = {};
    for (const f of FIELDS) s[f] = h.get(f);
    return valid(s) ? s : null;
  }

  const LABELS = {template: "Template", variant: "Attribution variant", policy: "Memory policy",
                  budget: "Budget", seed: "Seed", social_proof: "Social-proof weight s"};

  function controlsHtml(id) {
    const fields = FIELDS.map(f => {
      const fid = `${id}-${f}`;
      if (f === "social_proof") {
        const n = options(f).length - 1;
        return `<div class='cp-field cp-field-range'><label for='${fid}'>${LABELS[f]}</label>` +
          `<input type='range' id='${fid}' name='${f}' min='0' max='${n}' step='1'>` +
          `<output id='${fid}-out' for='${fid}' aria-hidden='true'></output></div>`;
      }
      const opts = options(f).map(([v, label]) => `<option value='${esc(v)}'>${esc(label)}</option>`).join("");
      return `<div class='cp-field'><label for='${fid}'>${LABELS[f]}</label><select id='${fid}' name='${f}'>` +
             `${opts}</select></div>`;
    }).join("");
    return `<form class='cp-live-controls' aria-label='Explorer settings' onsubmit='return false'>${fields}</form>`;
  }

  function readControls(root) {
    const s = {};
    for (const f of FIELDS) {
      const el = root.querySelector(`[name='${f}']`);
      s[f] = f === "social_proof" ? options(f)[Number(el.value)][0] : el.value;
    }
    return s;
  }

  function writeControls(root, s) {
    for (const f of FIELDS) {
      const el = root.querySelector(`[name='${f}']`);
      if (f === "social_proof") {
        const i = options(f).findIndex(o => o[0] === s[f]);
        el.value = String(i);
        el.setAttribute("aria-valuetext", s[f]);
        root.querySelector(`#${el.id}-out`).textContent = s[f];
      } else el.value = String(s[f]);
    }
  }

  function status(root, msg) { const el = root.querySelector(".cp-live-status"); if (el) el.textContent = msg; }

  /** Show settings ``s`` (each control, the view, the exercises, the address); resolves when the page shows it. */
  async function show(s, byUser = false) {
    const views = document.querySelectorAll("[data-cp-live='view']");
    const t0 = performance.now();
    state = {...s};
    views.forEach(root => writeControls(root, state));
    const T = await load(state.template);
    if (FIELDS.some(f => String(state[f]) !== String(s[f]))) return;  // a later change overtook this one
    const html = render(view(state));
    views.forEach(root => {
      const box = root.querySelector(".cp-live-view");
      const open = [...box.querySelectorAll("details[data-part]")].filter(d => d.open).map(d => d.dataset.part);
      box.innerHTML = html;
      open.forEach(p => { const d = box.querySelector(`details[data-part='${p}']`); if (d) d.open = true; });
      box.dataset.shows = FIELDS.map(f => state[f]).join("|");
      status(root, `Showing ${T.id}, variant ${state.variant}, policy ${state.policy}, budget ${state.budget}, seed ` +
                   `${state.seed}, social-proof weight ${state.social_proof}.`);
    });
    const exKey = [state.template, state.budget, state.seed].join("|");  // what the exercises' answers depend on
    document.querySelectorAll("[data-cp-live='exercises'] .cp-live-exercises").forEach(box => {
      if (box.dataset.shows === exKey) return;
      box.innerHTML = renderExercises(exercisesData(state.template, state.budget, state.seed)) + checksHtml();
      box.dataset.shows = exKey;
    });
    if (byUser || fromHash())  // the address names the settings (a link to share); a section's anchor is left alone
      history.replaceState(null, "", "#" + new URLSearchParams(FIELDS.map(f => [f, state[f]])).toString());
    rendered++;
    window.cpExplorer.lastRenderMs = performance.now() - t0;
  }

  function start() {
    ready.then(() => {
      const s = fromHash() || {...INDEX.focus, seed: String(INDEX.focus.seed)};
      document.querySelectorAll("[data-cp-live='view']").forEach(root => {
        const id = `cp-live-${uid++}`;
        root.insertAdjacentHTML("afterbegin", controlsHtml(id) + "<p class='cp-live-status' role='status' " +
                                              "aria-live='polite'></p>");
        root.querySelector("form").addEventListener("input", () => {
          window.cpExplorer.pending = show(readControls(root), true)
            .catch(err => status(root, "The explorer could not show this: " + err.message));
        });
      });
      document.querySelectorAll("[data-cp-live='exercises']").forEach(box => box.addEventListener("click", check));
      window.addEventListener("hashchange", () => {  // a link with other settings followed on this page
        const h = fromHash();
        if (h && FIELDS.some(f => String(h[f]) !== String(state && state[f]))) window.cpExplorer.pending = show(h);
      });
      return show(s);
    }).catch(err => document.querySelectorAll("[data-cp-live='view']").forEach(root => {
      const p = document.createElement("p");
      p.className = "cp-live-status";
      p.textContent = "The live explorer could not start (" + err.message + "); the view below is the book's static " +
                      "view of its default settings.";
      root.prepend(p);
    }));
  }

  window.cpExplorer = {ready, load, view, render, exercisesData, renderExercises, show,
                       get index() { return INDEX; }, get state() { return state; }, get rendered() { return rendered; },
                       lastRenderMs: null, pending: null};
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
