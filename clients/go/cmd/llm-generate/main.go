// Command llm-generate streams one generation to the terminal with the Go SDK:
//
//	llm-generate -target 127.0.0.1:50051 -api-key local-dev-key -max-output-tokens 32 "The capital of France is"
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	llmclient "example.com/llmplatform/go"
)

func main() {
	target := flag.String("target", "127.0.0.1:50051", "the platform's gRPC address")
	apiKey := flag.String("api-key", "local-dev-key", "tenant API key")
	maxTokens := flag.Int("max-output-tokens", 64, "upper bound on generated tokens")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: llm-generate [flags] PROMPT")
		os.Exit(2)
	}
	client, err := llmclient.Dial(*target, *apiKey, llmclient.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
	defer client.Close()
	stream := client.Generate(context.Background(), llmclient.Prompt(flag.Arg(0), int32(*maxTokens)))
	for {
		event, err := stream.Recv()
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "\nerror:", err)
			os.Exit(1)
		}
		if d := event.GetDelta(); d != nil {
			fmt.Print(d.GetText())
		}
		if f := event.GetFinished(); f != nil {
			fmt.Printf("\n[%s: %d in, %d out]\n", f.GetReason(), f.GetUsage().GetInputTokens(), f.GetUsage().GetOutputTokens())
		}
	}
}
