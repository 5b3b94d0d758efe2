package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
)

// This file holds tool results as the model reads them: text blocks,
// structured content, embedded resources, and placeholders for binary
// content.

// resultToText converts a tools/call result to the text the model reads:
// text blocks as they are, embedded text resources' text, and a short
// placeholder for images, audio, blobs, resource links and unknown blocks,
// one per line; structuredContent as compact JSON when no block is text.
// It returns "" for a result without content.
func resultToText(r *callResult) string {
	parts := make([]string, 0, len(r.Content)+1)
	hasText := false
	for _, block := range r.Content {
		switch block.Type {
		case "text":
			hasText = true
			parts = append(parts, block.Text)
		case "image", "audio":
			parts = append(parts, fmt.Sprintf("[%s: %s, %d bytes]", block.Type, block.MIMEType, base64Size(block.Data)))
		case "resource":
			if block.Resource == nil {
				parts = append(parts, "[resource content]")
				break
			}
			if block.Resource.Text != "" {
				hasText = true
			}
			parts = append(parts, resourceBodyText(block.Resource))
		case "resource_link":
			parts = append(parts, strings.TrimSuffix("[resource link: "+block.URI+" "+block.Name, " ")+"]")
		default:
			parts = append(parts, "["+cmp.Or(block.Type, "unknown")+" content]")
		}
	}
	if !hasText && len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		parts = append(parts, compactJSON(r.StructuredContent))
	}
	return strings.Join(parts, "\n")
}

// resourceContentsToText converts a resources/read result to text: the
// text of each content, blobs as placeholders, each under a "--- <uri>"
// header when there are several. It returns "" when there are none.
func resourceContentsToText(r *readResourceResult) string {
	if len(r.Contents) == 1 {
		return resourceBodyText(&r.Contents[0])
	}
	parts := make([]string, len(r.Contents))
	for i := range r.Contents {
		parts[i] = "--- " + r.Contents[i].URI + "\n" + resourceBodyText(&r.Contents[i])
	}
	return strings.Join(parts, "\n")
}

// resourceBodyText returns a resource's text, or a placeholder for a blob.
func resourceBodyText(body *resourceBody) string {
	if body.Blob == "" {
		return body.Text
	}
	return fmt.Sprintf("[resource %s: %s, %d bytes]", body.URI, cmp.Or(body.MIMEType, "unknown type"), base64Size(body.Blob))
}

// base64Size returns the decoded size of base64 data, padded or not,
// without decoding it; characters outside the alphabet are ignored.
func base64Size(data string) int {
	n := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_' {
			n++
		}
	}
	return n * 6 / 8
}

// compactJSON returns raw without insignificant space, or raw trimmed
// when it is not valid JSON.
func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return strings.TrimSpace(string(raw))
	}
	return buf.String()
}
