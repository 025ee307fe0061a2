// API keys, for a tenant (its own, /v1/keys) and an operator (any tenant's, Admin): the list (never
// a secret), creation with the secret shown once, and revocation.

import { h, pill, table } from "./dom.js";
import { micros, usd, when } from "./format.js";

const EXPIRIES = [["never", ""], ["30 days", "2592000s"], ["90 days", "7776000s"], ["1 year", "31536000s"]];

/** The keys, with a revoke button (two clicks) on each active one. */
export function keysTable(keys, revoke) {
  return table(
    [
      ["Key", (k) => h("code", {}, k.id)],
      ["Name", (k) => k.settings.name || "—"],
      ["Scopes", (k) => (k.settings.scopes ?? []).join(", ")],
      ["Created", (k) => when(k.createdAt)],
      ["Last used", (k) => when(k.lastUsedAt)],
      ["Expires", (k) => when(k.settings.expiresAt)],
      ["This month", (k) => usd(k.month?.spentMicros), "num"],
      ["State", (k) => (k.revokedAt ? pill("revoked", false) : pill("active", true))],
      ["", (k) => (k.revokedAt ? "" : revokeButton(() => revoke(k.id)))],
    ],
    keys,
    { "data-testid": "keys" },
  );
}

function revokeButton(revoke) {
  const button = h("button", { class: "danger", type: "button", "data-testid": "revoke" }, "Revoke");
  button.addEventListener("click", async () => {
    if (button.dataset.armed) {
      button.disabled = true;
      await revoke();
    } else {
      button.dataset.armed = "1";
      button.textContent = "Confirm revoke";
    }
  });
  return button;
}

/** The form that creates a key: create(settings, expiresIn) answers {key, secret}. */
export function createKeyForm(create) {
  const name = h("input", { name: "name", placeholder: "e.g. production", "data-testid": "key-name" });
  const scopes = ["generate", "usage"].map((s) => h("input", { type: "checkbox", name: s, checked: true }));
  const expiry = h("select", { name: "expires" }, EXPIRIES.map(([label, value]) => h("option", { value }, label)));
  const budget = h("input", { name: "budget", placeholder: "none", size: 8 });
  const form = h(
    "form",
    { class: "inline", "data-testid": "create-key" },
    h("label", {}, "Name", name),
    scopes.map((box) => h("label", { class: "check" }, box, box.name)),
    h("label", {}, "Expires", expiry),
    h("label", {}, "Monthly budget (USD)", budget),
    h("button", { class: "primary", type: "submit" }, "Create key"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const settings = { name: name.value, scopes: scopes.filter((b) => b.checked).map((b) => b.name) };
    const limit = micros(budget.value);
    if (limit !== null) settings.monthlyBudgetMicros = limit;
    await create(settings, expiry.value || undefined);
    name.value = "";
  });
  return form;
}

/** The new key's secret, shown this once: dismissing it removes it from the page for good. */
export function secretPanel(created, dismissed) {
  const panel = h(
    "div",
    { class: "secret", "data-testid": "secret-panel" },
    h("strong", {}, `Key ${created.key.id} created. Copy its secret now: it is not shown again.`),
    h("code", { "data-testid": "new-secret" }, created.secret),
  );
  const copy = h("button", { type: "button" }, "Copy");
  copy.addEventListener("click", () => navigator.clipboard?.writeText(panel.querySelector("code").textContent));
  const done = h("button", { type: "button", class: "primary", "data-testid": "secret-stored" }, "I have stored it");
  done.addEventListener("click", () => {
    panel.remove();
    dismissed();
  });
  panel.append(h("div", {}, copy, " ", done));
  return panel;
}
