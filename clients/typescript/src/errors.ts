// Typed errors: every failed call rejects with an ApiError carrying the gRPC code and the server's
// google.rpc details (ErrorInfo reason, RetryInfo delay, QuotaFailure violations).
import { Code, ConnectError } from "@connectrpc/connect";
import {
  ErrorInfoSchema,
  QuotaFailureSchema,
  RetryInfoSchema,
} from "./gen/google/rpc/error_details_pb.js";

export { Code };

export interface QuotaViolation {
  subject: string;
  description: string;
}

export class ApiError extends Error {
  /** gRPC status code (Code.ResourceExhausted, Code.Unavailable, ...). */
  readonly code: Code;
  /** ErrorInfo reason (QUOTA_EXCEEDED, REQUEST_ID_CONFLICT, ...); "" when the status had none. */
  readonly reason: string;
  readonly domain: string;
  readonly metadata: Record<string, string>;
  /** RetryInfo delay in milliseconds; undefined when the server gave none. */
  readonly retryDelayMs: number | undefined;
  readonly quotaViolations: QuotaViolation[];

  constructor(error: ConnectError) {
    super(`${Code[error.code]}: ${error.rawMessage}`);
    this.name = "ApiError";
    this.code = error.code;
    const info = error.findDetails(ErrorInfoSchema)[0];
    this.reason = info?.reason ?? "";
    this.domain = info?.domain ?? "";
    this.metadata = { ...(info?.metadata ?? {}) };
    const retry = error.findDetails(RetryInfoSchema)[0]?.retryDelay;
    this.retryDelayMs =
      retry === undefined ? undefined : Number(retry.seconds) * 1000 + retry.nanos / 1e6;
    this.quotaViolations = error
      .findDetails(QuotaFailureSchema)
      .flatMap((q) => q.violations.map((v) => ({ subject: v.subject, description: v.description })));
  }

  /**
   * The connection broke; the server decided nothing (every refusal of the API carries an
   * ErrorInfo). connect-node reports a dropped connection as Unavailable (refused), Canceled (the
   * session's streams closed with RST_STREAM CANCEL) or Aborted (ECONNRESET, a destroyed stream),
   * depending on when the socket went. A stream the caller aborts itself never gets here.
   */
  get isTransportFailure(): boolean {
    const dropped = [Code.Unavailable, Code.Canceled, Code.Aborted].includes(this.code);
    return dropped && this.reason === "";
  }

  static from(error: unknown): ApiError {
    return error instanceof ApiError ? error : new ApiError(ConnectError.from(error));
  }
}
