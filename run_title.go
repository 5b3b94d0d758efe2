package main

import (
	"strings"
	"unicode/utf8"
)

// This file holds runs' titles: the title a request gives, or else the
// first line of its prompt, cut, so that lists show and search something
// a person recognises rather than an id.

// Title sizes, in bytes.
const (
	// maxTitleBytes bounds a title a request gives.
	maxTitleBytes = 200
	// derivedTitleBytes is where a title taken from the prompt is cut.
	derivedTitleBytes = 80
)

// checkTitle returns a *requestError when a request's title is too long
// or holds a line break; "" is fine (the prompt gives one).
func checkTitle(title string) error {
	switch {
	case len(title) > maxTitleBytes:
		return badRequest("title", "%d bytes, over %d: give a shorter title, or leave title out to take the prompt's first line", len(title), maxTitleBytes)
	case !utf8.ValidString(title):
		return badRequest("title", "is not UTF-8 text")
	case strings.ContainsAny(title, "\r\n"):
		return badRequest("title", "holds a line break: a title is one line")
	}
	return nil
}

// runTitle returns the title of a run: given, on one line, else the first
// non-empty line of prompt, cut at derivedTitleBytes on a character's
// start with "…". Both pass rd first, so that no secret, nor a prefix of
// one that a cut left, is in a title.
func runTitle(given, prompt string, rd *redactor) string {
	if t := strings.Join(strings.Fields(given), " "); t != "" {
		return rd.redact(t)
	}
	return shortText(firstLine(rd.redact(prompt)), derivedTitleBytes)
}

// firstLine returns the first line of s that holds more than white space,
// or "".
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if strings.TrimSpace(line) != "" {
			return line
		}
	}
	return ""
}
