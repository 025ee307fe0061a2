// The console's pure modules under node's own test runner (no dependencies): money and dates,
// the usage chart's series, and the server-sent events parser of the playground's stream.
import assert from "node:assert/strict";
import { test } from "node:test";

import { parseSse } from "../../console/static/api.js";
import { series, totals } from "../../console/static/chart.js";
import { daysAgo, micros, usd, when } from "../../console/static/format.js";

test("money is exact micro-USD both ways", () => {
  assert.equal(usd("1234567"), "$1.234567");
  assert.equal(usd(250000), "$0.25");
  assert.equal(usd("12000000"), "$12");
  assert.equal(usd(undefined), "$0");
  assert.equal(usd("9007199254740993"), "$9007199254.740993"); // beyond a double's integers
  assert.equal(micros("12.5"), "12500000");
  assert.equal(micros("0.000001"), "1");
  assert.equal(micros(" "), null);
  assert.throws(() => micros("1.0000001"));
  assert.throws(() => micros("-3"));
});

test("times are UTC minutes, and days start at midnight UTC", () => {
  assert.equal(when("2026-12-08T14:03:59Z"), "2026-12-08 14:03");
  assert.equal(when(undefined), "never");
  assert.equal(daysAgo(2, new Date("2026-12-08T14:03:00Z")), "2026-12-06T00:00:00.000Z");
});

test("export rows become one period each, summed over keys and versions", () => {
  const start = new Date("2026-12-01T00:00:00Z");
  const rows = [
    { period_start: "2026-12-01T00:00:00Z", input_tokens: 10, cached_input_tokens: 4, output_tokens: 5, spend_micros: 7, requests: 1 },
    { period_start: "2026-12-01T00:00:00Z", input_tokens: 2, cached_input_tokens: 0, output_tokens: 1, spend_micros: 1, requests: 1 },
    { period_start: "2026-12-03T00:00:00Z", input_tokens: 3, cached_input_tokens: 3, output_tokens: 0, spend_micros: 2, requests: 1 },
    { period_start: "2026-11-30T00:00:00Z", input_tokens: 99, cached_input_tokens: 0, output_tokens: 99, spend_micros: 99, requests: 9 },
  ];
  const periods = series(rows, start, 86400000, 3);
  assert.deepEqual(
    periods.map((p) => [p.start.toISOString().slice(0, 10), p.input, p.cached, p.output, p.spend, p.requests]),
    [
      ["2026-12-01", 8, 4, 6, 8, 2],
      ["2026-12-02", 0, 0, 0, 0, 0],
      ["2026-12-03", 0, 3, 0, 2, 1],
    ],
  );
  assert.deepEqual(totals(periods), { tokens: 21, spend: 10, requests: 3 });
});

test("server-sent events are split on blank lines, partial ones kept for later", () => {
  const { events, rest } = parseSse('data: {"a":1}\n\ndata: [DONE]\r\n\r\ndata: {"b"');
  assert.deepEqual(events, ['{"a":1}', "[DONE]"]);
  assert.equal(rest, 'data: {"b"');
  assert.deepEqual(parseSse(": keep-alive\n\n").events, []);
});
