// The HTTP API as the console calls it: the same endpoints, keys and error bodies as any client.

/** An API refusal: the HTTP status and the gRPC ErrorInfo reason of the error table. */
export class ApiError extends Error {
  constructor(status, reason, message) {
    super(message);
    this.status = status;
    this.reason = reason;
  }

  toString() {
    return `${this.status} ${this.reason}: ${this.message}`;
  }
}

async function refusal(response) {
  let body = {};
  try {
    body = await response.json();
  } catch {
    // not JSON: the status says enough
  }
  const error = body.error ?? {};
  const reason = error.reason ?? (typeof error.code === "string" ? error.code : "HTTP_ERROR");
  return new ApiError(response.status, reason, error.message ?? response.statusText);
}

/** Splits server-sent events off the front of `buffer`: their `data:` payloads, and what is left. */
export function parseSse(buffer) {
  const events = [];
  let rest = buffer.replace(/\r\n/g, "\n");
  let end;
  while ((end = rest.indexOf("\n\n")) >= 0) {
    const block = rest.slice(0, end);
    rest = rest.slice(end + 2);
    const data = block
      .split("\n")
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(5).replace(/^ /, ""))
      .join("\n");
    if (data) events.push(data);
  }
  return { events, rest };
}

export class Api {
  /** key: the signed-in API key; sent as a Bearer credential, never shown. */
  constructor(key) {
    this.key = key;
  }

  headers(extra = {}) {
    return { authorization: `Bearer ${this.key}`, ...extra };
  }

  async call(method, path, body) {
    const init = { method, headers: this.headers(body ? { "content-type": "application/json" } : {}) };
    if (body) init.body = JSON.stringify(body);
    const response = await fetch(path, init);
    if (!response.ok) throw await refusal(response);
    return response.status === 204 ? null : response.json();
  }

  get(path) {
    return this.call("GET", path);
  }

  post(path, body) {
    return this.call("POST", path, body ?? {});
  }

  /** An Admin rpc by name (admin key only). */
  admin(method, request) {
    return this.post(`/v1/admin/${method}`, request ?? {});
  }

  /** The text of a streamed export (CSV or JSON lines). */
  async text(path) {
    const response = await fetch(path, { headers: this.headers() });
    if (!response.ok) throw await refusal(response);
    return response.text();
  }

  /** Streams an OpenAI chat completion: yields each chunk (its delta text and, last, its usage). */
  async *chat(request, signal) {
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: this.headers({ "content-type": "application/json" }),
      body: JSON.stringify({ ...request, stream: true, stream_options: { include_usage: true } }),
      signal,
    });
    if (!response.ok) throw await refusal(response);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      const parsed = parseSse(buffer + value);
      buffer = parsed.rest;
      for (const data of parsed.events) {
        if (data === "[DONE]") return;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new ApiError(500, chunk.error.code ?? "STREAM_ERROR", chunk.error.message);
        yield chunk;
      }
    }
  }
}
