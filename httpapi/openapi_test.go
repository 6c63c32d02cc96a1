package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/runstream/runstream"
	"github.com/runstream/runstream/contracts"
	"github.com/runstream/runstream/eventlog"
	"github.com/runstream/runstream/langgraph"
	"github.com/runstream/runstream/live"
	"github.com/runstream/runstream/memory"
	"github.com/runstream/runstream/runevents"
	"github.com/runstream/runstream/threadsvc"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// openAPIURL is the base URL the document is compiled under; nothing is
// fetched from it.
const openAPIURL = "https://runstream.example/api/openapi.json"

// metaSchemaFile is the OpenAPI 3.1 schema (see testdata/README.md).
const metaSchemaFile = "testdata/openapi-3.1.schema.json"

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// openAPIDoc decodes the embedded document.
func openAPIDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	return doc
}

// lookup returns the value at a JSON pointer ("#/a/b~1c") of doc.
func lookup(doc any, ref string) (any, bool) {
	ptr, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	v := doc
	for tok := range strings.SplitSeq(strings.TrimPrefix(ptr, "/"), "/") {
		if ptr == "" {
			break
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// escapeToken escapes one JSON pointer token.
func escapeToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// deref follows the $ref of an object (a response, parameter or header)
// and returns the object with its JSON pointer.
func deref(doc any, ptr string) (map[string]any, string, bool) {
	v, ok := lookup(doc, ptr)
	obj, isObj := v.(map[string]any)
	if !ok || !isObj {
		return nil, "", false
	}
	if ref, ok := obj["$ref"].(string); ok {
		return deref(doc, ref)
	}
	return obj, ptr, true
}

// walk calls fn for every value of v with its JSON pointer.
func walk(v any, ptr string, fn func(ptr string, v any)) {
	fn(ptr, v)
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			walk(x[k], ptr+"/"+escapeToken(k), fn)
		}
	case []any:
		for i, e := range x {
			walk(e, ptr+"/"+strconv.Itoa(i), fn)
		}
	}
}

// operation is one documented (method, path).
type operation struct {
	method, path string
	ptr          string // JSON pointer of the operation object
	op           map[string]any
}

func operations(t *testing.T, doc map[string]any) []operation {
	t.Helper()
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		t.Fatal("the document has no paths object")
	}
	var ops []operation
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		item, ok := paths[path].(map[string]any)
		if !ok {
			t.Fatalf("paths[%q] is not an object", path)
		}
		for _, m := range httpMethods {
			if op, ok := item[m].(map[string]any); ok {
				ops = append(ops, operation{method: m, path: path, ptr: "#/paths/" + escapeToken(path) + "/" + m, op: op})
			}
		}
	}
	return ops
}

// openAPIRoute returns the OpenAPI method and path of a ServeMux pattern.
func openAPIRoute(pattern string) (string, string, error) {
	method, path, ok := strings.Cut(pattern, " ")
	path = strings.TrimSpace(path)
	if !ok || method == "" || !strings.HasPrefix(path, "/") {
		return "", "", fmt.Errorf("pattern %q must be METHOD /path (no host, no method-less pattern) to be documented", pattern)
	}
	path = strings.TrimSuffix(path, "{$}")
	path = strings.ReplaceAll(path, "...}", "}")
	return strings.ToLower(method), path, nil
}

func compileMetaSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(metaSchemaFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	meta, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", metaSchemaFile, err)
	}
	id, _ := meta.(map[string]any)["$id"].(string)
	c := jsonschema.NewCompiler()
	if err := c.AddResource(id, meta); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatalf("compile %s: %v", metaSchemaFile, err)
	}
	return sch
}

// docCompiler compiles schemas at JSON pointers of the document, as JSON
// Schema draft 2020-12 with formats asserted.
func docCompiler(t *testing.T) *jsonschema.Compiler {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPIDocument))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(openAPIURL, doc); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc := openAPIDoc(t)
	if v, _ := doc["openapi"].(string); !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(v) {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	if info, _ := doc["info"].(map[string]any); info["title"] != "runstream" || info["version"] == "" || info["version"] == nil {
		t.Errorf("info = %v, want title runstream and a version", info)
	}

	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(openAPIDocument))
	if err != nil {
		t.Fatal(err)
	}
	if err := compileMetaSchema(t).Validate(inst); err != nil {
		t.Errorf("openapi.json does not match the OpenAPI 3.1 schema: %v", err)
	}

	// Every $ref resolves inside the document; every schema compiles.
	c := docCompiler(t)
	walk(doc, "#", func(ptr string, v any) {
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		if ref, ok := obj["$ref"].(string); ok {
			if _, found := lookup(doc, ref); !found || !strings.HasPrefix(ref, "#/") {
				t.Errorf("%s: $ref %q does not resolve inside the document", ptr, ref)
			}
		}
		if strings.HasSuffix(ptr, "/schema") || strings.HasPrefix(ptr, "#/components/schemas/") && strings.Count(ptr, "/") == 3 {
			if _, err := c.Compile(openAPIURL + ptr); err != nil {
				t.Errorf("%s is not a valid JSON Schema: %v", ptr, err)
			}
		}
	})

	errorSchema := "#/components/schemas/Error"
	ids := map[string]string{}
	for _, o := range operations(t, doc) {
		name := strings.ToUpper(o.method) + " " + o.path
		id, _ := o.op["operationId"].(string)
		if id == "" {
			t.Errorf("%s has no operationId", name)
		} else if other, dup := ids[id]; dup {
			t.Errorf("%s and %s share operationId %q", other, name, id)
		}
		ids[id] = name

		// Path templates and path parameters match.
		want := map[string]bool{}
		for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(o.path, -1) {
			want[m[1]] = true
		}
		got := map[string]bool{}
		params, _ := o.op["parameters"].([]any)
		for i := range params {
			p, _, ok := deref(doc, fmt.Sprintf("%s/parameters/%d", o.ptr, i))
			if !ok {
				t.Errorf("%s: parameter %d does not resolve", name, i)
				continue
			}
			if p["in"] == "path" {
				if p["required"] != true {
					t.Errorf("%s: path parameter %v is not required", name, p["name"])
				}
				got[p["name"].(string)] = true
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: path parameters %v, template has %v", name, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}

		// Responses: one success at least; every error is the Error body.
		responses, _ := o.op["responses"].(map[string]any)
		success := false
		for status := range responses {
			success = success || strings.HasPrefix(status, "2")
			if !strings.HasPrefix(status, "4") && !strings.HasPrefix(status, "5") && status != "default" {
				continue
			}
			r, rptr, ok := deref(doc, o.ptr+"/responses/"+status)
			if !ok {
				t.Errorf("%s %s: response does not resolve", name, status)
				continue
			}
			content, _ := r["content"].(map[string]any)
			media, _ := content["application/json"].(map[string]any)
			schema, _ := media["schema"].(map[string]any)
			if len(content) != 1 || schema["$ref"] != errorSchema {
				t.Errorf("%s %s (%s): error content must be application/json with schema $ref %s", name, status, rptr, errorSchema)
			}
		}
		if !success {
			t.Errorf("%s documents no 2xx response", name)
		}
	}
}

// mountLangGraph mounts package langgraph's routes on s as serve does
// (Server.Mount: its own routes, and its handlers of the thread API's
// join, stream and cancel routes), over a chunk store in memory writing
// run rows to runs; threads, when set, answers for the runs it only
// stores.
func mountLangGraph(t *testing.T, s *Server, runs runevents.RunStore, threads *threadsvc.Service) {
	t.Helper()
	store := memory.NewChunkStore(runs)
	hub := live.New(live.Config{Poll: langgraph.Poller(store, nil)})
	go hub.Run(t.Context())
	svc := langgraph.New(store, hub, langgraph.Config{})
	t.Cleanup(svc.Shutdown)
	h := langgraph.HTTP{Mount: s.Mount, User: User, WriteError: s.WriteError, Kit: ThreadKit(), AcquireStream: s.AcquireStream}
	if threads != nil {
		h.StoreOnly = threads.StoreOnlyRun
	}
	svc.Mount(h)
}

// TestOpenAPIRouteParity fails when a route is registered but not
// documented, or documented but not served, naming it. The server has
// the routes serve mounts too (package langgraph's).
func TestOpenAPIRouteParity(t *testing.T) {
	t.Parallel()
	s := New(Config{}, nil, nil)
	mountLangGraph(t, s, memory.NewRunStore(), nil)
	doc := openAPIDoc(t)

	served := map[string]registeredRoute{}
	for _, r := range s.registered {
		method, path, err := openAPIRoute(r.pattern)
		if err != nil {
			t.Error(err)
			continue
		}
		served[strings.ToUpper(method)+" "+path] = r
	}
	if len(served) == 0 {
		t.Fatal("the server recorded no routes")
	}
	documented := map[string]operation{}
	for _, o := range operations(t, doc) {
		documented[strings.ToUpper(o.method)+" "+o.path] = o
	}
	for _, route := range slices.Sorted(maps.Keys(served)) {
		if _, ok := documented[route]; !ok {
			t.Errorf("route %q (pattern %q) is served but missing from openapi.json", route, served[route].pattern)
		}
	}
	for _, route := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := served[route]; !ok {
			t.Errorf("route %q is in openapi.json but not served", route)
		}
	}

	// Routes that act for a caller document 401; the others do not.
	for route, r := range served {
		o, ok := documented[route]
		if !ok {
			continue
		}
		_, has401 := o.op["responses"].(map[string]any)["401"]
		if has401 != r.auth {
			t.Errorf("%s: documents 401 = %t, but the route authenticates = %t", route, has401, r.auth)
		}
	}

	// Every registered pattern is one the mux really serves.
	for _, r := range s.registered {
		method, path, err := openAPIRoute(r.pattern)
		if err != nil {
			continue
		}
		target := regexp.MustCompile(`\{[^}]+\}`).ReplaceAllString(path, "x")
		_, pattern := s.mux.Handler(httptest.NewRequest(strings.ToUpper(method), target, nil))
		if pattern != r.pattern {
			t.Errorf("%s %s is served by %q, want %q", method, target, pattern, r.pattern)
		}
	}
}

// muxCallsOutsideRegister returns the positions of the calls X.mux.Handle
// and X.mux.HandleFunc in the non-test Go files of dir, outside the method
// register.
func muxCallsOutsideRegister(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	fset := token.NewFileSet()
	var found []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Name.Name == "register" && fn.Recv != nil {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
					return true
				}
				if inner, ok := sel.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "mux" {
					found = append(found, fmt.Sprintf("%s (mux.%s)", fset.Position(call.Pos()), sel.Sel.Name))
				}
				return true
			})
		}
	}
	return found, nil
}

// TestOpenAPIRoutesGoThroughRegister keeps the parity test complete: a
// route added to the mux without Server.register would not be recorded.
func TestOpenAPIRoutesGoThroughRegister(t *testing.T) {
	t.Parallel()
	bad := t.TempDir()
	src := "package x\n\nfunc (s *S) register() { s.mux.Handle(\"GET /a\", nil) }\n\nfunc (s *S) routes() { s.mux.HandleFunc(\"GET /b\", nil) }\n"
	if err := os.WriteFile(filepath.Join(bad, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir  string
		want int
	}{
		{".", 0},
		{bad, 1}, // the check itself finds a bypass
	}
	for _, tt := range tests {
		found, err := muxCallsOutsideRegister(tt.dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != tt.want {
			t.Errorf("%s: routes added to the mux outside Server.register: %v (want %d); use s.register, s.handle or s.handleAPI so they are recorded and checked against openapi.json",
				tt.dir, found, tt.want)
		}
	}
}

// TestOpenAPIMatchesContracts checks the document's copies of contract
// facts: error codes, the workflow envelope and error, the run-event
// record and the categories.
func TestOpenAPIMatchesContracts(t *testing.T) {
	t.Parallel()
	doc := openAPIDoc(t)
	readContract := func(name string) map[string]any {
		raw, err := fs.ReadFile(contracts.FS(), name)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	schema := func(name string) map[string]any {
		v, ok := lookup(doc, "#/components/schemas/"+name)
		if !ok {
			t.Fatalf("components.schemas.%s is missing", name)
		}
		return maps.Clone(v.(map[string]any))
	}
	withoutDescription := func(m map[string]any) map[string]any {
		delete(m, "description")
		return m
	}

	var codes []any
	for _, c := range runstream.ErrorCodes() {
		codes = append(codes, string(c))
	}
	if got, _ := lookup(doc, "#/components/schemas/Error/properties/code/enum"); !reflect.DeepEqual(got, codes) {
		t.Errorf("Error.code enum = %v,\nwant runstream.ErrorCodes() = %v", got, codes)
	}
	var categories []any
	for _, c := range runevents.Categories() {
		categories = append(categories, string(c))
	}
	if got, _ := lookup(doc, "#/components/schemas/Category/enum"); !reflect.DeepEqual(got, categories) {
		t.Errorf("Category enum = %v, want runevents.Categories() = %v", got, categories)
	}

	wf := readContract(contracts.WorkflowEventsFile)
	if got := withoutDescription(schema("WorkflowEnvelope")); !reflect.DeepEqual(got, wf["envelope_schema"]) {
		t.Errorf("WorkflowEnvelope differs from %s envelope_schema", contracts.WorkflowEventsFile)
	}
	if got := withoutDescription(schema("WorkflowError")); !reflect.DeepEqual(got, wf["$defs"].(map[string]any)["error"]) {
		t.Errorf("WorkflowError differs from %s $defs.error", contracts.WorkflowEventsFile)
	}
	re := readContract(contracts.RunEventStreamFile)
	if got := withoutDescription(schema("RunEventRecord")); !reflect.DeepEqual(got, re["record_schema"]) {
		t.Errorf("RunEventRecord differs from %s record_schema", contracts.RunEventStreamFile)
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	s := New(Config{}, nil, nil)
	for _, method := range []string{"GET", "HEAD"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(method, "/api/openapi.json", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("%s /api/openapi.json = %d %s", method, rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type = %q, want application/json", method, ct)
		}
		if method == "GET" && !bytes.Equal(rec.Body.Bytes(), openAPIDocument) {
			t.Errorf("GET /api/openapi.json does not return the embedded document")
		}
	}
}

// conformance sends requests to a server with every store and checks each
// answer against the schema the document gives its operation and status.
type conformance struct {
	env  *threadEnv
	doc  map[string]any
	c    *jsonschema.Compiler
	seen map[string]bool
}

// call sends a request and validates the answer; it returns the decoded
// JSON body (nil for other media types).
func (cf *conformance) call(t *testing.T, method, target, contentType, body string, wantStatus int, header ...string) map[string]any {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), method, target, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	_, pattern := cf.env.api.mux.Handler(req)
	rec := httptest.NewRecorder()
	cf.env.api.ServeHTTP(rec, req)
	name := method + " " + target
	if rec.Code != wantStatus {
		t.Fatalf("%s = %d, want %d: %s", name, rec.Code, wantStatus, rec.Body)
	}
	m, path, err := openAPIRoute(pattern)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	cf.seen[strings.ToUpper(m)+" "+path] = true
	respPtr := "#/paths/" + escapeToken(path) + "/" + m + "/responses/"
	status := strconv.Itoa(rec.Code)
	if _, ok := lookup(cf.doc, respPtr+status); !ok {
		if rec.Code < 400 {
			t.Fatalf("%s: status %s is not documented", name, status)
		}
		status = "default"
	}
	resp, ptr, ok := deref(cf.doc, respPtr+status)
	if !ok {
		t.Fatalf("%s: response %s does not resolve", name, status)
	}
	mt, _, _ := mime.ParseMediaType(rec.Header().Get("Content-Type"))
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 && rec.Body.Len() == 0 {
		return nil // an answer without a body, documented so (202, 204)
	}
	if _, ok := content[mt]; !ok {
		t.Fatalf("%s: media type %q is not documented for %s (%s)", name, mt, status, ptr)
	}
	headers, _ := resp["headers"].(map[string]any)
	for h := range headers {
		hdr, hptr, _ := deref(cf.doc, ptr+"/headers/"+escapeToken(h))
		if hdr == nil || rec.Header().Get(h) == "" && h != "Idempotency-Replayed" {
			t.Errorf("%s: documented header %s is missing", name, h)
			continue
		}
		if v := rec.Header().Get(h); v != "" {
			cf.validate(t, name+" header "+h, hptr+"/schema", v)
		}
	}
	schemaPtr := ptr + "/content/" + escapeToken(mt) + "/schema"
	switch mt {
	case "application/json":
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(rec.Body.Bytes()))
		if err != nil {
			t.Fatalf("%s: body is not JSON: %v", name, err)
		}
		cf.validate(t, name, schemaPtr, inst)
		out, _ := inst.(map[string]any)
		return out
	case "text/event-stream":
		// The frames' data: the workflow envelope, the run-event record,
		// or, where the media type has x-sse-frames, the schema it gives
		// the frame's event (a LangGraph chunk's data is any JSON).
		dataSchema := "#/components/schemas/RunEventRecord"
		if strings.HasPrefix(path, "/api/workflows/") {
			dataSchema = "#/components/schemas/WorkflowEnvelope"
		}
		byEvent, _ := lookup(cf.doc, ptr+"/content/"+escapeToken(mt)+"/x-sse-frames")
		frames, event := 0, ""
		sc := bufio.NewScanner(rec.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if e, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				event = e
			}
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(data))
				if err != nil {
					t.Fatalf("%s: frame data is not JSON: %v", name, err)
				}
				switch frameSchemas, _ := byEvent.(map[string]any); {
				case frameSchemas == nil:
					cf.validate(t, name+" frame", dataSchema, inst)
				case frameSchemas[event] != nil:
					cf.validate(t, name+" "+event+" frame", ptr+"/content/"+escapeToken(mt)+"/x-sse-frames/"+escapeToken(event), inst)
				}
				frames++
			}
		}
		if frames == 0 {
			t.Errorf("%s: no frames", name)
		}
	}
	return nil
}

func (cf *conformance) validate(t *testing.T, what, ptr string, inst any) {
	t.Helper()
	sch, err := cf.c.Compile(openAPIURL + ptr)
	if err != nil {
		t.Fatalf("%s: compile %s: %v", what, ptr, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("%s does not match %s: %v", what, ptr, err)
	}
}

// TestOpenAPIResponsesConform checks real answers of the JSON operations
// and both streams against the documented schemas.
func TestOpenAPIResponsesConform(t *testing.T) {
	t.Parallel()
	wf := memory.NewWorkflowStore()
	t.Cleanup(func() { wf.Close() })
	env := newThreadEnv(t, func(c *envConfig) {
		c.Workflows = wf
		c.Log = eventlog.NewWorkflowLog(wf, testValidator, c.Hub, nil)
		c.Contracts, c.ContractNames = contracts.FS(), contracts.Names()
		c.Store, c.Durability, c.Version = "memory", "none", "test"
		// Ends the thread stream right after its replay.
		c.Stream.MaxLifetime = time.Millisecond
	})
	mountLangGraph(t, env.api, env.runs, threadsvc.New(env.events, env.events.(runevents.ThreadReader), env.runs, env.log, env.hub, threadsvc.Config{}))
	cf := &conformance{env: env, doc: openAPIDoc(t), c: docCompiler(t), seen: map[string]bool{}}
	const js = "application/json"

	cf.call(t, "GET", "/healthz", "", "", 200)
	cf.call(t, "GET", "/readyz", "", "", 200)
	cf.call(t, "GET", "/metrics", "", "", 200)
	cf.call(t, "GET", "/api/contracts", "", "", 200)
	cf.call(t, "GET", "/api/contracts/errors.json", "", "", 200)
	cf.call(t, "GET", "/api/contracts/nope.json", "", "", 404)
	cf.call(t, "GET", "/api/openapi.json", "", "", 200)
	// This server's auth mode has no sessions; session_test.go covers them.
	cf.call(t, "POST", "/api/auth/session", "", "", 404)
	cf.call(t, "DELETE", "/api/auth/session", "", "", 404)

	def := `{"name":"double","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}},` +
		`"nodes":[{"id":"wait","type":"delay","config":{"ms":1},"retry":{"maxAttempts":2,"backoffMs":5},"timeoutMs":1000}],"output":"input.n * 2"}`
	created := cf.call(t, "POST", "/api/workflows", js, `{"description":"doubles n","definition":`+def+`}`, 201)
	workflowID := created["workflowId"].(string)
	cf.call(t, "POST", "/api/workflows", "application/yaml", "name: waiter\nnodes:\n  - id: wait\n    type: delay\n    config: {ms: 1}\n", 201)
	cf.call(t, "POST", "/api/workflows", js, `{"name":"x","nodes":[{"id":"a","type":"warp"}]}`, 422)
	cf.call(t, "POST", "/api/workflows", "text/plain", def, 415)
	cf.call(t, "POST", "/api/workflows", js, `{"name":"x","name":"y"}`, 400)
	if page := cf.call(t, "GET", "/api/workflows?limit=1", "", "", 200); page["hasMore"] != true {
		t.Errorf("two workflows, limit 1: hasMore = %v", page["hasMore"])
	}
	cf.call(t, "GET", "/api/workflows?limit=0", "", "", 400)
	cf.call(t, "GET", "/api/workflows/"+workflowID, "", "", 200)
	cf.call(t, "GET", "/api/workflows/wf_missing", "", "", 404)
	cf.call(t, "POST", "/api/workflows/"+workflowID+"/versions", js, def, 201)
	cf.call(t, "POST", "/api/workflows/"+workflowID+"/runs", js, `{"input":{"n":"two"}}`, 422)
	run := cf.call(t, "POST", "/api/workflows/"+workflowID+"/runs", js, `{"input":{"n":2}}`, 201)
	runID := run["runId"].(string)
	cf.call(t, "GET", "/api/workflows/runs?status=queued&workflowId="+workflowID, "", "", 200)
	cf.call(t, "GET", "/api/workflows/runs?status=asleep", "", "", 400)
	cf.call(t, "GET", "/api/workflows/runs/"+runID, "", "", 200)
	cf.call(t, "GET", "/api/workflows/runs/"+runID+"/events?after=0&limit=1", "", "", 200)
	cf.call(t, "GET", "/api/workflows/runs/"+runID+"/events?after=01", "", "", 400)
	cf.call(t, "POST", "/api/workflows/runs/"+runID+"/resume", js, `{"resumeToken":"wrong","action":"approve"}`, 403)
	cf.call(t, "POST", "/api/workflows/runs/"+runID+"/cancel", "", "", 202)
	cf.call(t, "POST", "/api/workflows/runs/"+runID+"/cancel", "", "", 409)
	cf.call(t, "GET", "/api/workflows/runs/"+runID+"/stream", "", "", 200, "Last-Event-ID", "1")
	cf.call(t, "GET", "/api/workflows/runs/"+runID+"/stream?after=-1", "", "", 400)
	cf.call(t, "GET", "/api/workflows/runs/"+runID+"/artifacts/art_x", "", "", 503)

	fixture := func(name string) string {
		raw, err := fs.ReadFile(contracts.FS(), "fixtures/run_events/"+name+".json")
		if err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		ev, err := json.Marshal(map[string]any{"event_type": rec["event_type"], "content": rec["content"], "metadata": rec["metadata"]})
		if err != nil {
			t.Fatal(err)
		}
		return string(ev)
	}
	events := "/api/threads/t1/runs/r1/events"
	cf.call(t, "POST", events, js, `{"events":[`+fixture("llm.human.input")+`,`+fixture("llm.ai.response")+`,`+fixture("workspace_changes")+`]}`, 201)
	cf.call(t, "POST", events+"?if_absent=true", js, `{"events":[`+fixture("run.start")+`]}`, 201, IdempotencyKeyHeader, "k1")
	cf.call(t, "POST", events+"?if_absent=true", js, `{"events":[`+fixture("run.start")+`]}`, 201, IdempotencyKeyHeader, "k1")
	cf.call(t, "POST", events+"?if_absent=yes", js, `{"events":[`+fixture("run.start")+`]}`, 200)
	cf.call(t, "POST", events, js, `{"events":[{"event_type":"llm.ai.response","category":"trace"}]}`, 422)
	cf.call(t, "POST", "/api/threads/bad%20id/runs/r1/events", js, `{"events":[]}`, 422)
	cf.call(t, "GET", events+"?event_types=llm.ai.response,run.start&limit=10&after_seq=1", "", "", 200)
	cf.call(t, "PUT", "/api/threads/t1/runs/r1", js, `{"status":"success","model_name":"gpt-4o","metadata":{"replay_kind":null},`+
		`"created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:09Z","total_tokens":7,"token_usage_by_model":{"gpt-4o":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}}`, 200)
	cf.call(t, "PUT", "/api/threads/t1/runs/r1", js, `{"status":"done"}`, 422)
	cf.call(t, "GET", "/api/threads/t1/runs/r1", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/runs", "", "", 200)
	cf.call(t, "PUT", "/api/threads/t1/runs/r1/feedback", js, `{"rating":1,"comment":"good"}`, 200)
	cf.call(t, "GET", "/api/runs/r1/feedback", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/messages?limit=1", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/messages/page?limit=1", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/messages/page?after_seq=1", "", "", 422)
	cf.call(t, "GET", "/api/threads/t1/runs/r1/messages?after_seq=1", "", "", 200)
	cf.call(t, "GET", "/api/runs/r1/messages", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/runs/r1/workspace-changes?include_diff=false", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/runs/r2/workspace-changes", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/token-usage?include_active=true", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/stream?category=message", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/stream?after=x", "", "", 422)
	cf.call(t, "GET", "/api/threads/t2/messages", "", "", 200)
	cf.call(t, "GET", "/api/threads/t2/runs", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/runs/nope", "", "", 404)
	fb := cf.call(t, "POST", "/api/threads/t1/runs/r1/feedback", js, `{"rating":-1,"message_id":"m1","tags":["slow"]}`, 200)
	cf.call(t, "POST", "/api/threads/t1/runs/r1/feedback", js, `{"rating":0}`, 400)
	cf.call(t, "GET", "/api/threads/t1/runs/r1/feedback", "", "", 200)
	cf.call(t, "GET", "/api/threads/t1/runs/r1/feedback/stats", "", "", 200)
	cf.call(t, "DELETE", "/api/threads/t1/runs/r1/feedback/"+fb["feedback_id"].(string), "", "", 200)
	cf.call(t, "DELETE", "/api/threads/t1/runs/r1/feedback/"+fb["feedback_id"].(string), "", "", 404)
	cf.call(t, "DELETE", "/api/threads/t1/runs/r1/feedback", "", "", 200)
	cf.call(t, "DELETE", "/api/threads/t1/runs/r1/feedback", "", "", 404)
	cf.call(t, "POST", "/api/threads/t1/runs/r1/cancel", "", "", 409)
	cf.call(t, "POST", "/api/threads/t1/runs/nope/cancel?action=rollback", "", "", 404)
	cf.call(t, "GET", "/api/threads/t1/runs/r1/join", "", "", 409)
	cf.call(t, "GET", "/api/threads/t1/runs/r1/stream", "", "", 409)
	cf.call(t, "POST", "/api/threads/t1/runs/r1/stream?action=interrupt", "", "", 409)
	// The LangGraph run stream (package langgraph, mounted as serve does).
	push := "/api/runs/lg1/stream-chunks"
	cf.call(t, "POST", push, js, `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"values","data":{"messages":[]}},`+
		`{"event":"messages","data":[{"type":"AIMessageChunk","id":"ai-1","content":"Hel"},{"langgraph_node":"model"}]}]}`, 200)
	cf.call(t, "POST", push, js, `{"thread_id":"t1","epoch":1,"first_index":0,"chunks":[{"event":"values","data":{"messages":[]}}]}`, 200)
	if body := cf.call(t, "POST", push, js, `{"thread_id":"t1","epoch":1,"first_index":5,"chunks":[{"event":"values","data":{}}]}`, 409); fmt.Sprint(body["expected_index"]) != "2" {
		t.Errorf("a push with a gap: %v, want expected_index 2", body)
	}
	cf.call(t, "POST", push, js, `{"thread_id":"t1","epoch":2}`, 200)
	if body := cf.call(t, "POST", push, js, `{"thread_id":"t1","epoch":1}`, 409); fmt.Sprint(body["current_epoch"]) != "2" {
		t.Errorf("a push of a stale epoch: %v, want current_epoch 2", body)
	}
	cf.call(t, "POST", push, js, `{"thread_id":"t1"}`, 422)
	cf.call(t, "POST", push, js, `{"thread_id":"t1","epoch":2,"extra":1}`, 422)
	cf.call(t, "POST", push, js, `{"thread_id":"t1","epoch":2,"epoch":3}`, 400)
	cf.call(t, "POST", push, "text/plain", `{"thread_id":"t1","epoch":2}`, 415)
	cf.call(t, "GET", "/api/runs/lg1/stream-control?wait=0", "", "", 200)
	cf.call(t, "GET", "/api/runs/lg1/stream-control?wait=soon", "", "", 422)
	cf.call(t, "GET", "/api/runs/nope/stream-control", "", "", 404)
	cf.call(t, "POST", "/api/threads/t1/runs/lg1/cancel?action=rollback", "", "", 202)
	if body := cf.call(t, "GET", "/api/runs/lg1/stream-control?wait=30s", "", "", 200); body["cancel"] == nil {
		t.Errorf("the long-poll after a cancel: %v, want the cancel", body)
	}
	cf.call(t, "POST", push, js, `{"thread_id":"t1","epoch":2,"first_index":2,"end":{"status":"error","error":{"message":"stopped","name":"CancelledError"}}}`, 200)
	if body := cf.call(t, "POST", push, js, `{"thread_id":"t1","epoch":2,"first_index":3,"chunks":[{"event":"values","data":{}}]}`, 409); body["status"] != "error" {
		t.Errorf("a push after the end: %v, want status error", body)
	}
	cf.call(t, "GET", "/api/threads/t1/runs/lg1/stream", "", "", 200, "Last-Event-ID", "-1")
	cf.call(t, "GET", "/api/threads/t1/runs/lg1/stream", "", "", 422, "Last-Event-ID", "x")
	cf.call(t, "GET", "/api/threads/t1/runs/lg1/join?stream_mode=values", "", "", 200)
	cf.call(t, "POST", "/api/threads/t1/runs/lg1/stream", "", "", 200, "Last-Event-ID", "0")
	if body := cf.call(t, "POST", "/api/threads/t1/runs/lg1/cancel", "", "", 409); body["status"] != "error" {
		t.Errorf("a cancel of an ended run: %v, want status error", body)
	}
	cf.call(t, "POST", "/api/threads/t1/events", js, `{"events":[{"run_id":"r3","event_type":"llm.human.input","content":{"type":"human","content":"hi"},"metadata":{"caller":"lead_agent"}},`+
		`{"run_id":"r4","event_type":"run.start","content":{"chain":null},"metadata":{"caller":"lead_agent"}}]}`, 201)
	cf.call(t, "POST", "/api/threads/t1/events", js, `{"events":[{"event_type":"run.start"}]}`, 422)
	cf.call(t, "DELETE", events, "", "", 200)
	cf.call(t, "DELETE", "/api/threads/t1/events", "", "", 200)

	for _, o := range operations(t, cf.doc) {
		if route := strings.ToUpper(o.method) + " " + o.path; !cf.seen[route] {
			t.Errorf("%s is not exercised by this test", route)
		}
	}
}
