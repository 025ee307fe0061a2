// The TypeScript SDK against the live platform (LLM_TARGET; run by tests/e2e/test_sdk_typescript.py):
// a stream cut by a TCP proxy resumes with no gap or duplicate, a call broken before its first event
// re-attaches under its request id, the same request id gets the same generation, cancel, and a quota
// refusal's reason and retry delay.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError, Code, LlmClient } from "../dist/index.js";
import { startProxy } from "./proxy.mjs";

const target = process.env.LLM_TARGET;
const key = process.env.LLM_API_KEY;
const soloKey = process.env.LLM_SOLO_API_KEY;
const port = Number(target.split(":").pop());
const fastRetry = { maxAttempts: 5, initialBackoffMs: 50 };

function assertNumberedFromOne(events) {
  assert.deepEqual(
    events.map((e) => Number(e.sequence)),
    events.map((_, i) => i + 1),
  );
}

async function collect(stream, onEvent = () => {}) {
  const events = [];
  for await (const e of stream) {
    events.push(e);
    await onEvent(e);
  }
  return events;
}

async function retained(generationId) {
  const direct = new LlmClient(target, key);
  try {
    const resume = direct.stub.resume({ generationId, afterSequence: 0n }, { headers: direct.headers });
    return await collect(resume);
  } finally {
    direct.close();
  }
}

test("a cut stream resumes with no gap or duplicate", async () => {
  const proxy = await startProxy(port);
  const client = new LlmClient(`127.0.0.1:${proxy.port}`, key, { retry: fastRetry });
  try {
    proxy.cutAfterData(2); // the connection drops after the stream's second response frame
    const stream = client.generate({ prompt: "Count:", maxOutputTokens: 40, ignoreEos: true });
    const events = await collect(stream);
    assert.equal(stream.reconnects, 1);
    assert.equal(proxy.accepted, 2);
    assertNumberedFromOne(events);
    const last = events.at(-1).event;
    assert.equal(last.case, "finished");
    assert.equal(last.value.usage.outputTokens, 40n);
    const reference = await retained(stream.generationId);
    assert.deepEqual(events, reference);
  } finally {
    client.close();
    await proxy.close();
  }
});

test("a call broken before its first event is retried under the same request id", async () => {
  const proxy = await startProxy(port);
  const client = new LlmClient(`127.0.0.1:${proxy.port}`, key, { retry: fastRetry });
  const direct = new LlmClient(target, key);
  try {
    proxy.hold();
    const stream = client.generate({ prompt: "The capital of France is", maxOutputTokens: 8 });
    const reading = collect(stream);
    let first;
    for (;;) {
      try {
        first = await direct.get({ requestId: stream.requestId });
        break;
      } catch (e) {
        assert.ok(e instanceof ApiError && e.code === Code.NotFound, String(e));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    proxy.hold(false);
    assert.equal(proxy.cut(), 1);
    const events = await reading;
    assert.equal(stream.reconnects, 1);
    assert.equal(events[0].generationId, first.generationId);
    assertNumberedFromOne(events);
    assert.equal(events.at(-1).event.value.usage.outputTokens, 8n);
  } finally {
    client.close();
    direct.close();
    await proxy.close();
  }
});

test("the same request id gets the same generation; another payload is a conflict", async () => {
  const client = new LlmClient(target, key);
  try {
    const first = await collect(client.generate({ prompt: "Hello", maxOutputTokens: 6, requestId: "ts-same-1" }));
    const again = await collect(client.generate({ prompt: "Hello", maxOutputTokens: 6, requestId: "ts-same-1" }));
    assert.deepEqual(again, first);
    assert.equal((await client.get({ requestId: "ts-same-1" })).generationId, first[0].generationId);
    await assert.rejects(
      client.generate({ prompt: "Hello", maxOutputTokens: 7, requestId: "ts-same-1" }).text(),
      (e) => e instanceof ApiError && e.code === Code.AlreadyExists && e.reason === "REQUEST_ID_CONFLICT",
    );
  } finally {
    client.close();
  }
});

test("cancel ends the stream CANCELED", async () => {
  const client = new LlmClient(target, key);
  try {
    const stream = client.generate({ prompt: "Count:", maxOutputTokens: 400, ignoreEos: true });
    let canceled;
    const events = await collect(stream, async (e) => {
      if (e.event.case === "delta" && canceled === undefined) canceled = await stream.cancel();
    });
    assert.equal(canceled.generationId, stream.generationId);
    const last = events.at(-1).event;
    assert.equal(last.case, "finished");
    assert.equal(last.value.reason, 4); // Finished.Reason.CANCELED
    assert.ok(last.value.usage.outputTokens < 400n);
    assert.equal((await client.get({ generationId: stream.generationId })).state, 4); // State.CANCELED
  } finally {
    client.close();
  }
});

test("a quota refusal carries its reason and retry delay", async () => {
  const client = new LlmClient(target, soloKey);
  try {
    const holder = client.generate({ prompt: "Count:", maxOutputTokens: 400, ignoreEos: true });
    const it = holder[Symbol.asyncIterator]();
    assert.equal((await it.next()).value.event.case, "started"); // the tenant's one slot is taken
    let refused;
    try {
      await client.generate({ prompt: "Hello", maxOutputTokens: 4 }).text();
    } catch (e) {
      refused = e;
    }
    await holder.cancel();
    let last;
    for (let r = await it.next(); !r.done; r = await it.next()) last = r.value;
    assert.ok(refused instanceof ApiError, String(refused));
    assert.equal(refused.code, Code.ResourceExhausted);
    assert.equal(refused.reason, "QUOTA_EXCEEDED");
    assert.ok(refused.retryDelayMs > 0);
    assert.ok(refused.quotaViolations.length > 0 && refused.quotaViolations[0].subject);
    assert.equal(last.event.value.reason, 4); // CANCELED
  } finally {
    client.close();
  }
});
