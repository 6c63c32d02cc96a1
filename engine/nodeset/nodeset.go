// Package nodeset assembles every node type, llm provider and built-in
// tool of runstream into the one registry a server publishes and runs
// definitions with.
package nodeset

import (
	"context"
	"net/http"

	"github.com/runstream/runstream/engine"
	"github.com/runstream/runstream/engine/openaillm"
	"github.com/runstream/runstream/engine/sqlnode"
)

// Config is a server's configuration of its node types.
type Config struct {
	// SQL are the databases sql nodes and the sql_query tool may query;
	// nil allows none.
	SQL *sqlnode.Databases
	// HTTP are the policies of the http node and the http_get tool.
	HTTP engine.HTTPOptions
	// OpenAIAPIKey is the key of the openai llm provider, from the
	// server's environment or configuration; empty sends none.
	OpenAIAPIKey string
	// OpenAIKeyBaseURLs are the endpoints the key is sent to (see
	// openaillm.Options.KeyBaseURLs). Defaults to openaillm.DefaultBaseURL.
	OpenAIKeyBaseURLs []string
	// LLMObserver, when set, is told of every llm node attempt when it
	// ends (journal/workflowllm journals them into the run's thread).
	LLMObserver func(context.Context, *engine.NodeRun, engine.LLMAttempt)
	// OpenAIClient sends the openai provider's requests. Defaults to
	// engine.GuardedClient(HTTP.Allow): the base URL is the definition's,
	// so it is held to the http node's address policy.
	OpenAIClient *http.Client
}

// Tools returns the built-in tools: http_get and sql_query.
func Tools(cfg Config) []engine.Tool {
	return []engine.Tool{engine.HTTPGetTool(cfg.HTTP), sqlnode.QueryTool(cfg.SQL)}
}

// Types returns every node type: llm (providers scripted and openai, both
// with the built-in tools), human_input, transform, delay, http and sql.
func Types(cfg Config) []engine.NodeType {
	tools := Tools(cfg)
	if cfg.OpenAIClient == nil {
		cfg.OpenAIClient = engine.GuardedClient(cfg.HTTP.Allow)
	}
	return []engine.NodeType{
		llm(cfg.LLMObserver,
			engine.ScriptedProvider(tools...),
			openaillm.Provider(openaillm.Options{APIKey: cfg.OpenAIAPIKey, KeyBaseURLs: cfg.OpenAIKeyBaseURLs, HTTPClient: cfg.OpenAIClient, Tools: tools}),
		),
		engine.HumanInput(),
		engine.Transform(),
		engine.Delay(),
		engine.HTTP(cfg.HTTP),
		sqlnode.NodeType(cfg.SQL),
	}
}

// llm returns the llm node type over providers, observed when observe is
// set.
func llm(observe func(context.Context, *engine.NodeRun, engine.LLMAttempt), providers ...engine.LLMProvider) engine.NodeType {
	if observe == nil {
		return engine.LLM(providers...)
	}
	return engine.ObservedLLM(observe, providers...)
}

// Registry returns a registry of Types(cfg).
func Registry(cfg Config) (*engine.Registry, error) {
	return engine.NewRegistry(Types(cfg)...)
}
