// Package llmclient is the Go client of the llm.v1 gRPC API: streaming generations resumed after a
// broken connection with no gap or duplicate, one request id per logical call so retries are
// idempotent, cancellation, and errors carrying the ErrorInfo reason and RetryInfo delay. The
// generated messages and stubs are in example.com/llmplatform/go/gen/llm/v1.
package llmclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	llmv1 "example.com/llmplatform/go/gen/llm/v1"
)

// DefaultModel is the platform's default model alias.
const DefaultModel = "smollm2-135m"

var errEOF = io.EOF

// Options configure a Client; the zero value is a plaintext connection with DefaultRetry.
type Options struct {
	Credentials credentials.TransportCredentials // TLS; nil is plaintext
	Retry       *RetryPolicy
}

// Client talks to one platform endpoint as one tenant. Safe for concurrent use.
type Client struct {
	conn        *grpc.ClientConn
	apiKey      string
	retry       RetryPolicy
	generations llmv1.GenerationsClient
	usage       llmv1.UsageClient
	models      llmv1.ModelsClient
}

// Dial connects lazily to target (host:port) with a tenant API key.
func Dial(target, apiKey string, opts Options) (*Client, error) {
	transport := grpc.WithInsecure()
	if opts.Credentials != nil {
		transport = grpc.WithTransportCredentials(opts.Credentials)
	}
	// reconnect promptly after a broken connection (gRPC's default first backoff is 1 s)
	params := grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: 20 * time.Second}
	params.Backoff.BaseDelay = 100 * time.Millisecond
	conn, err := grpc.Dial(target, transport, grpc.WithConnectParams(params))
	if err != nil {
		return nil, err
	}
	retry := DefaultRetry
	if opts.Retry != nil {
		retry = *opts.Retry
	}
	return &Client{
		conn: conn, apiKey: apiKey, retry: retry,
		generations: llmv1.NewGenerationsClient(conn),
		usage:       llmv1.NewUsageClient(conn),
		models:      llmv1.NewModelsClient(conn),
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Conn is the underlying connection, for the generated stubs of other services (Admin, ...).
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// withKey returns ctx carrying the client's credential.
func (c *Client) withKey(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.apiKey)
}

// NewRequestID draws an idempotency key.
func NewRequestID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "req-" + hex.EncodeToString(b)
}

// Prompt builds a request from raw prompt text with the default model.
func Prompt(text string, maxOutputTokens int32) *llmv1.GenerateRequest {
	return &llmv1.GenerateRequest{
		Model:           DefaultModel,
		Input:           &llmv1.GenerateRequest_Prompt{Prompt: text},
		MaxOutputTokens: maxOutputTokens,
	}
}

// Generate starts a generation. An empty RequestId is filled here, once, and reused by every retry
// of this call. The stream lives as long as ctx.
func (c *Client) Generate(ctx context.Context, req *llmv1.GenerateRequest) *GenerationStream {
	if req.GetRequestId() == "" {
		req.RequestId = NewRequestID()
	}
	return &GenerationStream{client: c, ctx: ctx, request: req}
}

// Get returns a generation's recorded state.
func (c *Client) Get(ctx context.Context, generationID string) (*llmv1.Generation, error) {
	key := &llmv1.GetGenerationRequest_GenerationId{GenerationId: generationID}
	g, err := c.generations.GetGeneration(c.withKey(ctx), &llmv1.GetGenerationRequest{Key: key})
	return g, asError(err)
}

// GetByRequestID returns the generation recorded under a request id.
func (c *Client) GetByRequestID(ctx context.Context, requestID string) (*llmv1.Generation, error) {
	key := &llmv1.GetGenerationRequest_RequestId{RequestId: requestID}
	g, err := c.generations.GetGeneration(c.withKey(ctx), &llmv1.GetGenerationRequest{Key: key})
	return g, asError(err)
}

// Cancel persists cancel intent; the generation's stream ends with `finished` CANCELED.
func (c *Client) Cancel(ctx context.Context, generationID string) (*llmv1.Generation, error) {
	req := &llmv1.CancelGenerationRequest{GenerationId: generationID}
	g, err := c.generations.CancelGeneration(c.withKey(ctx), req)
	return g, asError(err)
}

// Usage returns the tenant's billed usage (all time).
func (c *Client) Usage(ctx context.Context) (*llmv1.GetUsageResponse, error) {
	u, err := c.usage.GetUsage(c.withKey(ctx), &llmv1.GetUsageRequest{})
	return u, asError(err)
}

// Models lists model versions and aliases.
func (c *Client) Models(ctx context.Context) (*llmv1.ListModelsResponse, error) {
	m, err := c.models.ListModels(c.withKey(ctx), &llmv1.ListModelsRequest{})
	return m, asError(err)
}

// asError keeps a nil error nil (a nil *APIError in an error interface is not nil).
func asError(err error) error {
	if err == nil {
		return nil
	}
	return AsAPIError(err)
}
