package runevents_test

import (
	"encoding/json"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/runevents"
)

// catalogueContract is the part of contracts/run_event_stream.json the
// catalogue must mirror, read from the file, not from generated code.
type catalogueContract struct {
	Limits struct {
		EventTypeMax int `json:"event_type_max_length"`
		CategoryMax  int `json:"category_max_length"`
		TagMin       int `json:"middleware_tag_min_length"`
		TagMax       int `json:"middleware_tag_max_length"`
	} `json:"limits"`
	Categories map[string]string `json:"categories"`
	Events     []struct {
		EventType string `json:"event_type"`
		Category  string `json:"category"`
	} `json:"events"`
	Aliases []struct {
		EventType string `json:"event_type"`
		Canonical string `json:"canonical_event_type"`
	} `json:"legacy_event_aliases"`
	Patterns []struct {
		Pattern   string   `json:"pattern"`
		Category  string   `json:"category"`
		KnownTags []string `json:"known_tags"`
	} `json:"dynamic_event_patterns"`
}

func loadCatalogueContract(t *testing.T) catalogueContract {
	t.Helper()
	raw, err := fs.ReadFile(contracts.FS(), contracts.RunEventStreamFile)
	if err != nil {
		t.Fatal(err)
	}
	var c catalogueContract
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Events) == 0 || len(c.Aliases) != 1 || len(c.Patterns) != 1 {
		t.Fatalf("contract has %d events, %d aliases, %d patterns", len(c.Events), len(c.Aliases), len(c.Patterns))
	}
	return c
}

func TestCatalogueMatchesContract(t *testing.T) {
	t.Parallel()
	c := loadCatalogueContract(t)
	want := map[runevents.Definition]bool{}
	for _, e := range c.Events {
		want[runevents.Definition{Type: runevents.EventType(e.EventType), Category: runevents.Category(e.Category)}] = true
	}
	got := map[runevents.Definition]bool{}
	for _, d := range runevents.Catalogue() {
		if got[d] {
			t.Errorf("duplicate %v", d)
		}
		got[d] = true
		if !want[d] {
			t.Errorf("extra %v: not in the contract", d)
		}
	}
	for d := range want {
		if !got[d] {
			t.Errorf("missing %v", d)
		}
	}
	types := map[runevents.EventType]int{}
	for _, d := range runevents.Catalogue() {
		types[d.Type]++
		if types[d.Type] > 1 {
			t.Errorf("event type %s catalogued twice", d.Type)
		}
	}
}

func TestCategoriesMatchContract(t *testing.T) {
	t.Parallel()
	c := loadCatalogueContract(t)
	var want []runevents.Category
	for name := range c.Categories {
		want = append(want, runevents.Category(name))
	}
	slices.Sort(want)
	if got := runevents.Categories(); !slices.Equal(got, want) {
		t.Fatalf("Categories() = %v, want %v", got, want)
	}
	if runevents.MiddlewareCategory != runevents.Category(c.Patterns[0].Category) {
		t.Errorf("MiddlewareCategory = %q, contract says %q", runevents.MiddlewareCategory, c.Patterns[0].Category)
	}
	if prefix := strings.TrimSuffix(c.Patterns[0].Pattern, "{tag}"); runevents.MiddlewarePrefix != prefix {
		t.Errorf("MiddlewarePrefix = %q, contract says %q", runevents.MiddlewarePrefix, prefix)
	}
	if got := runevents.KnownMiddlewareTags(); !slices.Equal(got, c.Patterns[0].KnownTags) {
		t.Errorf("KnownMiddlewareTags() = %v, contract says %v", got, c.Patterns[0].KnownTags)
	}
	if runevents.EventLegacyAIMessage != runevents.EventType(c.Aliases[0].EventType) ||
		runevents.EventLLMAIResponse != runevents.EventType(c.Aliases[0].Canonical) {
		t.Errorf("legacy alias %s of %s, contract says %s of %s",
			runevents.EventLegacyAIMessage, runevents.EventLLMAIResponse, c.Aliases[0].EventType, c.Aliases[0].Canonical)
	}
}

func TestRunDeliveryIsCatalogued(t *testing.T) {
	t.Parallel()
	if !slices.Contains(runevents.Catalogue(), runevents.Definition{Type: "run.delivery", Category: "outputs"}) {
		t.Fatal("run.delivery is not catalogued in category outputs")
	}
	if cat, ok := runevents.Lookup("run.delivery"); !ok || cat != runevents.CategoryOutputs {
		t.Fatalf("Lookup(run.delivery) = %q, %t", cat, ok)
	}
}

func TestLimitsMatchContract(t *testing.T) {
	t.Parallel()
	c := loadCatalogueContract(t)
	if runevents.MaxEventTypeLength != c.Limits.EventTypeMax ||
		runevents.MaxCategoryLength != c.Limits.CategoryMax ||
		runevents.MaxMiddlewareTagLength != c.Limits.TagMax || c.Limits.TagMin != 1 {
		t.Fatalf("limits %d/%d/%d, contract says %+v",
			runevents.MaxEventTypeLength, runevents.MaxCategoryLength, runevents.MaxMiddlewareTagLength, c.Limits)
	}
	for _, d := range runevents.Catalogue() {
		if n := utf8.RuneCountInString(string(d.Type)); n < 1 || n > runevents.MaxEventTypeLength {
			t.Errorf("event type %q has %d characters", d.Type, n)
		}
		if _, err := runevents.NewEventType(string(d.Type)); err != nil {
			t.Errorf("NewEventType(%q): %v", d.Type, err)
		}
	}
	for _, cat := range runevents.Categories() {
		if _, err := runevents.NewCategory(string(cat)); err != nil {
			t.Errorf("NewCategory(%q): %v", cat, err)
		}
	}
	for _, tag := range runevents.KnownMiddlewareTags() {
		if _, err := runevents.MiddlewareEventType(tag); err != nil {
			t.Errorf("MiddlewareEventType(%q): %v", tag, err)
		}
	}
}

func TestNewEventType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		wantOK bool
	}{
		{"", false},
		{"x", true},
		{strings.Repeat("e", 32), true},
		{strings.Repeat("e", 33), false},
		{strings.Repeat("é", 32), true}, // 64 bytes, 32 characters
		{strings.Repeat("é", 33), false},
	}
	for _, tt := range tests {
		got, err := runevents.NewEventType(tt.in)
		if (err == nil) != tt.wantOK {
			t.Errorf("NewEventType(%d runes) error = %v, want ok=%t", utf8.RuneCountInString(tt.in), err, tt.wantOK)
		}
		if err == nil && got != runevents.EventType(tt.in) {
			t.Errorf("NewEventType(%q) = %q", tt.in, got)
		}
	}
}

func TestNewCategory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     string
		wantOK bool
	}{
		{"", false},
		{"c", true},
		{strings.Repeat("c", 16), true},
		{strings.Repeat("c", 17), false},
		{strings.Repeat("ü", 16), true},
		{strings.Repeat("ü", 17), false},
	}
	for _, tt := range tests {
		got, err := runevents.NewCategory(tt.in)
		if (err == nil) != tt.wantOK {
			t.Errorf("NewCategory(%d runes) error = %v, want ok=%t", utf8.RuneCountInString(tt.in), err, tt.wantOK)
		}
		if err == nil && got != runevents.Category(tt.in) {
			t.Errorf("NewCategory(%q) = %q", tt.in, got)
		}
	}
}

func TestMiddlewareEventType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tag    string
		wantOK bool
	}{
		{"", false},
		{"g", true},
		{strings.Repeat("t", 21), true},
		{strings.Repeat("t", 22), false},
		{strings.Repeat("ß", 21), true},
		{strings.Repeat("ß", 22), false},
		{"guardrail", true},
	}
	for _, tt := range tests {
		got, err := runevents.MiddlewareEventType(tt.tag)
		if (err == nil) != tt.wantOK {
			t.Errorf("MiddlewareEventType(%d runes) error = %v, want ok=%t", utf8.RuneCountInString(tt.tag), err, tt.wantOK)
			continue
		}
		if err != nil {
			continue
		}
		if got != runevents.EventType("middleware:"+tt.tag) {
			t.Errorf("MiddlewareEventType(%q) = %q", tt.tag, got)
		}
		if n := utf8.RuneCountInString(string(got)); n > runevents.MaxEventTypeLength {
			t.Errorf("MiddlewareEventType(%q) has %d characters", tt.tag, n)
		}
		if !got.IsMiddleware() {
			t.Errorf("%q.IsMiddleware() = false", got)
		}
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in     runevents.EventType
		want   runevents.Category
		wantOK bool
	}{
		{"run.start", runevents.CategoryTrace, true},
		{"llm.ai.response", runevents.CategoryMessage, true},
		{"context:memory", runevents.CategoryContext, true},
		{"workspace_changes", runevents.CategoryWorkspace, true},
		{"middleware:guardrail", runevents.CategoryMiddleware, true},
		{"middleware:" + runevents.EventType(strings.Repeat("t", 21)), runevents.CategoryMiddleware, true},
		{"middleware:" + runevents.EventType(strings.Repeat("t", 22)), "", false},
		{"middleware:" + runevents.EventType(strings.Repeat("ß", 21)), runevents.CategoryMiddleware, true},
		{"middleware:", "", false},
		{"ai_message", runevents.CategoryMessage, true}, // the legacy alias, as its canonical type
		{"run.begin", "", false},
		{"", "", false},
		{"RUN.START", "", false},
	}
	for _, tt := range tests {
		got, ok := runevents.Lookup(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Lookup(%q) = %q, %t; want %q, %t", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
	// Every catalogued definition looks up to its own category.
	for _, d := range runevents.Catalogue() {
		if got, ok := runevents.Lookup(d.Type); !ok || got != d.Category {
			t.Errorf("Lookup(%q) = %q, %t; want %q", d.Type, got, ok, d.Category)
		}
	}
	if !runevents.EventLegacyAIMessage.IsAIResponse() || !runevents.EventLLMAIResponse.IsAIResponse() || runevents.EventLLMError.IsAIResponse() {
		t.Error("IsAIResponse does not recognise exactly llm.ai.response and its alias")
	}
}
