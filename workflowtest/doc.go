// Package workflowtest is the conformance suite of workflow.Store: every
// backend calls Run from its tests, so that all behave identically.
//
//	func TestWorkflowStore(t *testing.T) {
//		workflowtest.Run(t, workflowtest.Harness{
//			Open: func(t *testing.T) workflow.Store { return memory.NewWorkflowStore() },
//		})
//	}
//
// Besides the doc comments of workflow.Store, the suite pins down these
// choices, which every backend makes the same way:
//
//   - Times a store chooses are its clock in UTC, truncated to microseconds;
//     given times are kept, truncated to microseconds. Envelope timestamps
//     also keep their UTC offset. JSON values read back byte for byte as
//     written (compact).
//   - Reads with OwnedBy(u) see only rows stamped u; another owner's
//     workflow or run fails exactly as a missing one. The zero Owner fails
//     with CodeInvalidArgument. CreateRun needs the workflow to be the
//     run owner's (else CodeWorkflowNotFound) and the version to be the
//     workflow's (else CodeWorkflowVersionNotFound).
//   - Listings are newest first: CreatedAt descending, then ID descending.
//     BeforeID continues after that row; it is looked up among every row the
//     owner sees, ignoring ListRunsParams filters (a run may have changed
//     status since the previous page), and an id the owner does not see
//     fails with CodeInvalidArgument. Limit is 1..1000.
//   - CreateRun may be given no events (LastSeq 0); Status defaults to
//     queued, then the events apply. Version numbers given to AddVersion
//     are ignored.
//   - Append checks its arguments first (CodeInvalidArgument: CheckEvents, a
//     resume token without hash or expiry, an artifact without id or twice
//     in the batch), then the run (CodeWorkflowRunNotFound), the lease and
//     terminal state (CodeConflict), and artifact ids the run already has
//     (CodeConflict). A refused call stores nothing: no event, token or
//     artifact, and no run change.
//   - ListEvents of an unknown run fails with CodeWorkflowRunNotFound, so a
//     stream notices a run that went away; afterSeq < 0 and a limit outside
//     1..MaxEventPageLimit fail with CodeInvalidArgument.
//   - Resume judges the token before the run: no token of the run with
//     that hash → CodeWorkflowResumeTokenInvalid, consumed →
//     CodeWorkflowResumeTokenUsed, Now >= ExpiresAt →
//     CodeWorkflowResumeTokenExpired, and only then a run not awaiting input
//     → CodeWorkflowRunNotAwaitingInput, or CodeWorkflowRunAlreadyTerminal
//     when the run has ended. So a second use of a token reports
//     Used, also after the run paused again with a new token. A run has at
//     most one pending token: a new one replaces (invalidates) an unconsumed
//     older one. A zero Now fails with CodeInvalidArgument.
//   - PendingResumeToken returns the unconsumed token, expired or not:
//     CodeWorkflowResumeTokenInvalid when there is none,
//     CodeWorkflowRunNotFound for an unknown run.
//   - Artifacts are keyed by (run, id); GetArtifact fails with CodeNotFound.
//   - Stores return copies: changing a returned or a passed slice changes
//     nothing stored.
package workflowtest
