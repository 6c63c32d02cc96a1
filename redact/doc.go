// Package redact removes secrets and hidden reasoning from event payloads.
// It is the one choke point of invariant 7 ("nothing secret leaves"):
// every writer, of workflow events and of thread run events alike, passes
// the payload through a Redactor right before the store append, so what is
// persisted, streamed, replayed and exported is already clean.
//
// # API
//
// [New] builds a [Redactor] (zero [Options] give the defaults; one
// Redactor is safe for concurrent use). [Redactor.JSON] redacts a raw JSON
// document, [Redactor.Value] a value decoded by encoding/json,
// [Redactor.String] one string (log lines, error texts). All three report
// whether anything changed and, when nothing did, return their input
// itself: JSON returns the same bytes without decoding the document, after
// one copy and a scan of its strings. Value never modifies its argument;
// it copies maps and slices along the changed path only. [Text] and
// [Quote] apply the default rules to text kept or shown outside events: a
// log line, a run row's label, and the short excerpt of a caller's value
// that an error message may hold.
//
// # Markers
//
// A redacted secret is replaced by "[REDACTED:<rule>]", where <rule> names
// the rule that found it: key, private_key, anthropic_key, openai_key,
// github_token, gitlab_token, slack_token, slack_webhook, stripe_key,
// google_api_key, huggingface_token, runstream_key, npm_token,
// aws_access_key_id, aws_secret_key, jwt, dsn, url_credentials, bearer, basic_auth. Only the secret part is
// replaced: "postgres://[REDACTED:dsn]@db.example:5432/app",
// "Authorization: Bearer [REDACTED:bearer]".
//
// # Key rules
//
// A map key is normalised (ASCII lowercased, every byte that is not a
// letter or digit dropped, camelCase and acronym steps remembered as word
// starts) and is sensitive when it is, or ends with, one of the names in
// keys.go. Strong names (password, passwd, passphrase, secret, secretkey,
// authorization, credential(s), privatekey, apikey, connectionstring,
// cookie, …) match as a suffix anywhere: "DB_PASSWORD", "dbpassword",
// "client_secret", "X-Api-Key", "Set-Cookie". Weak names (token, pwd, dsn,
// sessionid, and glued token names such as accesstoken or authtoken) match
// only the whole key or a suffix that starts a word: "auth_token",
// "accessToken", "x-amz-security-token", "resumeToken".
//
// The value under a sensitive key, whatever its type, becomes
// "[REDACTED:key]", except values that carry no secret (null, booleans,
// "", empty objects and arrays, a marker) and numbers under weak names,
// which are counts.
//
// False positives. Token accounting is core data, so counts never match:
// no rule ends in a plural or a counting word, hence "tokens",
// "max_tokens", "prompt_tokens", "input_tokens", "total_tokens",
// "token_count", "token_usage", "tokenizer", "secretary", "content_sha256"
// are left alone; the suffix must end the key ("token_type" is kept) and a
// weak name must start a word ("maxtoken" is kept). Pagination cursors such
// as "next_page_token" are redacted: a cursor is cheaper to lose than a
// credential.
//
// The same names act inside text (assign.go): "DB_PASSWORD=x", "password =
// 'x'", "token => x", JSON or dict text such as {"api_key": "x"}, and
// "Authorization: x" or YAML "password: x" at the start of a line or right
// after a quote. An unquoted "password: …" in mid-sentence is prose and is
// kept. A leading auth scheme word ("Bearer", "Basic", "Digest", …) stays.
//
// Options.ExtraKeys adds weak names. Options.KeepKeys lists exact keys
// whose values pass through untouched: the engine redacts run.awaiting_input
// data with KeepKeys "resumeToken", the one secret that must stay in its
// event (it is verified by hash and single-use, and the store keeps it
// sealed: package seal); no other writer keeps it.
// Map keys themselves are not redacted.
//
// Options.KeepReasoning turns the hidden-reasoning rules below off and
// keeps every credential rule: it is the profile of the LangGraph stream
// chunks (package langgraph), whose chat displays reasoning_content.
//
// # Hidden reasoning
//
// Chain-of-thought is deleted, not masked. Keys "redacted_thinking" and
// "reasoning_content" (any spelling) are deleted wherever they appear;
// "thinking" is deleted when its value is text or a list and kept when it
// is an object, boolean, number or null, which is request configuration
// such as {"thinking":{"type":"enabled","budget_tokens":1024}}. Content
// blocks whose "type" is "thinking" or "redacted_thinking" are dropped from
// their array. Outside an array (a streaming "content_block") such a block
// keeps its other fields but loses "thinking" and "signature"
// (redacted_thinking: "data"); a "signature_delta" loses "signature", a
// "thinking_delta" its "thinking", and an OpenAI "reasoning" item its
// "encrypted_content" ("summary" is user-visible and stays). "signature"
// is not deleted anywhere else: it is a common word (function signatures,
// webhook metadata). Thinking text inside a string, such as <think> tags,
// is not recognised.
//
// # Value rules
//
// Inside every string value (rules.go), in this order: PEM private key
// blocks, whole, to the end of the string when unterminated; provider
// keys by their documented shapes (Anthropic sk-ant-, OpenAI sk- and
// sk-proj-, GitHub ghp_/gho_/ghu_/ghs_/ghr_/github_pat_, GitLab glpat-,
// Slack xox?- and xapp- tokens and hooks.slack.com URLs, Stripe sk_/rk_
// live and test keys and whsec_, Google AIza, Hugging Face hf_, npm npm_,
// runstream's own API keys rsk_, AWS
// AKIA/ASIA key ids and 40-character secrets after aws_secret_access_key);
// JWTs (three base64url segments, the first starting "eyJ"); the userinfo
// of any URL with a password (scheme and host kept; "dsn" for database and
// broker schemes, "url_credentials" otherwise) and Go MySQL DSNs
// (user:pass@tcp(…)); the credentials after "Bearer" and "Basic".
//
// Each rule has a few trigger literals (its prefix: "sk-", "ghp_", "eyJ",
// "://", …). One pass over the string finds which triggers occur; only
// those rules run their RE2 expression, compiled once, and the key=value
// scan runs only when the string holds '=' or ':'. A string without a
// trigger costs one table lookup per byte and no allocation. Where a prefix
// alone could be a word, the match must also look machine-made
// (looksRandom: two or more digits or inner capitals), so
// "sk-this-is-a-phrase", "bearer tokens" and "Bearer Authentication" stay;
// a Basic value is redacted only when it decodes to printable "user:pass",
// so "basic authentication" stays. A prefix inside a word ("task-list")
// starts no key; one after an underscore does, so a key glued to a name
// ("extra_sk-ant-…", as an error quoting an unknown field shows it) is
// found.
//
// # Idempotency
//
// Redacting redacted output changes nothing. A marker never matches on
// its own: no rule's trigger or token class contains '[' or ']', a secret
// that is exactly a marker is never replaced (nor is a marker under a
// sensitive key or after "password="), and a bare value that starts with
// a marker runs past the marker's ']'. String also re-applies the rules to
// its own output until they find nothing, so a replacement that exposes a
// new match is handled in the same call. FuzzIdempotent checks this, and
// that JSON's fast scan never misses a change the full pass would make.
package redact
