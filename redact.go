package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// This file holds the redaction of secrets from what harnessd logs,
// stores and answers, and the cutting of text to a length: whatever is cut
// is redacted first, so no prefix of a secret survives a cut. It is a
// leaf: which values are secrets is decided by those who hand them over
// (config_secrets.go, the model's key, the credentials OAuth obtains).

// minSecretLength is the shortest value treated as a secret; shorter
// values ("1", "true", an "ollama" key) are not secrets and would blank out
// ordinary words.
const minSecretLength = 8

// redactedText replaces each secret.
const redactedText = "[redacted]"

// A redactor replaces secrets in text with "[redacted]", whole tokens
// only: a match must not continue a word on either side, so a secret that
// happens to be part of a longer word is left alone. It is built once per
// set of secrets (an Aho–Corasick automaton, redact_match.go); matching
// costs one pass over the text, however many secrets there are and
// whatever their lengths. A nil *redactor hides nothing. Safe for
// concurrent use (never modified).
type redactor struct {
	set     map[string]struct{}
	maxLen  int // the length of the longest secret
	matcher *acMatcher
	// escaped holds the secrets as encodeCompact writes them inside a JSON
	// string; nil when no secret needs escaping.
	escaped *redactor
}

// newRedactor returns a redactor for values and each credential part of
// them (see secretParts); nil when none is long enough to be a secret.
func newRedactor(values ...string) *redactor {
	return (*redactor)(nil).with(values...)
}

// with returns a redactor hiding the secrets of rd and those of values.
// It returns rd itself when values add nothing.
func (rd *redactor) with(values ...string) *redactor {
	added := map[string]struct{}{}
	for _, v := range values {
		for _, p := range secretParts(v) {
			if !rd.has(p) {
				added[p] = struct{}{}
			}
		}
	}
	if len(added) == 0 {
		return rd
	}
	set := make(map[string]struct{}, rd.size()+len(added))
	if rd != nil {
		maps.Copy(set, rd.set)
	}
	maps.Copy(set, added)
	out := newRedactorOf(set)
	var escaped map[string]struct{}
	for s := range out.set {
		if esc := encodeCompact(s); string(esc[1:len(esc)-1]) != s {
			if escaped == nil {
				escaped = map[string]struct{}{}
			}
			escaped[string(esc[1:len(esc)-1])] = struct{}{}
		}
	}
	if escaped != nil {
		out.escaped = newRedactorOf(escaped)
	}
	return out
}

// newRedactorOf returns the redactor of exactly the secrets in set (none
// empty), which it keeps.
func newRedactorOf(set map[string]struct{}) *redactor {
	list := make([]string, 0, len(set))
	longest := 0
	for s := range set {
		list = append(list, s)
		longest = max(longest, len(s))
	}
	return &redactor{set: set, maxLen: longest, matcher: newACMatcher(list)}
}

// has reports whether s is one of rd's secrets.
func (rd *redactor) has(s string) bool {
	if rd == nil {
		return false
	}
	_, ok := rd.set[s]
	return ok
}

// size returns how many secrets rd hides.
func (rd *redactor) size() int {
	if rd == nil {
		return 0
	}
	return len(rd.set)
}

// secretParts returns the parts of a credential value that are secrets on
// their own, each at least minSecretLength long: the value; the token after
// an auth scheme ("Bearer <token>"); for Basic, the decoded "user:pass" and
// each half. A server may quote any of them alone.
func secretParts(v string) []string {
	var parts []string
	add := func(p string) {
		if len(p) >= minSecretLength && !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	v = strings.TrimSpace(v)
	add(v)
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !isSchemeName(scheme) {
		return parts
	}
	token = strings.TrimSpace(token)
	add(token)
	if strings.EqualFold(scheme, "Basic") {
		if plain, err := base64.StdEncoding.DecodeString(token); err == nil {
			add(string(plain))
			user, pass, _ := strings.Cut(string(plain), ":")
			add(user)
			add(pass)
		}
	}
	return parts
}

// urlPasswords returns the password of the userinfo of every URL in s
// ("postgres://app:hunter22@db/x" gives "hunter22"), as written and, when
// it differs, percent-decoded: a server may quote either. It returns nil
// when s holds no URL with a password.
func urlPasswords(s string) []string {
	var out []string
	for rest := s; ; {
		i := strings.Index(rest, "://")
		if i < 0 {
			return out
		}
		rest = rest[i+3:]
		authority := rest
		if end := strings.IndexAny(authority, "/?# \t\r\n\"'<>"); end >= 0 {
			authority = authority[:end]
		}
		at := strings.LastIndexByte(authority, '@')
		if at < 0 {
			continue
		}
		_, pass, ok := strings.Cut(authority[:at], ":")
		if !ok || pass == "" {
			continue
		}
		out = append(out, pass)
		if plain, err := url.PathUnescape(pass); err == nil && plain != pass {
			out = append(out, plain)
		}
	}
}

// isSchemeName reports whether s looks like an HTTP auth scheme (Bearer,
// Basic, Token, ApiKey...).
func isSchemeName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) {
			return false
		}
	}
	return true
}

// isWordByte reports whether c continues a word: an ASCII letter or digit,
// '_' or '-', or a byte of a non-ASCII character.
func isWordByte(c byte) bool {
	return c >= utf8.RuneSelf || c == '_' || c == '-' ||
		(c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// redact returns s with every secret of rd that stands as a whole token
// replaced by "[redacted]". It returns s itself when nothing matched.
func (rd *redactor) redact(s string) string {
	if rd.size() == 0 {
		return s
	}
	best := rd.matcher.wholeMatches(s)
	if best == nil {
		return s
	}
	starts := slices.Sorted(maps.Keys(best))
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, start := range starts {
		if start < last {
			continue // inside a secret already replaced
		}
		b.WriteString(s[last:start])
		b.WriteString(redactedText)
		last = start + best[start]
	}
	b.WriteString(s[last:])
	return b.String()
}

// occurs reports whether a secret of rd appears anywhere in s, even
// inside a word (as after a JSON escape like \n): a cheap test before
// redacting decoded text.
func (rd *redactor) occurs(s []byte) bool {
	if rd.size() == 0 {
		return false
	}
	return rd.matcher.occurs(s)
}

// longest returns the length of the longest secret, 0 for none.
func (rd *redactor) longest() int {
	if rd.size() == 0 {
		return 0
	}
	return rd.maxLen
}

// cut returns s redacted, then cut to at most n bytes (see truncate).
func (rd *redactor) cut(s string, n int) string {
	out, _ := rd.cutSized(s, n)
	return out
}

// cutSized returns s redacted, then cut to at most n bytes (see
// truncate), and the length of the redacted text when it was cut, 0 when
// it was kept whole.
func (rd *redactor) cutSized(s string, n int) (string, int) {
	s = rd.redact(s)
	if len(s) <= n {
		return s, 0
	}
	return truncate(s, n), len(s)
}

// tail returns s redacted, then cut to its last n bytes at most (on a
// rune boundary).
func (rd *redactor) tail(s string, n int) string {
	s = rd.redact(s)
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// truncate returns s cut to at most n bytes on a rune boundary, with "…"
// appended when it was cut. Text that may hold a secret goes through
// redactor.cut instead, so that no prefix of a secret survives.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// oneLine returns the first line of s, trimmed and cut to at most n bytes.
func oneLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return truncate(s, n)
}

// shortText returns s on one line (runs of white space made one space),
// cut to at most n bytes.
func shortText(s string, n int) string {
	return truncate(strings.Join(strings.Fields(s), " "), n)
}

// marshal encodes v as JSON (indented or compact) with every secret
// inside a string replaced by "[redacted]". The JSON is only rebuilt when
// a secret occurs, so ordinary answers keep their field order.
func (rd *redactor) marshal(v any, indent bool) []byte {
	b := encodeCompact(v)
	if rd.occurs(b) || (rd != nil && rd.escaped.occurs(b)) {
		var tree any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&tree) == nil {
			b = encodeCompact(rd.walk(tree))
		}
	}
	if !indent {
		return b
	}
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return append(b, '\n')
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// encodeCompact encodes v on one line, leaving <, > and & as they are
// (answers are read with curl, not embedded in HTML). Our answer types
// always encode.
func encodeCompact(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":{"code":"internal","message":"encode answer failed"}}`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// walk returns tree with the secrets replaced in every string and key.
func (rd *redactor) walk(tree any) any {
	switch t := tree.(type) {
	case string:
		return rd.redact(t)
	case []any:
		for i := range t {
			t[i] = rd.walk(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			out[rd.redact(k)] = rd.walk(v)
		}
		return out
	}
	return tree
}

// A redactingHandler is a slog.Handler that redacts every message and
// attribute value before the handler it wraps sees them: the one place
// every log line passes, so no call site needs to remember. Safe for
// concurrent use.
type redactingHandler struct {
	next slog.Handler
	rd   *liveRedactor
}

// redactLoggerLive returns logger with the secrets rd holds at each line
// redacted from it: a reload may add some.
func redactLoggerLive(logger *slog.Logger, rd *liveRedactor) *slog.Logger {
	return slog.New(&redactingHandler{next: logger.Handler(), rd: rd})
}

// current returns the redactor h applies now (nil for none).
func (h *redactingHandler) current() *redactor { return h.rd.load() }

// A liveRedactor is a redactor that may gain secrets while it is in use
// (a reload adds the new servers' values, a login its tokens): readers
// load the current one. It never loses secrets. A derived liveRedactor
// (see derive) hides its parent's secrets as they are now plus its own.
// Safe for concurrent use; a nil *liveRedactor hides nothing.
type liveRedactor struct {
	current atomic.Pointer[redactor]
	// parent is nil for a root; a derived one rebuilds current from the
	// parent's redactor (noted in from) and own when the parent gained
	// secrets.
	parent *liveRedactor
	own    []string
	from   atomic.Pointer[redactor]
}

// newLiveRedactor returns a root liveRedactor holding rd (nil for none).
func newLiveRedactor(rd *redactor) *liveRedactor {
	l := &liveRedactor{}
	l.current.Store(rd)
	return l
}

// derive returns a liveRedactor hiding l's secrets, whenever they were
// added, and own; it is built when first loaded. On a nil l it derives
// from a root of its own.
func (l *liveRedactor) derive(own ...string) *liveRedactor {
	if l == nil {
		l = newLiveRedactor(nil)
	}
	return &liveRedactor{parent: l, own: own}
}

// load returns the current redactor (nil, which hides nothing, for none).
// A derived one is rebuilt at most once per change of its parent.
func (l *liveRedactor) load() *redactor {
	if l == nil {
		return nil
	}
	if l.parent == nil {
		return l.current.Load()
	}
	base := l.parent.load()
	if cur := l.current.Load(); cur != nil && l.from.Load() == base {
		return cur
	}
	rd := base.with(l.own...)
	l.current.Store(rd)
	l.from.Store(base)
	return rd
}

// add makes values secrets too, for every later load: the one way a
// credential harnessd obtains at run time (an OAuth token, a registered
// client's secret, an assertion) joins the redaction of every log line,
// event, file and answer. It is called before the credential is first
// used. On a derived liveRedactor it adds to the root, so that no reader
// misses it; a nil l adds nowhere.
func (l *liveRedactor) add(values ...string) {
	if l == nil {
		return
	}
	for l.parent != nil {
		l = l.parent
	}
	for {
		old := l.current.Load()
		if l.current.CompareAndSwap(old, old.with(values...)) {
			return
		}
	}
}

func (h *redactingHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	rd := h.rd.load()
	out := slog.NewRecord(r.Time, r.Level, rd.redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(rd, a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	rd := h.rd.load()
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = redactAttr(rd, a)
	}
	return &redactingHandler{next: h.next.WithAttrs(clean), rd: h.rd}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{next: h.next.WithGroup(name), rd: h.rd}
}

// redactAttr returns a with its value redacted: strings, errors and
// anything else printed as text, and each member of a group.
func redactAttr(rd *redactor, a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, rd.redact(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = redactAttr(rd, g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, rd.redact(err.Error()))
		}
		if s := v.String(); rd.occurs([]byte(s)) {
			return slog.String(a.Key, rd.redact(s))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// loggerRedactors returns the redactors logger applies to its lines: that
// of each redactingHandler its handler chain starts with, as they are now
// (none for a plain logger). Nothing is built: each is in use already.
func loggerRedactors(logger *slog.Logger) []*redactor {
	var out []*redactor
	h := logger.Handler()
	for {
		rh, ok := h.(*redactingHandler)
		if !ok {
			return out
		}
		if cur := rh.current(); cur != nil {
			out = append(out, cur)
		}
		h = rh.next
	}
}

// cutAll returns s redacted by each of rds, then cut to at most n bytes
// (see truncate): redact-then-cut for text several redactors cover.
func cutAll(rds []*redactor, s string, n int) string {
	for _, rd := range rds {
		s = rd.redact(s)
	}
	return truncate(s, n)
}
