// `new LlmClient(target, apiKey)`: the llm.v1 API over gRPC (connect-node's gRPC transport, HTTP/2).
import { create } from "@bufbuild/protobuf";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { ApiError } from "./errors.js";
import {
  CancelGenerationRequestSchema,
  GenerateRequestSchema,
  type Generation,
  Generations,
  GetGenerationRequestSchema,
  Tier,
} from "./gen/llm/v1/generations_pb.js";
import { type ListModelsResponse, Models } from "./gen/llm/v1/models_pb.js";
import { type GetUsageResponse, Usage } from "./gen/llm/v1/usage_pb.js";
import { DEFAULT_RETRY, GenerationStream, type RetryPolicy, type StreamHost } from "./stream.js";

export const DEFAULT_MODEL = "smollm2-135m";

export interface ClientOptions {
  retry?: Partial<RetryPolicy>;
  /** "http" (default) or "https" for a TLS listener. */
  scheme?: "http" | "https";
}

export interface GenerateOptions {
  prompt?: string;
  messages?: { role: string; content: string }[];
  model?: string;
  maxOutputTokens?: number;
  /** Idempotency key; drawn once per call when absent, and reused by every retry of the call. */
  requestId?: string;
  temperature?: number;
  topP?: number;
  topK?: number;
  seed?: bigint;
  stop?: string[];
  ignoreEos?: boolean;
  batch?: boolean;
}

export class LlmClient implements StreamHost {
  readonly stub: Client<typeof Generations>;
  readonly headers: Record<string, string>;
  readonly retry: RetryPolicy;
  private readonly sessions: Http2SessionManager;
  private readonly models: Client<typeof Models>;
  private readonly usageStub: Client<typeof Usage>;

  /** `target` is host:port, as for any gRPC client. */
  constructor(target: string, apiKey: string, options: ClientOptions = {}) {
    const baseUrl = `${options.scheme ?? "http"}://${target}`;
    this.sessions = new Http2SessionManager(baseUrl);
    const transport = createGrpcTransport({ baseUrl, sessionManager: this.sessions });
    this.stub = createClient(Generations, transport);
    this.models = createClient(Models, transport);
    this.usageStub = createClient(Usage, transport);
    this.headers = { authorization: `Bearer ${apiKey}` };
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
  }

  /** Starts a generation from `prompt` text or chat `messages`; iterate the result for events. */
  generate(options: GenerateOptions): GenerationStream {
    if ((options.prompt === undefined) === (options.messages === undefined)) {
      throw new TypeError("give exactly one of prompt or messages");
    }
    const request = create(GenerateRequestSchema, {
      requestId: options.requestId ?? `req-${crypto.randomUUID().replaceAll("-", "")}`,
      model: options.model ?? DEFAULT_MODEL,
      maxOutputTokens: options.maxOutputTokens ?? 256,
      input:
        options.messages !== undefined
          ? { case: "messages", value: { messages: options.messages } }
          : { case: "prompt", value: options.prompt ?? "" },
      sampling: {
        temperature: options.temperature,
        topP: options.topP,
        topK: options.topK,
        seed: options.seed,
        stop: options.stop ?? [],
        ignoreEos: options.ignoreEos ?? false,
      },
      tier: options.batch ? Tier.BATCH : Tier.TIER_UNSPECIFIED,
    });
    return new GenerationStream(this, request);
  }

  /** A generation's recorded state, by generation id or request id. */
  get(key: { generationId: string } | { requestId: string }): Promise<Generation> {
    const request = create(GetGenerationRequestSchema, {
      key: "generationId" in key
        ? { case: "generationId", value: key.generationId }
        : { case: "requestId", value: key.requestId },
    });
    return this.call(() => this.stub.getGeneration(request, { headers: this.headers }));
  }

  cancel(generationId: string): Promise<Generation> {
    return this.cancelById(generationId);
  }

  /** The tenant's billed usage (all time). */
  usage(): Promise<GetUsageResponse> {
    return this.call(() => this.usageStub.getUsage({}, { headers: this.headers }));
  }

  listModels(): Promise<ListModelsResponse> {
    return this.call(() => this.models.listModels({}, { headers: this.headers }));
  }

  /** Closes the HTTP/2 connection. */
  close(): void {
    this.sessions.abort();
  }

  cancelById(generationId: string): Promise<Generation> {
    const request = create(CancelGenerationRequestSchema, { generationId });
    return this.call(() => this.stub.cancelGeneration(request, { headers: this.headers }));
  }

  async generationIdOf(requestId: string): Promise<string> {
    return (await this.get({ requestId })).generationId;
  }

  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw ApiError.from(e);
    }
  }
}
