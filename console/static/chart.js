// Usage over time as a stacked bar chart (uncached prompt, cached prompt and output tokens per
// period) with the period's spend as a line, drawn as SVG. `series` is pure (tested with node).

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 720;
const HEIGHT = 220;
const PAD = { left: 48, right: 48, top: 10, bottom: 24 };

/** Sums export rows (JSON lines of /v1/usage/export) into `n` periods of `bucketMs` from `start`. */
export function series(rows, start, bucketMs, n) {
  const periods = Array.from({ length: n }, (_, i) => ({
    start: new Date(start.getTime() + i * bucketMs),
    input: 0,
    cached: 0,
    output: 0,
    spend: 0,
    requests: 0,
  }));
  for (const row of rows) {
    const i = Math.floor((Date.parse(row.period_start) - start.getTime()) / bucketMs);
    if (i < 0 || i >= n) continue;
    const p = periods[i];
    p.cached += Number(row.cached_input_tokens);
    p.input += Number(row.input_tokens) - Number(row.cached_input_tokens);
    p.output += Number(row.output_tokens);
    p.spend += Number(row.spend_micros);
    p.requests += Number(row.requests);
  }
  return periods;
}

/** The totals of a series: tokens (all kinds), spend (micro-USD), requests. */
export function totals(periods) {
  return periods.reduce(
    (t, p) => ({ tokens: t.tokens + p.input + p.cached + p.output, spend: t.spend + p.spend, requests: t.requests + p.requests }),
    { tokens: 0, spend: 0, requests: 0 },
  );
}

function node(tag, attrs, text) {
  const element = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) element.setAttribute(k, String(v));
  if (text !== undefined) element.textContent = text;
  return element;
}

/** The chart of a series; `label(start)` names a period on the axis. */
export function render(periods, label) {
  const t = totals(periods);
  const svg = node("svg", { class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", "data-total-tokens": t.tokens, "data-total-spend": t.spend });
  svg.append(node("title", {}, `${t.tokens} tokens, ${t.requests} requests`));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const maxTokens = Math.max(1, ...periods.map((p) => p.input + p.cached + p.output));
  const maxSpend = Math.max(1, ...periods.map((p) => p.spend));
  const step = plotW / Math.max(1, periods.length);
  svg.append(node("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: HEIGHT - PAD.bottom, y2: HEIGHT - PAD.bottom }));
  svg.append(node("text", { x: 4, y: PAD.top + 8 }, maxTokens.toLocaleString("en-US")));
  svg.append(node("text", { x: WIDTH - PAD.right + 4, y: PAD.top + 8 }, `$${(maxSpend / 1e6).toFixed(4)}`));
  const points = [];
  periods.forEach((p, i) => {
    let y = HEIGHT - PAD.bottom;
    for (const kind of ["input", "cached", "output"]) {
      const h = (p[kind] / maxTokens) * plotH;
      y -= h;
      svg.append(node("rect", { class: kind, x: PAD.left + i * step + 1, y, width: Math.max(1, step - 2), height: h }));
    }
    points.push(`${PAD.left + i * step + step / 2},${HEIGHT - PAD.bottom - (p.spend / maxSpend) * plotH}`);
    if (periods.length <= 16 || i % Math.ceil(periods.length / 12) === 0) {
      svg.append(node("text", { x: PAD.left + i * step + 2, y: HEIGHT - 8 }, label(p.start)));
    }
  });
  svg.append(node("polyline", { class: "spend", points: points.join(" ") }));
  return svg;
}
