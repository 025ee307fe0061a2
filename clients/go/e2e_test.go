package llmclient_test

// The Go SDK against the live platform (LLM_TARGET, LLM_API_KEY, LLM_SOLO_API_KEY; run by
// tests/e2e/test_sdk_go.py): a stream cut by a TCP proxy resumes with no gap or duplicate, a call
// broken before its first event re-attaches under its request id, the same request id gets the same
// generation, cancel, and a quota refusal's reason and retry delay.

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	llmclient "example.com/llmplatform/go"
	llmv1 "example.com/llmplatform/go/gen/llm/v1"
)

var fastRetry = llmclient.RetryPolicy{MaxAttempts: 5, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2}

func env(t *testing.T, name string) string {
	v := os.Getenv(name)
	if v == "" {
		t.Fatalf("%s is not set: these tests run against a live platform (tests/e2e/test_sdk_go.py)", name)
	}
	return v
}

func dial(t *testing.T, target, key string) *llmclient.Client {
	c, err := llmclient.Dial(target, key, llmclient.Options{Retry: &fastRetry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func long(n int32) *llmv1.GenerateRequest {
	req := llmclient.Prompt("Count:", n)
	req.Sampling = &llmv1.SamplingParams{IgnoreEos: true}
	return req
}

// collect reads a stream to its end, calling each(event) after every event.
func collect(s *llmclient.GenerationStream, each func(*llmv1.GenerationEvent)) ([]*llmv1.GenerationEvent, error) {
	var events []*llmv1.GenerationEvent
	for {
		e, err := s.Recv()
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		events = append(events, e)
		if each != nil {
			each(e)
		}
	}
}

func readAll(t *testing.T, s *llmclient.GenerationStream, each func(*llmv1.GenerationEvent)) []*llmv1.GenerationEvent {
	events, err := collect(s, each)
	if err != nil {
		t.Fatalf("after %d events: %v", len(events), err)
	}
	return events
}

func numberedFromOne(t *testing.T, events []*llmv1.GenerationEvent) {
	for i, e := range events {
		if e.GetSequence() != uint64(i+1) {
			t.Fatalf("event %d has sequence %d", i, e.GetSequence())
		}
	}
}

func TestACutStreamResumesWithNoGapOrDuplicate(t *testing.T) {
	target, key := env(t, "LLM_TARGET"), env(t, "LLM_API_KEY")
	proxy := startProxy(t, target)
	c := dial(t, proxy.addr(), key)
	proxy.cutAfterData(2) // the connection drops after the stream's second response frame
	stream := c.Generate(context.Background(), long(40))
	events := readAll(t, stream, nil)
	if stream.Reconnects() != 1 || proxy.acceptedCount() != 2 {
		t.Fatalf("reconnects %d, connections %d", stream.Reconnects(), proxy.acceptedCount())
	}
	numberedFromOne(t, events)
	if f := events[len(events)-1].GetFinished(); f == nil || f.GetUsage().GetOutputTokens() != 40 {
		t.Fatalf("last event %v", events[len(events)-1])
	}
	// the reference: the generation's whole retained stream, read directly
	direct := dial(t, target, key)
	resume := &llmv1.ResumeRequest{GenerationId: stream.GenerationID()}
	ctx := metadataCtx(key)
	ref, err := llmv1.NewGenerationsClient(direct.Conn()).Resume(ctx, resume)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		e, err := ref.Recv()
		if err == io.EOF {
			if i != len(events) {
				t.Fatalf("retained %d events, read %d", i, len(events))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i >= len(events) || !proto.Equal(e, events[i]) {
			t.Fatalf("event %d differs from the retained stream", i)
		}
	}
}

func TestACallBrokenBeforeItsFirstEventIsRetriedUnderTheSameRequestID(t *testing.T) {
	target, key := env(t, "LLM_TARGET"), env(t, "LLM_API_KEY")
	proxy := startProxy(t, target)
	c, direct := dial(t, proxy.addr(), key), dial(t, target, key)
	proxy.hold(true)
	stream := c.Generate(context.Background(), llmclient.Prompt("The capital of France is", 8))
	done := make(chan []*llmv1.GenerationEvent)
	failed := make(chan error, 1)
	go func() {
		events, err := collect(stream, nil)
		failed <- err
		done <- events
	}()
	var first *llmv1.Generation
	for deadline := time.Now().Add(time.Minute); ; {
		g, err := direct.GetByRequestID(context.Background(), stream.RequestID())
		if err == nil {
			first = g
			break
		}
		if llmclient.AsAPIError(err).Code != codes.NotFound || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // polling for a condition, not a timing assumption
	}
	proxy.hold(false)
	if proxy.cut() != 1 {
		t.Fatal("no connection to cut")
	}
	if err := <-failed; err != nil {
		t.Fatal(err)
	}
	events := <-done
	if stream.Reconnects() != 1 || events[0].GetGenerationId() != first.GetGenerationId() {
		t.Fatalf("reconnects %d, generation %s (recorded %s)", stream.Reconnects(), events[0].GetGenerationId(), first.GetGenerationId())
	}
	numberedFromOne(t, events)
	if events[len(events)-1].GetFinished().GetUsage().GetOutputTokens() != 8 {
		t.Fatalf("last event %v", events[len(events)-1])
	}
}

func TestTheSameRequestIDGetsTheSameGeneration(t *testing.T) {
	c := dial(t, env(t, "LLM_TARGET"), env(t, "LLM_API_KEY"))
	request := func(n int32) *llmv1.GenerateRequest {
		req := llmclient.Prompt("Hello", n)
		req.RequestId = "go-same-1"
		return req
	}
	first := readAll(t, c.Generate(context.Background(), request(6)), nil)
	again := readAll(t, c.Generate(context.Background(), request(6)), nil)
	if len(first) != len(again) || len(first) == 0 {
		t.Fatalf("%d events, then %d", len(first), len(again))
	}
	for i := range first {
		if !proto.Equal(first[i], again[i]) {
			t.Fatalf("event %d differs", i)
		}
	}
	_, err := c.Generate(context.Background(), request(7)).Text()
	if e := llmclient.AsAPIError(err); e == nil || e.Code != codes.AlreadyExists || e.Reason != "REQUEST_ID_CONFLICT" {
		t.Fatalf("a conflicting payload: %v", err)
	}
}

func TestCancelEndsTheStreamCanceled(t *testing.T) {
	c := dial(t, env(t, "LLM_TARGET"), env(t, "LLM_API_KEY"))
	stream := c.Generate(context.Background(), long(400))
	var canceled *llmv1.Generation
	events := readAll(t, stream, func(e *llmv1.GenerationEvent) {
		if e.GetDelta() != nil && canceled == nil {
			var err error
			if canceled, err = stream.Cancel(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	})
	f := events[len(events)-1].GetFinished()
	if canceled.GetGenerationId() != stream.GenerationID() || f.GetReason() != llmv1.Finished_CANCELED || f.GetUsage().GetOutputTokens() >= 400 {
		t.Fatalf("finished %v", f)
	}
	g, err := c.Get(context.Background(), stream.GenerationID())
	if err != nil || g.GetState() != llmv1.Generation_CANCELED {
		t.Fatalf("state %v, %v", g.GetState(), err)
	}
}

func TestAQuotaRefusalCarriesItsReasonAndRetryDelay(t *testing.T) {
	c := dial(t, env(t, "LLM_TARGET"), env(t, "LLM_SOLO_API_KEY"))
	holder := c.Generate(context.Background(), long(400))
	if e, err := holder.Recv(); err != nil || e.GetStarted() == nil { // the tenant's one slot is taken
		t.Fatalf("first event %v, %v", e, err)
	}
	_, err := c.Generate(context.Background(), llmclient.Prompt("Hello", 4)).Text()
	if _, cancelErr := holder.Cancel(context.Background()); cancelErr != nil {
		t.Fatal(cancelErr)
	}
	rest := readAll(t, holder, nil)
	e := llmclient.AsAPIError(err)
	if e == nil || e.Code != codes.ResourceExhausted || e.Reason != "QUOTA_EXCEEDED" {
		t.Fatalf("refusal: %v", err)
	}
	if !e.HasRetryDelay || e.RetryDelay <= 0 || len(e.QuotaViolations) == 0 || e.QuotaViolations[0].Subject == "" {
		t.Fatalf("details: %+v", e)
	}
	if rest[len(rest)-1].GetFinished().GetReason() != llmv1.Finished_CANCELED {
		t.Fatalf("holder ended %v", rest[len(rest)-1])
	}
}
