package runevents

import (
	"context"
	"encoding/json"
	"time"

	"github.com/runstream/runstream"
)

// DefaultMaxTraceContent is the default byte limit of trace content.
const DefaultMaxTraceContent = 10240

// NewEvent is one event to append. The store assigns Seq.
type NewEvent struct {
	ThreadID  string
	RunID     string
	EventType EventType
	Category  Category
	// Content is any JSON value; nil stores the empty string "".
	Content json.RawMessage
	// Metadata is a JSON object; nil stores {}.
	Metadata json.RawMessage
	// CreatedAt is when the event happened; zero means "now" in UTC.
	CreatedAt time.Time
	// UserID is the owner stamped on the row; empty for internal writers.
	UserID string
}

// Owner selects whose rows a read or delete sees; see runstream.Owner.
type Owner = runstream.Owner

// OwnedBy returns the Owner that sees only rows stamped with userID.
func OwnedBy(userID string) Owner { return runstream.OwnedBy(userID) }

// AnyOwner sees every row regardless of owner: internal callers only.
var AnyOwner = runstream.AnyOwner

// ListMessagesParams selects message rows (category "message") of a thread.
type ListMessagesParams struct {
	ThreadID string
	Owner    Owner
	// Limit is the maximum number of rows; it must be positive.
	Limit int
	// BeforeSeq, when set, keeps rows with seq < *BeforeSeq.
	BeforeSeq *int64
	// AfterSeq, when set, keeps rows with seq > *AfterSeq and makes the result
	// the first Limit rows of the window instead of the last.
	AfterSeq *int64
}

// ListMessagesByRunParams selects message rows of one run.
type ListMessagesByRunParams struct {
	ThreadID  string
	RunID     string
	Owner     Owner
	Limit     int
	BeforeSeq *int64
	AfterSeq  *int64
}

// ListEventsParams selects rows of every category of one run.
type ListEventsParams struct {
	ThreadID string
	RunID    string
	Owner    Owner
	// EventTypes keeps rows whose type is in the list; empty means all.
	EventTypes []EventType
	// TaskID, when not empty or when HasTaskID is set, keeps rows whose
	// metadata.task_id is this string. It is applied before Limit.
	TaskID string
	// HasTaskID makes an empty TaskID a filter too: only rows whose
	// metadata.task_id is the empty string, or null, which reads as it
	// (Filters); a query's ?task_id= given empty matches by equality, as
	// DeerFlow's does.
	HasTaskID bool
	// AfterSeq, when set, keeps rows with seq > *AfterSeq.
	AfterSeq *int64
	// Limit is the maximum number of rows, the first ones in seq order.
	Limit int
}

// FiltersTask reports whether p keeps only the rows of one task:
// TaskID is not empty, or HasTaskID is set.
func (p ListEventsParams) FiltersTask() bool { return p.TaskID != "" || p.HasTaskID }

// LastVisibleAIParams selects runs for LastVisibleAISeqByRun.
type LastVisibleAIParams struct {
	ThreadID string
	RunIDs   []string
	Owner    Owner
}

// Seq returns a pointer to n, for the cursor fields of the params structs.
func Seq(n int64) *int64 { return &n }

// Store is the append-only store of run events. Implementations are safe
// for concurrent use. Invalid arguments yield a *runstream.Error with
// CodeInvalidArgument; nothing is written then. Reads of an unknown thread
// or run return no rows and no error.
type Store interface {
	// Put appends one event and returns the stored record, with its seq.
	Put(ctx context.Context, e NewEvent) (Record, error)

	// PutBatch appends events of one thread atomically, in input order, with
	// consecutive seqs. Either every event is stored or none. An empty batch
	// stores nothing and returns no records.
	PutBatch(ctx context.Context, events []NewEvent) ([]Record, error)

	// PutIfAbsent appends e unless a row of (e.ThreadID, e.RunID,
	// e.EventType) exists; then it returns the earliest such row and
	// created=false without writing. Check and append are atomic with
	// respect to every other writer of the thread.
	PutIfAbsent(ctx context.Context, e NewEvent) (rec Record, created bool, err error)

	// ListMessages returns message rows of the thread, ascending by seq, as
	// the package doc's cursor rules describe.
	ListMessages(ctx context.Context, p ListMessagesParams) ([]Record, error)

	// ListEvents returns rows of every category of one run, ascending.
	ListEvents(ctx context.Context, p ListEventsParams) ([]Record, error)

	// ListMessagesByRun returns message rows of one run, ascending, with the
	// same cursor rules as ListMessages.
	ListMessagesByRun(ctx context.Context, p ListMessagesByRunParams) ([]Record, error)

	// LastVisibleAISeqByRun returns, for each requested run that has one, the
	// highest seq of a message row of type llm.ai.response or ai_message whose
	// metadata.caller does not start with "middleware:".
	LastVisibleAISeqByRun(ctx context.Context, p LastVisibleAIParams) (map[string]int64, error)

	// CountMessages returns the number of message rows of the thread.
	CountMessages(ctx context.Context, threadID string, owner Owner) (int, error)

	// DeleteByThread deletes the thread's rows visible to owner and returns
	// how many. Seqs are not reused afterwards.
	DeleteByThread(ctx context.Context, threadID string, owner Owner) (int, error)

	// DeleteByRun deletes the run's rows visible to owner and returns how
	// many. Seqs are not reused afterwards.
	DeleteByRun(ctx context.Context, threadID, runID string, owner Owner) (int, error)

	// Close releases the store's resources. The store is unusable after.
	Close() error
}

// Durability describes how a backend makes acknowledged writes durable,
// for start-up logs and /readyz.
type Durability interface {
	Durability() string
}
