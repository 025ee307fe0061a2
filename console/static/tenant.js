// The tenant's pages: its keys, its usage and spend over time, its models, and a playground that
// streams a chat completion. Signed in with one of its keys of the `usage` scope.

import { render, series, totals } from "./chart.js";
import { h, show, table } from "./dom.js";
import { count, daysAgo, usd } from "./format.js";
import { createKeyForm, keysTable, secretPanel } from "./keys.js";

const DAY = 86400000;
const HOUR = 3600000;

export async function keysPage(api, main) {
  const { keys } = await api.get("/v1/keys");
  const place = h("div");
  const create = async (settings, expiresIn) => {
    const created = await api.post("/v1/keys", { settings, expiresIn });
    show(place, secretPanel(created, () => keysPage(api, main)));
    show(list, keysTable((await api.get("/v1/keys")).keys, revoke));
  };
  const revoke = async (id) => {
    await api.post(`/v1/keys/${encodeURIComponent(id)}:revoke`);
    show(list, keysTable((await api.get("/v1/keys")).keys, revoke));
  };
  const list = h("div", {}, keysTable(keys, revoke));
  show(main, h("h1", {}, "API keys"), h("section", { class: "card" }, createKeyForm(create), place), list);
}

export async function usagePage(api, main, account) {
  const hourly = location.hash.endsWith("?hour");
  const [start, bucketMs, n] = hourly
    ? [new Date(Math.floor(Date.now() / HOUR) * HOUR - 23 * HOUR), HOUR, 24]
    : [new Date(daysAgo(13)), DAY, 14];
  const bucket = hourly ? "USAGE_BUCKET_HOUR" : "USAGE_BUCKET_DAY";
  const query = `format=jsonl&bucket=${bucket}&windowStart=${encodeURIComponent(start.toISOString())}`;
  const text = await api.text(`/v1/usage/export?${query}`);
  const rows = text.split("\n").filter(Boolean).map((line) => JSON.parse(line));
  const periods = series(rows, start, bucketMs, n);
  const t = totals(periods);
  const month = account.tenant.month ?? {};
  const budget = account.tenant.settings.monthlyBudgetMicros;
  const label = hourly ? (d) => `${String(d.getUTCHours()).padStart(2, "0")}h` : (d) => `${d.getUTCMonth() + 1}/${d.getUTCDate()}`;
  show(
    main,
    h("h1", {}, "Usage and spend"),
    h(
      "div",
      { class: "totals" },
      h("div", {}, h("span", { class: "muted" }, hourly ? "Tokens, last 24 hours" : "Tokens, last 14 days"), h("b", { "data-testid": "total-tokens" }, count(t.tokens))),
      h("div", {}, h("span", { class: "muted" }, "Requests"), h("b", {}, count(t.requests))),
      h("div", {}, h("span", { class: "muted" }, "Spend"), h("b", {}, usd(t.spend))),
      h("div", {}, h("span", { class: "muted" }, "This month"), h("b", {}, `${usd(month.spentMicros)}${budget ? ` of ${usd(budget)}` : ""}`)),
    ),
    h(
      "section",
      { class: "card" },
      h("div", { class: "legend" }, legend("input", "prompt"), legend("cached", "cached prompt"), legend("output", "output"), h("span", {}, "— spend")),
      render(periods, label),
      h("p", {}, h("a", { href: hourly ? "#/usage" : "#/usage?hour" }, hourly ? "By day" : "By hour"), " · ", exportLink(api)),
    ),
    h("p", { class: "muted" }, "Sealed usage only: a generation appears here once it has finished."),
  );
}

function legend(kind, text) {
  return h("span", {}, h("i", { class: `swatch-${kind}` }), text);
}

function exportLink(api) {
  const link = h("a", { href: "#", "data-testid": "export" }, "Download CSV (30 days)");
  link.addEventListener("click", async (event) => {
    event.preventDefault();
    const csv = await api.text("/v1/usage/export?format=csv");
    const url = URL.createObjectURL(new Blob([csv], { type: "text/csv" }));
    h("a", { href: url, download: "usage.csv" }).click();
    URL.revokeObjectURL(url);
  });
  return link;
}

export async function modelsPage(api, main) {
  const models = await api.get("/v1/models");
  show(main, h("h1", {}, "Models"), modelTables(models));
}

/** Aliases with their routes, and versions with their state (shared with the operator's page). */
export function modelTables(models, actions) {
  return [
    h("h2", {}, "Aliases"),
    table(
      [
        ["Alias", (a) => h("code", {}, a.alias)],
        ["Routes to (canary weights)", (a) => routeBars(a.targets)],
        ...(actions ? [["", actions]] : []),
      ],
      models.aliases ?? [],
      { "data-testid": "aliases" },
    ),
    h("h2", {}, "Versions"),
    table(
      [
        ["Version", (v) => h("code", {}, v.id)],
        ["Status", (v) => v.status],
        ["Quantization", (v) => v.quantization || "none"],
        ["Context", (v) => count(v.contextLength), "num"],
        ["Ready workers", (v) => count(v.readyWorkers), "num"],
      ],
      models.versions ?? [],
    ),
  ];
}

function routeBars(targets) {
  const total = targets.reduce((s, t) => s + Number(t.weight), 0) || 1;
  return targets.map((t) => {
    const share = Math.round((100 * Number(t.weight)) / total);
    const bar = h("div", { class: "bar" }, h("span"));
    bar.firstChild.style.width = `${share}%`;
    return h("div", {}, h("code", {}, t.versionId), ` ${share}%`, bar);
  });
}

export async function playgroundPage(api, main) {
  const { aliases = [] } = await api.get("/v1/models");
  const model = h("select", { name: "model" }, aliases.map((a) => h("option", { value: a.alias }, a.alias)));
  const prompt = h("textarea", { name: "prompt", "data-testid": "prompt" }, "Write a haiku about the sea.");
  const maxTokens = h("input", { name: "max_tokens", type: "number", value: 48, min: 1, size: 6 });
  const temperature = h("input", { name: "temperature", type: "number", value: 0, min: 0, max: 2, step: 0.1, size: 6 });
  const answer = h("pre", { class: "answer", "data-testid": "answer" });
  const status = h("p", { class: "muted", "data-testid": "playground-status" });
  const send = h("button", { class: "primary", type: "submit" }, "Send");
  const form = h("form", {}, h("div", { class: "inline" }, h("label", {}, "Model", model), h("label", {}, "Max tokens", maxTokens), h("label", {}, "Temperature", temperature)), h("label", {}, "Message", prompt), send);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    send.disabled = true;
    answer.textContent = "";
    status.textContent = "streaming…";
    const request = { model: model.value, messages: [{ role: "user", content: prompt.value }], max_tokens: Number(maxTokens.value), temperature: Number(temperature.value) };
    try {
      let finish = "";
      for await (const chunk of api.chat(request)) {
        for (const choice of chunk.choices ?? []) {
          answer.textContent += choice.delta?.content ?? "";
          finish = choice.finish_reason ?? finish;
        }
        if (chunk.usage) status.textContent = `finished (${finish}): ${chunk.usage.prompt_tokens} prompt, ${chunk.usage.completion_tokens} completion tokens`;
      }
      status.dataset.done = "1";
    } catch (error) {
      status.textContent = String(error);
    } finally {
      send.disabled = false;
    }
  });
  show(main, h("h1", {}, "Playground"), h("section", { class: "card" }, form), answer, status);
}
