// Building the page from data without HTML strings: every value goes in as text, so nothing a
// tenant or model wrote can become markup.

/** An element: h("td", {class: "num"}, "12"), attributes with on* handlers, children as text or nodes. */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(element.dataset, value);
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** A table: columns of [heading, (row) => cell content, optional class]. */
export function table(columns, rows, attrs = {}) {
  return h(
    "table",
    attrs,
    h("thead", {}, h("tr", {}, columns.map(([title, , cls]) => h("th", { class: cls }, title)))),
    h(
      "tbody",
      {},
      rows.length === 0
        ? h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, "none"))
        : rows.map((row) => h("tr", { dataset: { id: row.id ?? "" } }, columns.map(([, cell, cls]) => h("td", { class: cls }, cell(row))))),
    ),
  );
}

/** A labelled input. */
export function field(label, attrs) {
  return h("label", {}, label, h("input", attrs));
}

/** A state pill: good or bad. */
export function pill(text, good) {
  return h("span", { class: `pill ${good ? "good" : "bad"}` }, text);
}

/** Replaces the children of `node`. */
export function show(node, ...children) {
  node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined));
  return node;
}
