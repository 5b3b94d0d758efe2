package main

import (
	"encoding/json"
	"testing"
)

func TestResultToText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		result callResult
		want   string
	}{
		{"empty", callResult{}, ""},
		{"one text", callResult{Content: []contentBlock{{Type: "text", Text: "hello"}}}, "hello"},
		{"texts joined", callResult{Content: []contentBlock{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}}, "a\nb"},
		{"structured without text", callResult{StructuredContent: json.RawMessage("{\n \"temp\": 21,\n \"unit\": \"C\"\n}")}, `{"temp":21,"unit":"C"}`},
		{"structured ignored with text", callResult{Content: []contentBlock{{Type: "text", Text: "21C"}}, StructuredContent: json.RawMessage(`{"temp":21}`)}, "21C"},
		{"structured null", callResult{StructuredContent: json.RawMessage("null")}, ""},
		{"image", callResult{Content: []contentBlock{{Type: "image", MIMEType: "image/png", Data: "iVBORw0KGgo="}}}, "[image: image/png, 8 bytes]"},
		{"audio unpadded", callResult{Content: []contentBlock{{Type: "audio", MIMEType: "audio/wav", Data: "UklGRg"}}}, "[audio: audio/wav, 4 bytes]"},
		{"image beside structured", callResult{Content: []contentBlock{{Type: "image", MIMEType: "image/png", Data: "AAAA"}}, StructuredContent: json.RawMessage(`{"a":1}`)}, "[image: image/png, 3 bytes]\n{\"a\":1}"},
		{"text resource", callResult{Content: []contentBlock{{Type: "resource", Resource: &resourceBody{URI: "file:///a.txt", Text: "contents"}}}}, "contents"},
		{"blob resource", callResult{Content: []contentBlock{{Type: "resource", Resource: &resourceBody{URI: "file:///a.gz", MIMEType: "application/gzip", Blob: "H4sIAAAAAAAA"}}}}, "[resource file:///a.gz: application/gzip, 9 bytes]"},
		{"resource without body", callResult{Content: []contentBlock{{Type: "resource"}}}, "[resource content]"},
		{"resource link", callResult{Content: []contentBlock{{Type: "resource_link", URI: "test://static/1", Name: "Resource 1"}}}, "[resource link: test://static/1 Resource 1]"},
		{"resource link without name", callResult{Content: []contentBlock{{Type: "resource_link", URI: "test://x"}}}, "[resource link: test://x]"},
		{"unknown type", callResult{Content: []contentBlock{{Type: "video"}}}, "[video content]"},
		{"missing type", callResult{Content: []contentBlock{{}}}, "[unknown content]"},
		{"mixed in order", callResult{Content: []contentBlock{{Type: "text", Text: "see"}, {Type: "image", MIMEType: "image/jpeg", Data: "AAAAAAAA"}, {Type: "text", Text: "done"}}}, "see\n[image: image/jpeg, 6 bytes]\ndone"},
		{"error result keeps text", callResult{IsError: true, Content: []contentBlock{{Type: "text", Text: "no such file"}}}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resultToText(&tt.result); got != tt.want {
				t.Errorf("resultToText(%+v) = %q, want %q", tt.result, got, tt.want)
			}
		})
	}
}

func TestResourceContentsToText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		contents []resourceBody
		want     string
	}{
		{"none", nil, ""},
		{"one text", []resourceBody{{URI: "file:///a", Text: "alpha"}}, "alpha"},
		{"one blob", []resourceBody{{URI: "file:///b", MIMEType: "image/png", Blob: "AAAA"}}, "[resource file:///b: image/png, 3 bytes]"},
		{"blob without type", []resourceBody{{URI: "x://b", Blob: "AAAA"}}, "[resource x://b: unknown type, 3 bytes]"},
		{"several", []resourceBody{{URI: "file:///a", Text: "alpha"}, {URI: "file:///b", MIMEType: "image/png", Blob: "AAAA"}},
			"--- file:///a\nalpha\n--- file:///b\n[resource file:///b: image/png, 3 bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resourceContentsToText(&readResourceResult{Contents: tt.contents}); got != tt.want {
				t.Errorf("resourceContentsToText(%+v) = %q, want %q", tt.contents, got, tt.want)
			}
		})
	}
}

func TestBase64Size(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data string
		want int
	}{
		{"", 0}, {"QQ==", 1}, {"QUI=", 2}, {"QUJD", 3}, {"QQ", 1}, {"QUJD\nREVG", 6}, {"-_-_", 3},
	}
	for _, tt := range tests {
		if got := base64Size(tt.data); got != tt.want {
			t.Errorf("base64Size(%q) = %d, want %d", tt.data, got, tt.want)
		}
	}
}
