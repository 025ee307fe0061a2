package llmclient

import (
	"fmt"
	"time"

	"github.com/golang/protobuf/ptypes"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// QuotaViolation is one violation of a google.rpc.QuotaFailure.
type QuotaViolation struct {
	Subject     string
	Description string
}

// APIError is every error a call returns: the gRPC code and the server's google.rpc details.
type APIError struct {
	Code    codes.Code
	Message string
	// Reason is the ErrorInfo reason (QUOTA_EXCEEDED, REQUEST_ID_CONFLICT, ...); "" when none.
	Reason   string
	Domain   string
	Metadata map[string]string
	// RetryDelay is the server's RetryInfo; HasRetryDelay is false when it gave none.
	RetryDelay      time.Duration
	HasRetryDelay   bool
	QuotaViolations []QuotaViolation
}

func (e *APIError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%s %s: %s", e.Code, e.Reason, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// IsTransportFailure is true for Unavailable with no ErrorInfo: the connection broke and the server
// decided nothing.
func (e *APIError) IsTransportFailure() bool {
	return e.Code == codes.Unavailable && e.Reason == ""
}

// AsAPIError converts an error returned by a gRPC call (nil stays nil).
func AsAPIError(err error) *APIError {
	if err == nil {
		return nil
	}
	if e, ok := err.(*APIError); ok {
		return e
	}
	st := status.Convert(err)
	e := &APIError{Code: st.Code(), Message: st.Message(), Metadata: map[string]string{}}
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			e.Reason, e.Domain = d.GetReason(), d.GetDomain()
			for k, v := range d.GetMetadata() {
				e.Metadata[k] = v
			}
		case *errdetails.RetryInfo:
			if delay, err := ptypes.Duration(d.GetRetryDelay()); err == nil {
				e.RetryDelay, e.HasRetryDelay = delay, true
			}
		case *errdetails.QuotaFailure:
			for _, v := range d.GetViolations() {
				e.QuotaViolations = append(e.QuotaViolations, QuotaViolation{v.GetSubject(), v.GetDescription()})
			}
		}
	}
	return e
}
