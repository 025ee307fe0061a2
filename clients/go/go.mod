// The Go SDK. Here it is built in GOPATH mode against Debian's packages (see README.md); this file
// records the versions it is built and tested with, for module-mode users elsewhere.
module example.com/llmplatform/go

go 1.19

require (
	google.golang.org/genproto v0.0.0-20200413115906-b5235f65be36
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
