// TypeScript/Node client of the llm.v1 gRPC API.
export { LlmClient, DEFAULT_MODEL, type ClientOptions, type GenerateOptions } from "./client.js";
export { GenerationStream, DEFAULT_RETRY, type RetryPolicy } from "./stream.js";
export { ApiError, Code, type QuotaViolation } from "./errors.js";
export * from "./gen/llm/v1/generations_pb.js";
export * from "./gen/llm/v1/models_pb.js";
export * from "./gen/llm/v1/usage_pb.js";
