package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
)

// This file holds the console: the web pages under ui/, embedded in the
// binary and served at /ui/ (GET / redirects there), and GET /v1/whoami,
// which tells a client what its key may do. The console is a client of
// the API like curl: it uses the same routes and passes the same checks.

//go:embed ui
var consoleFS embed.FS

// consoleHeaders are set on every console answer: no script or style but
// the console's own files, no framing, no sniffing, no referrer.
var consoleHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
	"X-Content-Type-Options":  "nosniff",
	"Referrer-Policy":         "no-referrer",
	"X-Frame-Options":         "DENY",
	"Cache-Control":           "no-cache",
}

// A consoleFile is one embedded file, prepared once: its type, its bytes
// plain and gzip-compressed, and its ETag.
type consoleFile struct {
	contentType string
	plain       []byte
	gzipped     []byte
	etag        string
}

// consoleFiles returns the map of a path under /ui/ ("index.html",
// "app.js") to its file. It is built at the console's first request, not
// at every start of the binary (compressing the files takes milliseconds),
// and read-only afterwards.
var consoleFiles = sync.OnceValue(func() map[string]*consoleFile { return mustLoadConsole(consoleFS) })

// mustLoadConsole reads and compresses every file under ui/. It panics
// only if the embedded tree is unreadable, which the build prevents.
func mustLoadConsole(fsys fs.FS) map[string]*consoleFile {
	files := map[string]*consoleFile{}
	err := fs.WalkDir(fsys, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(data)
		zw.Close()
		sum := sha256.Sum256(data)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		files[strings.TrimPrefix(p, "ui/")] = &consoleFile{contentType: ct, plain: data, gzipped: buf.Bytes(),
			etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("console: reading the embedded ui/ files: %v", err))
	}
	return files
}

// serveConsole answers GET and HEAD /ui/...: the embedded file, gzipped
// when the client accepts it, 304 when its ETag matches, 404 otherwise.
func (a *api) serveConsole(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: the console is read with GET", r.Method, r.URL.Path))
		return
	}
	name := strings.TrimPrefix(r.URL.Path, "/ui/")
	if name == "" {
		name = "index.html"
	}
	f := consoleFiles()[name]
	if f == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("%s: no such console file (the console starts at /ui/)", r.URL.Path))
		return
	}
	h := w.Header()
	for k, v := range consoleHeaders {
		h.Set(k, v)
	}
	h.Set("Content-Type", f.contentType)
	h.Set("ETag", f.etag)
	h.Set("Vary", "Accept-Encoding")
	if etagMatches(r.Header.Get("If-None-Match"), f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := f.plain
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		body = f.gzipped
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}

// etagMatches reports whether an If-None-Match header names etag (or *).
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == etag || t == "*" {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip (a
// q=0 refuses it).
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// whoami answers GET /v1/whoami: whether auth is on, the key's name, its
// tenant and its scopes (every scope with auth off), so a client offers only what the
// key may do.
func (a *api) whoami(w http.ResponseWriter, _ *http.Request, info authInfo) {
	scopes := info.scopes
	if !info.authOn {
		scopes = authScopes
	}
	writeJSON(w, http.StatusOK, map[string]any{"auth": info.authOn, "key": info.key, "tenant": info.tenant, "scopes": scopes})
}
