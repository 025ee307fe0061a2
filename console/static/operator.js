// The operator's pages (an admin key): tenants with their quotas, budgets and keys; workers and
// their health; model versions, alias routes and canary weights (promote, roll back); and live
// generations by state. Every action is an Admin call (POST /v1/admin/{Method}).

import { h, pill, show, table } from "./dom.js";
import { count, micros, usd, when } from "./format.js";
import { createKeyForm, keysTable, secretPanel } from "./keys.js";
import { modelTables } from "./tenant.js";

const QUOTAS = [
  ["Weight", "weight", 1],
  ["Max concurrent", "maxConcurrentGenerations", 16],
  ["Input tokens/min", "inputTokensPerMinute", 1000000],
  ["Output tokens/min", "outputTokensPerMinute", 200000],
  ["Max queued tokens", "maxQueuedTokens", 64000],
];

export async function tenantsPage(api, main, selected = "") {
  const { tenants = [] } = await api.admin("ListTenants");
  const reload = (id = selected) => tenantsPage(api, main, id);
  const rows = table(
    [
      ["Tenant", (t) => h("a", { href: "#", onclick: (e) => (e.preventDefault(), reload(t.id)) }, t.id)],
      ["State", (t) => (t.disabled ? pill("disabled", false) : pill("active", true))],
      ["Weight", (t) => t.settings.weight, "num"],
      ["Concurrent", (t) => count(t.settings.maxConcurrentGenerations), "num"],
      ["In/min", (t) => count(t.settings.inputTokensPerMinute), "num"],
      ["Out/min", (t) => count(t.settings.outputTokensPerMinute), "num"],
      ["Budget", (t) => (t.settings.monthlyBudgetMicros ? usd(t.settings.monthlyBudgetMicros) : "none"), "num"],
      ["Spent this month", (t) => usd(t.month?.spentMicros), "num"],
      ["Models", (t) => (t.settings.allowedModels ?? []).join(", ") || "all"],
      ["Keys", (t) => count(t.activeKeys), "num"],
      ["", (t) => toggle(api, t, reload)],
    ],
    tenants,
    { "data-testid": "tenants" },
  );
  const detail = selected ? await tenantDetail(api, tenants.find((t) => t.id === selected), reload) : h("p", { class: "muted" }, "Select a tenant to change its quotas and keys.");
  show(main, h("h1", {}, "Tenants"), h("section", { class: "card" }, h("h2", {}, "New tenant"), tenantForm(api, null, reload)), rows, detail);
}

function toggle(api, t, reload) {
  const button = h("button", { type: "button", "data-testid": `toggle-${t.id}` }, t.disabled ? "Enable" : "Disable");
  button.addEventListener("click", async () => {
    await api.admin("UpdateTenant", { tenantId: t.id, disabled: !t.disabled });
    await reload();
  });
  return button;
}

function tenantForm(api, tenant, reload) {
  const inputs = QUOTAS.map(([label, key, fallback]) => [key, h("input", { name: key, type: "number", value: tenant ? tenant.settings[key] : fallback, size: 10 }), label]);
  const id = h("input", { name: "tenantId", required: true, placeholder: "acme", "data-testid": "tenant-id" });
  const budget = h("input", { name: "budget", size: 8, placeholder: "none", value: tenant?.settings.monthlyBudgetMicros ? usd(tenant.settings.monthlyBudgetMicros).slice(1) : "" });
  const models = h("input", { name: "models", placeholder: "all", value: (tenant?.settings.allowedModels ?? []).join(",") });
  const form = h(
    "form",
    { class: "inline" },
    tenant ? null : h("label", {}, "Id", id),
    inputs.map(([, input, label]) => h("label", {}, label, input)),
    h("label", {}, "Monthly budget (USD)", budget),
    h("label", {}, "Models (aliases)", models),
    h("button", { class: "primary", type: "submit" }, tenant ? "Save" : "Create tenant"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const settings = Object.fromEntries(inputs.map(([key, input]) => [key, Number(input.value)]));
    const limit = micros(budget.value);
    const aliases = models.value.split(",").map((m) => m.trim()).filter(Boolean);
    if (tenant) {
      const update = { tenantId: tenant.id, ...settings, allowedModels: { aliases } };
      if (limit === null) update.noMonthlyBudget = true;
      else update.monthlyBudgetMicros = limit;
      await api.admin("UpdateTenant", update);
      await reload(tenant.id);
    } else {
      if (limit !== null) settings.monthlyBudgetMicros = limit;
      await api.admin("CreateTenant", { tenantId: id.value, settings: { ...settings, allowedModels: aliases } });
      await reload(id.value);
    }
  });
  return form;
}

async function tenantDetail(api, tenant, reload) {
  if (!tenant) return null;
  const { keys = [] } = await api.admin("ListApiKeys", { tenantId: tenant.id });
  const place = h("div");
  const create = async (settings, expiresIn) => {
    const created = await api.admin("CreateApiKey", { tenantId: tenant.id, settings, expiresIn });
    show(place, secretPanel(created, () => reload(tenant.id)));
  };
  const revoke = async (keyId) => {
    await api.admin("RevokeApiKey", { keyId });
    await reload(tenant.id);
  };
  return h("section", { class: "card", "data-testid": "tenant-detail" }, h("h2", {}, `Tenant ${tenant.id}`), tenantForm(api, tenant, reload), h("h2", {}, "Keys"), createKeyForm(create), place, keysTable(keys, revoke));
}

export async function workersPage(api, main) {
  const { workers = [] } = await api.admin("ListWorkers");
  const drain = (w) => {
    const button = h("button", { type: "button" }, w.draining ? "Undrain" : "Drain");
    button.addEventListener("click", async () => {
      await api.admin(w.draining ? "UndrainWorker" : "DrainWorker", { workerId: w.workerId });
      await workersPage(api, main);
    });
    return button;
  };
  show(
    main,
    h("h1", {}, "Workers"),
    table(
      [
        ["Worker", (w) => h("code", {}, w.workerId)],
        ["Address", (w) => w.address],
        ["Health", (w) => (w.draining ? pill("draining", false) : pill(w.healthy ? "healthy" : "down", w.healthy))],
        ["Free KV blocks", (w) => count(w.freeKvBlocks), "num"],
        ["Versions", (w) => (w.loadedVersions ?? []).join(", ")],
        ["Last heartbeat", (w) => when(Number(w.lastHeartbeatUnixMs) ? new Date(Number(w.lastHeartbeatUnixMs)).toISOString() : "")],
        ["", drain],
      ],
      workers,
      { "data-testid": "workers" },
    ),
  );
}

export async function routesPage(api, main) {
  const [models, { prices = [] }, { changes = [] }] = await Promise.all([api.admin("ListModels"), api.admin("ListModelPrices"), api.admin("ListModelChanges", { limit: 10 })]);
  const actions = (alias) => {
    const act = (label, method) => {
      const button = h("button", { type: "button", disabled: method === "PromoteVersion" && alias.targets.length < 2 }, label);
      button.addEventListener("click", async () => {
        await api.admin(method, { alias: alias.alias });
        await routesPage(api, main);
      });
      return button;
    };
    return h("span", {}, act("Promote canary", "PromoteVersion"), " ", act("Roll back", "RollbackAlias"));
  };
  show(
    main,
    h("h1", {}, "Models and routes"),
    modelTables(models, actions),
    h("h2", {}, "Prices (USD per million tokens)"),
    table(
      [
        ["Version", (p) => h("code", {}, p.modelVersion)],
        ["Input", (p) => usd(p.inputPerMtok), "num"],
        ["Cached input", (p) => usd(p.cachedInputPerMtok), "num"],
        ["Output", (p) => usd(p.outputPerMtok), "num"],
        ["From", (p) => when(p.effectiveAt)],
        ["Set by", (p) => p.setBy],
      ],
      prices,
    ),
    h("h2", {}, "Recent changes"),
    table(
      [
        ["When", (c) => when(new Date(Number(c.atUnixMs)).toISOString())],
        ["Who", (c) => c.actor],
        ["What", (c) => `${c.action} ${c.alias || ""} ${c.versionId || ""}`],
      ],
      changes,
    ),
  );
}

const STATES = ["QUEUED", "RUNNING", "COMPLETED", "CANCELED", "INTERRUPTED", "FAILED"];

export async function generationsPage(api, main) {
  const asked = new URLSearchParams(location.hash.split("?")[1] ?? "").getAll("state");
  const states = asked.length ? asked : ["QUEUED", "RUNNING"];
  const found = await api.admin("ListGenerations", { states, limit: 50 });
  const boxes = STATES.map((s) => h("label", { class: "check" }, h("input", { type: "checkbox", name: s, checked: states.includes(s), onchange: () => {
    const picked = STATES.filter((x) => main.querySelector(`input[name=${x}]`).checked);
    location.hash = `#/generations?${picked.map((x) => `state=${x}`).join("&")}`;
  } }), s));
  show(
    main,
    h("h1", {}, "Generations"),
    h("section", { class: "card" }, h("div", { class: "inline" }, boxes)),
    h("div", { class: "totals", "data-testid": "counts" }, Object.entries(found.counts ?? {}).map(([state, n]) => h("div", {}, h("span", { class: "muted" }, state), h("b", {}, count(n))))),
    table(
      [
        ["Generation", (g) => h("code", {}, g.generationId)],
        ["Tenant", (g) => g.tenant],
        ["Key", (g) => g.apiKeyId || "—"],
        ["Version", (g) => g.modelVersion],
        ["State", (g) => g.state],
        ["Created", (g) => when(g.createdAt)],
        ["Reserved tokens", (g) => count(g.reservedTokens), "num"],
      ],
      found.generations ?? [],
      { "data-testid": "generations" },
    ),
  );
}


