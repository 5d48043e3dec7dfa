package main

import (
	"context"
	"sync/atomic"

	"github.com/aws/smithy-go/middleware"
)

// A create call the SDK sent more than once: moto (like any endpoint) may complete a request whose
// answer never arrives (a connection reset under load), and the SDK's retry then meets the
// resource its own first attempt created ("EntityAlreadyExists"). The count lets a create tell its
// own earlier attempt from a name someone else holds.

type attemptsKey struct{}

// withAttempts returns a context whose calls count their attempts into the returned counter.
func withAttempts(ctx context.Context) (context.Context, *atomic.Int32) {
	n := new(atomic.Int32)
	return context.WithValue(ctx, attemptsKey{}, n), n
}

// countAttempts runs once per attempt: after the retry middleware in the finalize step.
var countAttempts = middleware.FinalizeMiddlewareFunc("KumossCountAttempts",
	func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
		if n, ok := ctx.Value(attemptsKey{}).(*atomic.Int32); ok {
			n.Add(1)
		}
		return next.HandleFinalize(ctx, in)
	})

func addAttemptCounter(stack *middleware.Stack) error {
	return stack.Finalize.Insert(countAttempts, "Retry", middleware.After)
}
