package llmclient

import (
	"context"
	"math/rand"
	"time"

	llmv1 "example.com/llmplatform/go/gen/llm/v1"
)

// RetryPolicy bounds the reconnects of one logical Generate call.
type RetryPolicy struct {
	MaxAttempts    int // consecutive reconnects without a new event before giving up
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	Multiplier     float64
}

// DefaultRetry is the policy of a Client built without one.
var DefaultRetry = RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second, Multiplier: 2}

func (p RetryPolicy) backoff(attempt int) time.Duration {
	base := float64(p.InitialBackoff)
	for i := 1; i < attempt; i++ {
		base *= p.Multiplier
	}
	if base > float64(p.MaxBackoff) {
		base = float64(p.MaxBackoff)
	}
	return time.Duration(base * (0.5 + 0.5*rand.Float64())) // jittered to [50%, 100%]
}

// GenerationStream is one logical generation call. Recv returns its events in order; a broken
// connection (Unavailable, no ErrorInfo) is re-established a bounded number of times, by Resume from
// the last event returned once the generation is known, otherwise by Generate again under the same
// request id (the server re-attaches to what it recorded): no gap, no duplicate, one generation.
type GenerationStream struct {
	client       *Client
	ctx          context.Context
	request      *llmv1.GenerateRequest
	call         llmv1.Generations_GenerateClient // Generate and Resume streams share this shape
	generationID string
	lastSequence uint64
	failures     int
	reconnects   int
	finished     bool
}

// RequestID is the idempotency key every attempt of this call carries.
func (s *GenerationStream) RequestID() string { return s.request.GetRequestId() }

// GenerationID is known once the first event arrived.
func (s *GenerationStream) GenerationID() string { return s.generationID }

// Reconnects counts how often the stream was re-established after a break.
func (s *GenerationStream) Reconnects() int { return s.reconnects }

// Recv returns the next event; io.EOF after the `finished` event.
func (s *GenerationStream) Recv() (*llmv1.GenerationEvent, error) {
	for {
		if s.finished {
			return nil, errEOF
		}
		if s.call == nil {
			if err := s.open(); err != nil {
				if retryErr := s.pause(err); retryErr != nil {
					return nil, retryErr
				}
				continue
			}
		}
		event, err := s.call.Recv()
		if err == errEOF {
			s.finished = true // the server ended the stream
			return nil, errEOF
		}
		if err != nil {
			s.call = nil
			if retryErr := s.pause(err); retryErr != nil {
				return nil, retryErr
			}
			continue
		}
		if event.GetSequence() <= s.lastSequence {
			continue // a replay of an event already returned
		}
		s.generationID, s.lastSequence, s.failures = event.GetGenerationId(), event.GetSequence(), 0
		s.finished = event.GetFinished() != nil
		return event, nil
	}
}

// Text reads the stream to its end and returns the generated text.
func (s *GenerationStream) Text() (string, error) {
	text := ""
	for {
		event, err := s.Recv()
		if err == errEOF {
			return text, nil
		}
		if err != nil {
			return text, err
		}
		text += event.GetDelta().GetText()
	}
}

// Cancel cancels the generation on the server; its stream then ends with `finished` CANCELED.
func (s *GenerationStream) Cancel(ctx context.Context) (*llmv1.Generation, error) {
	id := s.generationID
	if id == "" {
		g, err := s.client.GetByRequestID(ctx, s.RequestID())
		if err != nil {
			return nil, err
		}
		id = g.GetGenerationId()
	}
	return s.client.Cancel(ctx, id)
}

func (s *GenerationStream) open() error {
	var err error
	ctx := s.client.withKey(s.ctx)
	if s.generationID == "" {
		s.call, err = s.client.generations.Generate(ctx, s.request)
	} else {
		resume := &llmv1.ResumeRequest{GenerationId: s.generationID, AfterSequence: s.lastSequence}
		s.call, err = s.client.generations.Resume(ctx, resume)
	}
	return err
}

// pause waits before the next attempt, or returns the error that ends the call.
func (s *GenerationStream) pause(err error) error {
	apiErr := AsAPIError(err)
	if !apiErr.IsTransportFailure() || s.failures >= s.client.retry.MaxAttempts || s.ctx.Err() != nil {
		return apiErr
	}
	s.failures++
	s.reconnects++
	select {
	case <-time.After(s.client.retry.backoff(s.failures)):
		return nil
	case <-s.ctx.Done():
		return AsAPIError(s.ctx.Err())
	}
}
