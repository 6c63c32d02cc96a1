package redact

import "testing"

func TestMatchKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want keyMatch
	}{
		// Strong names: a suffix anywhere, any spelling.
		{"password", strongMatch},
		{"DB_PASSWORD", strongMatch},
		{"dbpassword", strongMatch},
		{"userPassword", strongMatch},
		{"passwd", strongMatch},
		{"client_secret", strongMatch},
		{"clientSecret", strongMatch},
		{"Authorization", strongMatch},
		{"Proxy-Authorization", strongMatch},
		{"cookie", strongMatch},
		{"Set-Cookie", strongMatch},
		{"x-api-key", strongMatch},
		{"X_API_KEY", strongMatch},
		{"apiKey", strongMatch},
		{"OPENAI_API_KEY", strongMatch},
		{"private_key", strongMatch},
		{"privateKey", strongMatch},
		{"aws_secret_access_key", strongMatch},
		{"connection_string", strongMatch},
		{"ConnectionString", strongMatch},
		{"credentials", strongMatch},
		{"gcp.credential", strongMatch},
		{"passphrase", strongMatch},
		{"has_password", strongMatch}, // its boolean value is kept, see masks
		// Weak names: whole key or a word-start suffix.
		{"token", weakMatch},
		{"access_token", weakMatch},
		{"accessToken", weakMatch},
		{"accesstoken", weakMatch},
		{"refresh_token", weakMatch},
		{"id_token", weakMatch},
		{"auth_token", weakMatch},
		{"authtoken", weakMatch},
		{"GITHUB_TOKEN", weakMatch},
		{"x-amz-security-token", weakMatch},
		{"resumeToken", weakMatch},
		{"output_token", weakMatch}, // a number under it is kept, see masks
		{"pwd", weakMatch},
		{"db_pwd", weakMatch},
		{"dsn", weakMatch},
		{"SENTRY_DSN", weakMatch},
		{"session_id", weakMatch},
		{"sessionId", weakMatch},
		{"OAuthToken", weakMatch},
		// Counts, lookalikes and ordinary keys.
		{"token_count", noMatch},
		{"max_tokens", noMatch},
		{"prompt_tokens", noMatch},
		{"total_tokens", noMatch},
		{"tokens", noMatch},
		{"input_tokens", noMatch},
		{"completion_tokens", noMatch},
		{"cacheReadInputTokens", noMatch},
		{"token_usage", noMatch},
		{"token_type", noMatch},
		{"tokenizer", noMatch},
		{"maxtoken", noMatch},
		{"secretary", noMatch},
		{"content_sha256", noMatch},
		{"password_policy", noMatch},
		{"key", noMatch},
		{"keyword", noMatch},
		{"signature", noMatch},
		{"cwd", noMatch},
		{"", noMatch},
		{"---", noMatch},
	}
	for _, tt := range tests {
		if got := matchKey(tt.key, nil); got != tt.want {
			t.Errorf("matchKey(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

func TestMatchKeyExtra(t *testing.T) {
	t.Parallel()
	extra := []string{normalizeName("Ticket"), normalizeName("license-key")}
	tests := []struct {
		key  string
		want keyMatch
	}{
		{"ticket", weakMatch},
		{"jira_ticket", weakMatch},
		{"jiraTicket", weakMatch},
		{"pticket", noMatch},
		{"LICENSE_KEY", weakMatch},
		{"tickets", noMatch},
	}
	for _, tt := range tests {
		if got := matchKey(tt.key, extra); got != tt.want {
			t.Errorf("matchKey(%q, extra) = %d, want %d", tt.key, got, tt.want)
		}
		if got := matchKey(tt.key, nil); got != noMatch {
			t.Errorf("matchKey(%q, nil) = %d, want no match without the extra names", tt.key, got)
		}
	}
}

func TestMatchKeyLong(t *testing.T) {
	t.Parallel()
	long := "a_very_long_configuration_prefix_that_goes_on_and_on_for_a_while_"
	if got := matchKey(long+"password", nil); got != strongMatch {
		t.Errorf("long key ending in password: got %d", got)
	}
	if got := matchKey(long+"token", nil); got != weakMatch {
		t.Errorf("long key ending in _token: got %d", got)
	}
	if got := matchKey(long+"tokens", nil); got != noMatch {
		t.Errorf("long key ending in _tokens: got %d", got)
	}
}

func TestRulesFitCandidateMask(t *testing.T) {
	t.Parallel()
	if assignRule >= 64 {
		t.Fatalf("%d value rules and the key=value scan do not fit the 64-bit candidates mask", len(valueRules))
	}
}
