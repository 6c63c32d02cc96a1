// Package client is the Go client of the runstream HTTP API for workflow
// runs: read a run, page through its stored events, and follow its live
// event stream with automatic, exact resume.
//
// A Client is created once per server and is safe for concurrent use:
//
//	c, err := client.New("http://127.0.0.1:8780")
//	if err != nil { … }
//	for env, err := range c.Follow(ctx, runID, client.FollowOptions{}) {
//		if err != nil {
//			return err // final: the sequence ends after an error
//		}
//		fmt.Println(env.Seq, env.Event)
//	}
//
// Follow yields every event of the run exactly once, in seq order, across
// disconnections: it reconnects with Last-Event-ID set to the last seq it
// yielded, waiting between attempts with capped exponential backoff and full
// jitter, and ends after the run's terminal event. Events pages through the
// stored events without waiting for new ones.
//
// Errors the server answers decode into *APIError, whose Code is the
// protocol's stable error code:
//
//	var apiErr *client.APIError
//	if errors.As(err, &apiErr) && apiErr.Code == runstream.CodeWorkflowRunNotFound { … }
package client
