// One logical generate call: the request id is drawn once, events already delivered are never
// delivered again, and a transport failure (Unavailable, no ErrorInfo) is retried a bounded number
// of times: Resume(generation_id, last sequence) once the generation is known, otherwise Generate
// again under the same request id (the server re-attaches to what it recorded).
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { ApiError } from "./errors.js";
import {
  type GenerateRequest,
  type GenerationEvent,
  type Generation,
  type Generations,
  ResumeRequestSchema,
} from "./gen/llm/v1/generations_pb.js";

export interface RetryPolicy {
  /** Consecutive reconnects without a new event before giving up. */
  maxAttempts: number;
  initialBackoffMs: number;
  maxBackoffMs: number;
  multiplier: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxAttempts: 5,
  initialBackoffMs: 100,
  maxBackoffMs: 5000,
  multiplier: 2,
};

/** Milliseconds before reconnect `attempt` (1-based): exponential, jittered to [50%, 100%]. */
export function backoffMs(policy: RetryPolicy, attempt: number): number {
  const base = Math.min(policy.maxBackoffMs, policy.initialBackoffMs * policy.multiplier ** (attempt - 1));
  return base * (0.5 + 0.5 * Math.random());
}

export interface StreamHost {
  readonly stub: Client<typeof Generations>;
  readonly headers: Record<string, string>;
  readonly retry: RetryPolicy;
  cancelById(generationId: string): Promise<Generation>;
  generationIdOf(requestId: string): Promise<string>;
}

export class GenerationStream implements AsyncIterable<GenerationEvent> {
  private lastSequence = 0n;
  private failures = 0;
  private generation = "";
  private reconnectCount = 0;
  private readonly abort = new AbortController();

  constructor(
    private readonly host: StreamHost,
    readonly request: GenerateRequest,
  ) {}

  get requestId(): string {
    return this.request.requestId;
  }

  /** Known once the first event arrived. */
  get generationId(): string {
    return this.generation;
  }

  /** How many times the stream was re-established after a break. */
  get reconnects(): number {
    return this.reconnectCount;
  }

  /** Cancels the generation on the server; its stream then ends with `finished` CANCELED. */
  async cancel(): Promise<Generation> {
    const id = this.generation || (await this.host.generationIdOf(this.requestId));
    return this.host.cancelById(id);
  }

  /** Stops reading locally (the server cancels a generation nobody follows after its grace). */
  close(): void {
    this.abort.abort();
  }

  /** Consumes the stream; the generated text. */
  async text(): Promise<string> {
    let text = "";
    for await (const e of this) if (e.event.case === "delta") text += e.event.value.text;
    return text;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<GenerationEvent> {
    const { stub, headers, retry } = this.host;
    const options = { headers, signal: this.abort.signal };
    for (;;) {
      const events = this.generation
        ? stub.resume(
            create(ResumeRequestSchema, { generationId: this.generation, afterSequence: this.lastSequence }),
            options,
          )
        : stub.generate(this.request, options);
      try {
        for await (const event of events) {
          if (event.sequence <= this.lastSequence) continue; // a replay of one delivered already
          this.generation = event.generationId;
          this.lastSequence = event.sequence;
          this.failures = 0;
          yield event;
          if (event.event.case === "finished") return;
        }
        return;
      } catch (e) {
        if (this.abort.signal.aborted) return;
        const error = ApiError.from(e);
        if (!error.isTransportFailure || this.failures >= retry.maxAttempts) throw error;
        this.failures += 1;
        this.reconnectCount += 1;
        await new Promise((resolve) => setTimeout(resolve, backoffMs(retry, this.failures)));
      }
    }
  }
}
