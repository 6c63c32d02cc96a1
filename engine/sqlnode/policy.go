package sqlnode

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/runstream/runstream"
)

// Rules of WORKFLOW_SQL_POLICY_DENIED, in details.rule. A statement that
// is not one read is single_read_statement, the rule the protocol's
// example names, with its cause in details.reason.
const (
	RuleSingleReadStatement = "single_read_statement"
	RuleForbiddenFunction   = "forbidden_function"
	RuleUnknownDatabase     = "unknown_database"
)

// Reasons of single_read_statement, in details.reason.
const (
	ReasonMultipleStatements = "multiple_statements"
	ReasonReadOnly           = "read_only"
	ReasonForbiddenStatement = "forbidden_statement"
	ReasonEmptyStatement     = "empty_statement"
	ReasonMalformedStatement = "malformed_statement"
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
	// name is the identifier a word or a quoted identifier names, as the
	// database resolves it: on PostgreSQL a word folded to lower case
	// (ASCII only, as PostgreSQL does), a quoted identifier decoded (""
	// and U&"…" escapes) and kept as it is; on SQLite, where names are
	// not case-sensitive, either folded to lower case.
	name string
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
			name := text
			if d == SQLite {
				name = strings.ToLower(text)
			}
			out, i = append(out, token{kind: tokQuoted, text: text, name: name}), end
		case (c == 'U' || c == 'u') && d == Postgres && strings.HasPrefix(sql[i+1:], "&'") && !wordBefore(sql, i):
			end, err := quoted(sql, i+2, '\'', false)
			if err != nil {
				return nil, errors.New("a string literal is not terminated")
			}
			out, i = append(out, token{kind: tokString}), end
		case (c == 'U' || c == 'u') && d == Postgres && strings.HasPrefix(sql[i+1:], "&\"") && !wordBefore(sql, i):
			name, end, err := unicodeIdentifier(sql, i, d)
			if err != nil {
				return nil, err
			}
			out, i = append(out, token{kind: tokQuoted, text: name, name: name}), end
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
			out, i = append(out, token{kind: tokWord, text: strings.ToUpper(sql[i:j]), name: foldWord(sql[i:j], d)}), j
		default:
			_, size := utf8.DecodeRuneInString(sql[i:])
			out, i = append(out, token{kind: tokPunct, text: sql[i : i+size]}), i+size
		}
	}
	return out, nil
}

// foldWord returns the name an unquoted word resolves to: PostgreSQL
// folds ASCII letters only, SQLite compares names without case.
func foldWord(w string, d Dialect) string {
	if d == SQLite {
		return strings.ToLower(w)
	}
	b := []byte(w)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// unicodeIdentifier reads the PostgreSQL identifier U&"…" at sql[start],
// with its UESCAPE 'c' clause when one follows, and returns its decoded
// name and the index after it.
func unicodeIdentifier(sql string, start int, d Dialect) (string, int, error) {
	end, err := quoted(sql, start+2, '"', false)
	if err != nil {
		return "", 0, errors.New("a quoted identifier is not terminated")
	}
	body := strings.ReplaceAll(sql[start+3:end-1], `""`, `"`)
	esc := '\\'
	j, err := skipSpace(sql, end, d)
	if err != nil {
		return "", 0, err
	}
	if len(sql)-j >= 7 && strings.EqualFold(sql[j:j+7], "UESCAPE") && (j+7 == len(sql) || !isWordByte(sql, j+7)) {
		k, err := skipSpace(sql, j+7, d)
		if err != nil {
			return "", 0, err
		}
		r, size := utf8.DecodeRuneInString(sql[min(k+1, len(sql)):])
		if k >= len(sql) || sql[k] != '\'' || size == 0 || k+1+size >= len(sql) || sql[k+1+size] != '\'' {
			return "", 0, errors.New("UESCAPE must be followed by a one-character string")
		}
		if strings.ContainsRune("0123456789abcdefABCDEF+'\" \t\n\r", r) {
			return "", 0, errors.New("UESCAPE names an invalid escape character")
		}
		esc, end = r, k+2+size
	}
	name, err := decodeUnicodeEscapes(body, esc)
	if err != nil {
		return "", 0, err
	}
	return name, end, nil
}

// decodeUnicodeEscapes decodes the escapes of a U&"…" identifier: esc
// followed by 4 hex digits, esc + followed by 6, esc esc for esc itself;
// UTF-16 surrogate pairs are joined. A malformed escape is an error.
func decodeUnicodeEscapes(s string, esc rune) (string, error) {
	var b strings.Builder
	var high rune
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r != esc {
			if high != 0 {
				return "", errors.New("a Unicode escape is not valid")
			}
			b.WriteRune(r)
			continue
		}
		n := 4
		switch {
		case strings.HasPrefix(s[i:], string(esc)):
			if high != 0 {
				return "", errors.New("a Unicode escape is not valid")
			}
			b.WriteRune(esc)
			i += len(string(esc))
			continue
		case strings.HasPrefix(s[i:], "+"):
			i++
			n = 6
		}
		if i+n > len(s) {
			return "", errors.New("a Unicode escape is not valid")
		}
		v, err := strconv.ParseUint(s[i:i+n], 16, 32)
		if err != nil {
			return "", errors.New("a Unicode escape is not valid")
		}
		i += n
		c := rune(v)
		switch {
		case high != 0 && c >= 0xDC00 && c <= 0xDFFF:
			c = utf16.DecodeRune(high, c)
			high = 0
		case high != 0:
			return "", errors.New("a Unicode escape is not valid")
		case c >= 0xD800 && c <= 0xDBFF:
			high = c
			continue
		}
		if c == 0 || c > unicode.MaxRune || (c >= 0xD800 && c <= 0xDFFF) {
			return "", errors.New("a Unicode escape is not valid")
		}
		b.WriteRune(c)
	}
	if high != 0 {
		return "", errors.New("a Unicode escape is not valid")
	}
	return b.String(), nil
}

// skipSpace returns the index of the first byte at or after i that is
// not white space or part of a comment.
func skipSpace(sql string, i int, d Dialect) (int, error) {
	for i < len(sql) {
		switch c := sql[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case strings.HasPrefix(sql[i:], "--"):
			end := strings.IndexByte(sql[i:], '\n')
			if end < 0 {
				return len(sql), nil
			}
			i += end + 1
		case strings.HasPrefix(sql[i:], "/*"):
			end, err := blockComment(sql, i, d)
			if err != nil {
				return 0, err
			}
			i = end
		default:
			return i, nil
		}
	}
	return i, nil
}

// isWordByte reports whether the rune at sql[i] may be part of a word.
func isWordByte(sql string, i int) bool {
	r, _ := utf8.DecodeRuneInString(sql[i:])
	return isWordRune(r)
}

// isWordRune reports whether r continues a name: as in PostgreSQL's and
// SQLite's scanners, every character past ASCII does (· too), not only
// letters and digits.
func isWordRune(r rune) bool {
	return r == '_' || r >= utf8.RuneSelf || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// wordBefore reports whether sql[i] continues a word (so E' and $ are not
// a string prefix or a dollar quote there).
func wordBefore(sql string, i int) bool {
	if i == 0 {
		return false
	}
	r, _ := utf8.DecodeLastRuneInString(sql[:i])
	return r == '$' || isWordRune(r)
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
	// sqliteForbiddenFunctions read or write files, load code or change
	// the full-text tokenizers (lower case). On SQLite the read-only
	// connection and query_only refuse writes; other functions are
	// allowed.
	sqliteForbiddenFunctions = []string{
		"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer",
	}
)

// postgresFunctions are the functions a PostgreSQL statement may call,
// by their name in pg_catalog (lower case): computation on values only.
// Any other function, and a function qualified by another schema, is
// denied: PostgreSQL's catalogue holds functions that read files, signal
// sessions, change settings, sleep or open connections, and extensions
// add more.
var postgresFunctions = wordSet(
	// aggregates and window functions
	"count sum avg min max array_agg string_agg json_agg jsonb_agg json_object_agg jsonb_object_agg "+
		"bool_and bool_or every bit_and bit_or stddev stddev_pop stddev_samp variance var_pop var_samp "+
		"corr covar_pop covar_samp percentile_cont percentile_disc mode "+
		"row_number rank dense_rank percent_rank cume_dist ntile lag lead first_value last_value nth_value",
	// strings
	"length char_length character_length octet_length bit_length lower upper initcap substr substring "+
		"position strpos trim btrim ltrim rtrim lpad rpad replace split_part concat concat_ws left right "+
		"reverse repeat format to_char to_number to_date to_timestamp md5 encode decode ascii chr translate "+
		"starts_with regexp_replace regexp_match regexp_matches regexp_split_to_array regexp_split_to_table "+
		"regexp_like regexp_count regexp_instr regexp_substr quote_ident quote_literal quote_nullable "+
		"string_to_array array_to_string overlay normalize",
	// numbers
	"abs ceil ceiling floor round trunc mod power pow sqrt cbrt exp ln log log10 sign div pi degrees "+
		"radians width_bucket gcd lcm scale min_scale trim_scale random sin cos tan asin acos atan atan2",
	// dates and times
	"now date_trunc date_part extract age make_date make_time make_timestamp make_timestamptz "+
		"make_interval clock_timestamp statement_timestamp transaction_timestamp timezone justify_days "+
		"justify_hours justify_interval isfinite date_bin",
	// conditionals, arrays, JSON
	"coalesce nullif greatest least "+
		"array_length array_lower array_upper cardinality array_position array_positions array_append "+
		"array_prepend array_cat array_remove array_replace unnest array_dims array_ndims generate_series "+
		"generate_subscripts "+
		"json_build_object jsonb_build_object json_build_array jsonb_build_array to_json to_jsonb "+
		"row_to_json array_to_json json_array_length jsonb_array_length json_each jsonb_each "+
		"json_each_text jsonb_each_text json_extract_path jsonb_extract_path json_extract_path_text "+
		"jsonb_extract_path_text json_object_keys jsonb_object_keys json_array_elements "+
		"jsonb_array_elements json_array_elements_text jsonb_array_elements_text json_typeof jsonb_typeof "+
		"jsonb_set jsonb_insert jsonb_pretty jsonb_strip_nulls json_strip_nulls jsonb_path_query "+
		"jsonb_path_query_array jsonb_path_query_first jsonb_path_exists jsonb_path_match json_object jsonb_object",
	// type conversions written as calls
	"numeric int2 int4 int8 float4 float8 text varchar bool date time timestamp timestamptz interval",
)

// callKeywords are the PostgreSQL key words (upper case, unquoted) that a
// ( may follow without a function being called: clauses, operators,
// constructors and type names.
var callKeywords = wordSet(
	"IN EXISTS ANY ALL SOME ARRAY ROW VALUES AS ON USING OVER FILTER GROUP " +
		"LATERAL SELECT FROM WHERE AND OR NOT JOIN BY HAVING UNION INTERSECT EXCEPT DISTINCT THEN ELSE WHEN " +
		"CASE IS LIKE ILIKE BETWEEN TO SIMILAR ESCAPE LIMIT OFFSET FETCH WITH RECURSIVE MATERIALIZED CUBE " +
		"ROLLUP SETS GROUPING PARTITION WINDOW ORDER ORDINALITY INTERVAL NULLIF COALESCE GREATEST LEAST CAST " +
		"EXTRACT POSITION SUBSTRING OVERLAY TRIM FOR VARIADIC OF ROWS TABLE " +
		"OVERLAPS ONLY BERNOULLI SYSTEM CURRENT_TIME CURRENT_TIMESTAMP LOCALTIME LOCALTIMESTAMP NUMERIC DECIMAL VARCHAR CHAR CHARACTER VARYING TIMESTAMP TIME BIT FLOAT ZONE",
)

// wordSet returns the set of the space-separated words of groups.
func wordSet(groups ...string) map[string]bool {
	set := map[string]bool{}
	for _, g := range groups {
		for _, w := range strings.Fields(g) {
			set[w] = true
		}
	}
	return set
}

// deny returns the policy error of cause: a rule, or a reason of
// single_read_statement.
func deny(cause, format string, args ...any) *runstream.Error {
	e := runstream.Errorf(runstream.CodeWorkflowSQLPolicyDenied, format, args...)
	switch cause {
	case RuleForbiddenFunction, RuleUnknownDatabase:
		return e.WithDetail("rule", cause)
	}
	return e.WithDetail("rule", RuleSingleReadStatement).WithDetail("reason", cause)
}

// CheckStatement applies the read-only policy to sql before it runs: it
// must be one statement (a trailing ; is allowed) that starts with SELECT,
// WITH, VALUES or TABLE, writes nothing (no INSERT, UPDATE, DELETE, MERGE
// or INTO anywhere outside strings, quoted names and comments) and calls
// only allowed functions: on PostgreSQL those of postgresFunctions, on
// SQLite any but those that touch files or load code. Names are judged as
// the database resolves them: quoted identifiers, U&"…" escapes (with
// UESCAPE), schema qualification and comments between a name and its (
// are decoded first. It
// returns nil or a WORKFLOW_SQL_POLICY_DENIED error: details.rule
// forbidden_function for a function call, else single_read_statement with
// details.reason malformed_statement, empty_statement, multiple_statements,
// read_only or forbidden_statement. The database's read-only transaction enforces
// read-only again when the statement runs.
func CheckStatement(sql string, d Dialect) *runstream.Error {
	tokens, err := tokenize(sql, d)
	if err != nil {
		return deny(ReasonMalformedStatement, "the statement cannot be read: %s", err.Error())
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
		return deny(ReasonEmptyStatement, "the statement is empty")
	case len(statements) > 1:
		return deny(ReasonMultipleStatements, "only one statement is allowed, found %d", len(statements))
	}
	stmt := statements[0]
	first := 0
	for first < len(stmt) && stmt[first].kind == tokPunct && stmt[first].text == "(" {
		first++
	}
	if first == len(stmt) || stmt[first].kind != tokWord {
		return deny(ReasonForbiddenStatement, "the statement must start with SELECT, WITH, VALUES or TABLE")
	}
	switch word := stmt[first].text; {
	case slices.Contains(writeStarts, word):
		return deny(ReasonReadOnly, "%s statements write: only reads are allowed", word)
	case !slices.Contains(readStarts, word):
		return deny(ReasonForbiddenStatement, "%s statements are not allowed: only SELECT, WITH, VALUES and TABLE", shortWord(word))
	}
	for i, t := range stmt {
		call := i+1 < len(stmt) && stmt[i+1].kind == tokPunct && stmt[i+1].text == "("
		switch {
		case t.kind == tokWord && !call && slices.Contains(innerWrites, t.text):
			return deny(ReasonReadOnly, "the statement writes (%s): only reads are allowed", t.text)
		case call && (t.kind == tokWord || t.kind == tokQuoted):
			if err := checkCall(stmt, i, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCall judges stmt[i], a word or quoted identifier followed by (.
// On SQLite it is denied when it names one of sqliteForbiddenFunctions.
// On PostgreSQL a key word, a type's modifiers or an alias's column names
// (after AS, or right after a FROM item's closing parenthesis) are not a
// call; a call is allowed when it names one of
// postgresFunctions, unqualified or qualified by pg_catalog.
func checkCall(stmt []token, i int, d Dialect) *runstream.Error {
	t := stmt[i]
	if d == SQLite {
		if slices.Contains(sqliteForbiddenFunctions, t.name) {
			return deny(RuleForbiddenFunction, "the function %s is not allowed", shortWord(t.name))
		}
		return nil
	}
	prev := func(k int) token {
		if i-k < 0 {
			return token{kind: -1}
		}
		return stmt[i-k]
	}
	isPunct := func(t token, p string) bool { return t.kind == tokPunct && t.text == p }
	switch {
	case t.kind == tokWord && callKeywords[t.text]:
		return nil
	case isPunct(prev(1), ":") && isPunct(prev(2), ":"):
		return nil // a type's modifiers: x::numeric(10, 2)
	case prev(1).kind == tokWord && (prev(1).text == "AS" || prev(1).text == "WITH" || prev(1).text == "RECURSIVE"):
		return nil // a table alias's or a CTE's column names
	case isPunct(prev(1), ")") && namesOnly(stmt[i+1:]) && fromItemBefore(stmt, i-1):
		// A subquery's, VALUES' or a function's alias and its column
		// names without AS: FROM (VALUES (1)) v(x), FROM f(1) g(n).
		return nil
	}
	if isPunct(prev(1), ".") {
		schema := prev(2)
		if (schema.kind != tokWord && schema.kind != tokQuoted) || schema.name != "pg_catalog" || isPunct(prev(3), ".") {
			return deny(RuleForbiddenFunction, "the function %s is not allowed: only functions of pg_catalog may be called", shortWord(t.name))
		}
	}
	if !postgresFunctions[t.name] {
		return deny(RuleForbiddenFunction, "the function %s is not allowed", shortWord(t.name))
	}
	return nil
}

// fromItemBefore reports whether stmt[closing], a ), ends a FROM item: the
// ( it closes follows FROM, JOIN or LATERAL, or opens the arguments of a
// function that follows one. Elsewhere a name may follow a ) and be
// called: SELECT DISTINCT ON (x) f(x).
func fromItemBefore(stmt []token, closing int) bool {
	depth := 0
	open := -1
	for k := closing; k >= 0; k-- {
		if stmt[k].kind != tokPunct {
			continue
		}
		switch stmt[k].text {
		case ")":
			depth++
		case "(":
			depth--
		}
		if depth == 0 {
			open = k
			break
		}
	}
	isFrom := func(k int) bool {
		return k >= 0 && stmt[k].kind == tokWord && (stmt[k].text == "FROM" || stmt[k].text == "JOIN" || stmt[k].text == "LATERAL")
	}
	switch {
	case open < 1:
		return false
	case isFrom(open - 1):
		return true
	case stmt[open-1].kind == tokWord || stmt[open-1].kind == tokQuoted:
		return isFrom(open - 2)
	}
	return false
}

// namesOnly reports whether tokens start with a parenthesized list of
// names separated by commas: ( a, "b" ).
func namesOnly(tokens []token) bool {
	if len(tokens) < 3 || tokens[0].kind != tokPunct || tokens[0].text != "(" {
		return false
	}
	for k := 1; k < len(tokens); k += 2 {
		if tokens[k].kind != tokWord && tokens[k].kind != tokQuoted {
			return false
		}
		if k+1 >= len(tokens) || tokens[k+1].kind != tokPunct {
			return false
		}
		switch tokens[k+1].text {
		case ")":
			return true
		case ",":
		default:
			return false
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
