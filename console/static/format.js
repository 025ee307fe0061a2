// Formatting of the API's values for people: money (micro-USD), token counts, times. Pure functions.

/** Micro-USD (a number or the API's 64-bit string) as dollars: "$1.234567", "$0.25", "$12". */
export function usd(micros) {
  const value = BigInt(micros ?? 0);
  const whole = value / 1000000n;
  const frac = (value % 1000000n).toString().padStart(6, "0").replace(/0+$/, "");
  return frac ? `$${whole}.${frac}` : `$${whole}`;
}

/** Dollars as typed by people ("12.5") to micro-USD (a string, exact); null when empty. */
export function micros(dollars) {
  const text = String(dollars ?? "").trim();
  if (text === "") return null;
  const match = /^(\d+)(?:\.(\d{1,6}))?$/.exec(text);
  if (!match) throw new Error(`not an amount in USD: ${text}`);
  return (BigInt(match[1]) * 1000000n + BigInt((match[2] ?? "").padEnd(6, "0"))).toString();
}

/** A count with thousands separators. */
export function count(n) {
  return Number(n ?? 0).toLocaleString("en-US");
}

/** An RFC 3339 time as "2026-12-08 14:03" (UTC), or the fallback when absent. */
export function when(time, fallback = "never") {
  if (!time) return fallback;
  return new Date(time).toISOString().slice(0, 16).replace("T", " ");
}

/** The start of the UTC day `days` days before `now`, as RFC 3339. */
export function daysAgo(days, now = new Date()) {
  const start = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - days * 86400000;
  return new Date(start).toISOString();
}
