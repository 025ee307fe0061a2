// The console's shell: signing in with an API key, the pages of each role, and the errors.
//
// A tenant signs in with one of its keys holding the `usage` scope (GET /v1/account answers); an
// operator with an admin key (that call is NOT_A_TENANT, and an Admin call answers). The key is kept
// in this tab's session storage, sent as a Bearer credential, and never shown.

import { Api, ApiError } from "./api.js";
import { h, show } from "./dom.js";
import { generationsPage, routesPage, tenantsPage, workersPage } from "./operator.js";
import { keysPage, modelsPage, playgroundPage, usagePage } from "./tenant.js";

const STORED = "llm-console-key";
const PAGES = {
  tenant: [
    ["keys", "Keys", keysPage],
    ["usage", "Usage", usagePage],
    ["models", "Models", modelsPage],
    ["playground", "Playground", playgroundPage],
  ],
  operator: [
    ["tenants", "Tenants", tenantsPage],
    ["workers", "Workers", workersPage],
    ["routes", "Models", routesPage],
    ["generations", "Generations", generationsPage],
  ],
};

let session = null; // {role, api, account}
const main = document.getElementById("main");
const banner = document.getElementById("error");

function fail(error) {
  banner.hidden = false;
  banner.textContent = error instanceof ApiError ? error.toString() : String(error);
  if (error instanceof ApiError && error.status === 401 && session) signOut();
}

async function signIn(key) {
  const api = new Api(key);
  try {
    return { role: "tenant", api, account: await api.get("/v1/account") };
  } catch (error) {
    if (!(error instanceof ApiError) || error.reason !== "NOT_A_TENANT") throw error;
  }
  await api.admin("ListTenants");
  return { role: "operator", api, account: null };
}

function signOut() {
  sessionStorage.removeItem(STORED);
  session = null;
  location.hash = "";
  route();
}

function signInPage() {
  const key = h("input", { type: "password", name: "key", autocomplete: "off", "data-testid": "api-key", placeholder: "sk-…" });
  const form = h(
    "form",
    { class: "card signin" },
    h("h1", {}, "Sign in"),
    h("p", { class: "muted" }, "A tenant's API key with the usage scope, or an operator's admin key."),
    key,
    h("p", {}, h("button", { class: "primary", type: "submit", "data-testid": "sign-in" }, "Sign in")),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      session = await signIn(key.value.trim());
      sessionStorage.setItem(STORED, key.value.trim());
      banner.hidden = true;
      location.hash = `#/${PAGES[session.role][0][0]}`;
      await route();
    } catch (error) {
      fail(error);
    }
  });
  show(main, form);
}

async function route() {
  const nav = document.getElementById("nav");
  document.getElementById("sign-out").hidden = !session;
  if (!session) {
    show(nav);
    document.getElementById("who").textContent = "";
    return signInPage();
  }
  const pages = PAGES[session.role];
  const name = location.hash.replace(/^#\//, "").split("?")[0];
  const [page, , render] = pages.find(([p]) => p === name) ?? pages[0];
  show(nav, pages.map(([p, title]) => h("a", { href: `#/${p}`, class: p === page ? "active" : null, "data-testid": `nav-${p}` }, title)));
  document.getElementById("who").textContent = session.role === "tenant" ? `tenant ${session.account.tenant.id}` : "operator";
  banner.hidden = true;
  try {
    if (session.role === "tenant" && page === "usage") session.account = await session.api.get("/v1/account");
    await render(session.api, main, session.account);
    main.dataset.page = page;
  } catch (error) {
    fail(error);
  }
}

document.getElementById("sign-out").addEventListener("click", signOut);
window.addEventListener("hashchange", route);
window.addEventListener("unhandledrejection", (event) => fail(event.reason));
const stored = sessionStorage.getItem(STORED);
if (stored) {
  signIn(stored)
    .then((s) => (session = s))
    .catch(() => sessionStorage.removeItem(STORED))
    .finally(route);
} else {
  route();
}
