package sqlnode

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/runstream/runstream"
)

// Rules of WORKFLOW_SQL_POLICY_DENIED, in details.rule.
const (
	RuleMultipleStatements = "multiple_statements"
	RuleReadOnly           = "read_only"
	RuleForbiddenStatement = "forbidden_statement"
	RuleUnknownDatabase    = "unknown_database"
	RuleEmptyStatement     = "empty_statement"
	RuleMalformedStatement = "malformed_statement"
)

// Dialect is the SQL dialect a statement is read in: quoting and comments
// differ (PostgreSQL nests block comments and has dollar quotes and E'…'
// strings; SQLite quotes identifiers with `…` and […] too).
type Dialect int

// Dialects.
const (
	SQLite Dialect = iota
	Postgres
)

func (d Dialect) String() string {
	if d == Postgres {
		return "postgres"
	}
	return "sqlite"
}

type tokenKind int

const (
	tokWord   tokenKind = iota // keyword or identifier, upper-cased
	tokQuoted                  // quoted identifier, as written inside its quotes
	tokString                  // string literal (its text is not kept)
	tokNumber
	tokParam // $1, ?, :name, @name
	tokPunct // one character: ; ( ) , . and the rest
)

type token struct {
	kind tokenKind
	text string
}

// tokenize splits a statement into tokens, dropping white space and
// comments. An unterminated string, identifier or comment is an error.
func tokenize(sql string, d Dialect) ([]token, error) {
	var out []token
	i := 0
	for i < len(sql) {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				return out, nil
			}
			i += end + 1
		case strings.HasPrefix(sql[i:], "/*"):
			end, err := blockComment(sql, i, d)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '\'':
			end, err := quoted(sql, i, '\'', false)
			if err != nil {
				return nil, errors.New("a string literal is not terminated")
			}
			out, i = append(out, token{kind: tokString}), end
		case (c == 'E' || c == 'e') && d == Postgres && i+1 < len(sql) && sql[i+1] == '\'' && !wordBefore(sql, i):
			end, err := quoted(sql, i+1, '\'', true)
			if err != nil {
				return nil, errors.New("a string literal is not terminated")
			}
			out, i = append(out, token{kind: tokString}), end
		case c == '"' || (d == SQLite && (c == '`' || c == '[')):
			closing := c
			if c == '[' {
				closing = ']'
			}
			end, err := quoted(sql, i, closing, false)
			if err != nil {
				return nil, errors.New("a quoted identifier is not terminated")
			}
			text := strings.ReplaceAll(sql[i+1:end-1], string([]byte{closing, closing}), string(closing))
			out, i = append(out, token{kind: tokQuoted, text: text}), end
		case c == '$' && d == Postgres && !wordBefore(sql, i):
			if tag, ok := dollarTag(sql[i:]); ok {
				end := strings.Index(sql[i+len(tag):], tag)
				if end < 0 {
					return nil, errors.New("a dollar-quoted string is not terminated")
				}
				out, i = append(out, token{kind: tokString}), i+len(tag)+end+len(tag)
				continue
			}
			j := i + 1
			for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
				j++
			}
			out, i = append(out, token{kind: tokParam, text: sql[i:j]}), j
		case c == '?' || ((c == ':' || c == '@' || c == '$') && d == SQLite):
			j := i + 1
			for j < len(sql) && isWordByte(sql, j) {
				j++
			}
			out, i = append(out, token{kind: tokParam, text: sql[i:j]}), j
		case c >= '0' && c <= '9' || (c == '.' && i+1 < len(sql) && sql[i+1] >= '0' && sql[i+1] <= '9'):
			j := i + 1
			for j < len(sql) && (isWordByte(sql, j) || sql[j] == '.') {
				j++
			}
			out, i = append(out, token{kind: tokNumber, text: sql[i:j]}), j
		case isWordByte(sql, i):
			j := i
			for j < len(sql) && (isWordByte(sql, j) || (d == Postgres && sql[j] == '$')) {
				_, size := utf8.DecodeRuneInString(sql[j:])
				j += size
			}
			out, i = append(out, token{kind: tokWord, text: strings.ToUpper(sql[i:j])}), j
		default:
			_, size := utf8.DecodeRuneInString(sql[i:])
			out, i = append(out, token{kind: tokPunct, text: sql[i : i+size]}), i+size
		}
	}
	return out, nil
}

// isWordByte reports whether the rune at sql[i] may be part of a word.
func isWordByte(sql string, i int) bool {
	r, _ := utf8.DecodeRuneInString(sql[i:])
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// wordBefore reports whether sql[i] continues a word (so E' and $ are not
// a string prefix or a dollar quote there).
func wordBefore(sql string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(sql[:i])
	return r == '_' || r == '$' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// quoted returns the index after the quote that closes the one at
// sql[start]; a doubled closing quote is an escaped one, and so is a
// backslash-escaped character when backslash is set.
func quoted(sql string, start int, closing byte, backslash bool) (int, error) {
	for i := start + 1; i < len(sql); i++ {
		switch {
		case backslash && sql[i] == '\\':
			i++
		case sql[i] == closing:
			if i+1 < len(sql) && sql[i+1] == closing && closing != ']' {
				i++
				continue
			}
			return i + 1, nil
		}
	}
	return 0, errors.New("unterminated")
}

// blockComment returns the index after the block comment at sql[start];
// PostgreSQL's nest, SQLite's end at the first */.
func blockComment(sql string, start int, d Dialect) (int, error) {
	depth := 0
	for i := start; i < len(sql)-1; i++ {
		switch {
		case sql[i] == '/' && sql[i+1] == '*':
			if depth > 0 && d != Postgres {
				continue
			}
			depth++
			i++
		case sql[i] == '*' && sql[i+1] == '/':
			depth--
			i++
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, errors.New("a block comment is not terminated")
}

// dollarTag returns the opening $tag$ of a dollar-quoted string at the
// start of s.
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[:j+1], true
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || (j > 1 && c >= '0' && c <= '9'):
		default:
			return "", false
		}
	}
	return "", false
}

// Statement words, upper case.
var (
	// readStarts begin the statements that are allowed.
	readStarts = []string{"SELECT", "WITH", "VALUES", "TABLE"}
	// writeStarts begin writes and DDL.
	writeStarts = []string{
		"INSERT", "UPDATE", "DELETE", "MERGE", "REPLACE", "UPSERT", "CREATE", "DROP", "ALTER",
		"TRUNCATE", "GRANT", "REVOKE", "COMMENT", "RENAME", "REFRESH", "SECURITY", "IMPORT",
	}
	// innerWrites inside a read statement make it a write (a data-modifying
	// CTE, SELECT … INTO, a locking clause), unless called as a function.
	innerWrites = []string{"INSERT", "UPDATE", "DELETE", "MERGE", "INTO"}
	// forbiddenFunctions, and the functions whose names start with one of
	// forbiddenFunctionPrefixes, read or write files, run other statements
	// or open other connections, change settings or sequences, or signal
	// or block other sessions (lower case).
	forbiddenFunctions = []string{
		"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer",
		"set_config", "nextval", "setval", "pg_notify", "pg_stat_file", "pg_promote",
		"pg_terminate_backend", "pg_cancel_backend", "pg_reload_conf", "pg_rotate_logfile",
	}
	forbiddenFunctionPrefixes = []string{
		"pg_read_", "pg_ls_", "pg_file_", "lo_", "dblink", "pg_advisory_", "pg_try_advisory_",
		"pg_logical_", "pg_replication_", "pg_switch_", "pg_create_", "pg_drop_", "pg_import_",
		"pg_sleep", "query_to_xml", "cursor_to_xml",
	}
)

// deny returns the policy error of rule.
func deny(rule, format string, args ...any) *runstream.Error {
	return runstream.Errorf(runstream.CodeWorkflowSQLPolicyDenied, format, args...).WithDetail("rule", rule)
}

// CheckStatement applies the read-only policy to sql before it runs: it
// must be one statement (a trailing ; is allowed) that starts with SELECT,
// WITH, VALUES or TABLE, writes nothing (no INSERT, UPDATE, DELETE, MERGE
// or INTO anywhere outside strings, quoted names and comments) and calls
// no function that touches files, sessions, settings or sequences. It
// returns nil or a WORKFLOW_SQL_POLICY_DENIED error with details.rule:
// malformed_statement, empty_statement, multiple_statements, read_only or
// forbidden_statement. The database's read-only transaction enforces
// read-only again when the statement runs.
func CheckStatement(sql string, d Dialect) *runstream.Error {
	tokens, err := tokenize(sql, d)
	if err != nil {
		return deny(RuleMalformedStatement, "the statement cannot be read: %s", err.Error())
	}
	var statements [][]token
	start := 0
	for i, t := range append(tokens, token{kind: tokPunct, text: ";"}) {
		if t.kind == tokPunct && t.text == ";" {
			if i > start {
				statements = append(statements, tokens[start:i])
			}
			start = i + 1
		}
	}
	switch {
	case len(statements) == 0:
		return deny(RuleEmptyStatement, "the statement is empty")
	case len(statements) > 1:
		return deny(RuleMultipleStatements, "only one statement is allowed, found %d", len(statements))
	}
	stmt := statements[0]
	first := 0
	for first < len(stmt) && stmt[first].kind == tokPunct && stmt[first].text == "(" {
		first++
	}
	if first == len(stmt) || stmt[first].kind != tokWord {
		return deny(RuleForbiddenStatement, "the statement must start with SELECT, WITH, VALUES or TABLE")
	}
	switch word := stmt[first].text; {
	case slices.Contains(writeStarts, word):
		return deny(RuleReadOnly, "%s statements write: only reads are allowed", word)
	case !slices.Contains(readStarts, word):
		return deny(RuleForbiddenStatement, "%s statements are not allowed: only SELECT, WITH, VALUES and TABLE", shortWord(word))
	}
	for i, t := range stmt {
		call := i+1 < len(stmt) && stmt[i+1].kind == tokPunct && stmt[i+1].text == "("
		switch {
		case t.kind == tokWord && !call && slices.Contains(innerWrites, t.text):
			return deny(RuleReadOnly, "the statement writes (%s): only reads are allowed", t.text)
		case (t.kind == tokWord || t.kind == tokQuoted) && call && forbiddenFunction(t.text):
			return deny(RuleForbiddenStatement, "the function %s is not allowed", shortWord(strings.ToLower(t.text)))
		}
	}
	return nil
}

func forbiddenFunction(name string) bool {
	name = strings.ToLower(name)
	if slices.Contains(forbiddenFunctions, name) {
		return true
	}
	for _, p := range forbiddenFunctionPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// shortWord bounds a word quoted in a message.
func shortWord(w string) string {
	if len(w) > 64 {
		return fmt.Sprintf("%.64s…", w)
	}
	return w
}
