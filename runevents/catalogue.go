package runevents

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Length limits of the contract, enforced on every write.
const (
	MaxEventTypeLength     = 32
	MaxCategoryLength      = 16
	MaxMiddlewareTagLength = MaxEventTypeLength - len(MiddlewarePrefix)
)

// EventType names a run event: a catalogued name, a middleware:{tag} name or
// the legacy alias.
type EventType string

// Category is a consumer-routing bucket of run events.
type Category string

// Definition is one catalogued (event type, category) pair.
type Definition struct {
	Type     EventType
	Category Category
}

// Catalogue returns the catalogued definitions in contract order. The
// middleware:{tag} pattern and the legacy alias are not part of it.
func Catalogue() []Definition { return append([]Definition(nil), catalogue...) }

// Categories returns the contract's categories, sorted.
func Categories() []Category { return append([]Category(nil), categories...) }

// KnownMiddlewareTags returns the middleware tags the contract lists. The
// pattern is open: other tags are valid too.
func KnownMiddlewareTags() []string { return append([]string(nil), knownMiddlewareTags...) }

// NewEventType checks the contract's length limit (1 to 32 characters) and
// returns s as an EventType. It does not require s to be catalogued.
func NewEventType(s string) (EventType, error) {
	if n := utf8.RuneCountInString(s); n < 1 || n > MaxEventTypeLength {
		return "", fmt.Errorf("event type: length %d, want 1 to %d characters", n, MaxEventTypeLength)
	}
	return EventType(s), nil
}

// NewCategory checks the contract's length limit (1 to 16 characters) and
// returns s as a Category. It does not require s to be catalogued.
func NewCategory(s string) (Category, error) {
	if n := utf8.RuneCountInString(s); n < 1 || n > MaxCategoryLength {
		return "", fmt.Errorf("category: length %d, want 1 to %d characters", n, MaxCategoryLength)
	}
	return Category(s), nil
}

// MiddlewareEventType returns the event type "middleware:"+tag. The tag must
// have 1 to 21 characters so that the whole name fits in 32.
func MiddlewareEventType(tag string) (EventType, error) {
	if n := utf8.RuneCountInString(tag); n < 1 || n > MaxMiddlewareTagLength {
		return "", fmt.Errorf("middleware tag: length %d, want 1 to %d characters", n, MaxMiddlewareTagLength)
	}
	return EventType(MiddlewarePrefix + tag), nil
}

// IsMiddleware reports whether t follows the middleware:{tag} pattern.
func (t EventType) IsMiddleware() bool {
	return strings.HasPrefix(string(t), MiddlewarePrefix) && len(t) > len(MiddlewarePrefix)
}

// IsAIResponse reports whether t is llm.ai.response or its legacy alias.
func (t EventType) IsAIResponse() bool {
	return t == EventLLMAIResponse || t == EventLegacyAIMessage
}

// Lookup returns the category the contract assigns to t: the catalogued
// category, MiddlewareCategory for the middleware pattern, the canonical
// type's category (message) for the legacy alias ai_message, and ok=false
// for any unknown name.
func Lookup(t EventType) (Category, bool) {
	if t == EventLegacyAIMessage {
		t = EventLLMAIResponse
	}
	for _, d := range catalogue {
		if d.Type == t {
			return d.Category, true
		}
	}
	if t.IsMiddleware() && utf8.RuneCountInString(string(t)) <= MaxEventTypeLength {
		return MiddlewareCategory, true
	}
	return "", false
}
