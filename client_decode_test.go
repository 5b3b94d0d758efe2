package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// decodeCallResultCases are results decodeCallResult must decode as
// encoding/json does; fast says whether its own reader takes them (the
// others go to encoding/json).
var decodeCallResultCases = []struct {
	name, in string
	fast     bool
}{
	{"echo", `{"content":[{"type":"text","text":"hello"}]}`, true},
	{"structured", `{"content":[{"type":"text","text":"{\"a\":1}"}],"structuredContent":{"a":1,"b":[true,false,null,"x",-1.5e+3]}}`, true},
	{"structured spaced", `{ "structuredContent" : { "a" : [ 1 , 2 ] } , "content" : [ ] }`, true},
	{"structured null", `{"structuredContent":null}`, true},
	{"structured string", `{"structuredContent":"s"}`, true},
	{"nested structured", `{"structuredContent":{"a":{"b":{"c":[[[{"d":[]}]]]}}}}`, true},
	{"isError", `{"content":[{"type":"text","text":"no"}],"isError":true}`, true},
	{"isError false", `{"isError":false}`, true},
	{"isError null", `{"isError":null}`, true},
	{"content null", `{"content":null}`, true},
	{"content empty", `{"content":[]}`, true},
	{"null block", `{"content":[null,{"type":"text"}]}`, true},
	{"empty object", `{}`, true},
	{"missing fields", `{"content":[{}]}`, true},
	{"space around", " \t\r\n{\"content\":[]} \n", true},
	{"meta and unknown", `{"_meta":{"progressToken":7,"x":{"y":[1,2.5,-0,1E9]}},"content":[{"type":"text","text":"t","annotations":{"audience":["user"],"priority":0.5},"_meta":{}}],"resultType":"complete"}`, true},
	{"every block field", `{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"resource_link","uri":"file:///a","name":"a"},{"type":"resource","resource":{"uri":"u","mimeType":"text/plain","text":"t","blob":"Yg==","extra":1}}]}`, true},
	{"resource null", `{"content":[{"type":"resource","resource":null}]}`, true},
	{"string nulls", `{"content":[{"type":null,"text":null,"resource":{"uri":null}}]}`, true},
	{"unicode", `{"content":[{"type":"text","text":"héllo wörld ☃ 😀"}]}`, true},
	{"escapes", `{"content":[{"type":"text","text":"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"}]}`, true},
	{"lone surrogate", `{"content":[{"type":"text","text":"\ud83d x"}]}`, true},
	{"invalid utf8", "{\"content\":[{\"type\":\"text\",\"text\":\"a\xffb\"}]}", true},
	{"escaped unknown key", `{"x\"y":1,"content":[]}`, false},
	{"del in string", "{\"content\":[{\"text\":\"\x7f\"}]}", true},
	{"case variant key", `{"Content":[{"type":"text","text":"x"}]}`, false},
	{"case variant block key", `{"content":[{"TYPE":"text"}]}`, false},
	{"escaped key", `{"\u0063ontent":[{"type":"text"}]}`, false},
	{"non-ASCII key", `{"ſtructuredContent":{}}`, false},
	{"duplicate content", `{"content":[{"type":"text","text":"a"}],"content":[{"type":"image"}]}`, false},
	{"duplicate block key", `{"content":[{"text":"a","text":"b"}]}`, false},
	{"duplicate isError", `{"isError":true,"isError":false}`, false},
	{"duplicate unknown", `{"x":1,"x":2}`, true},
	{"untagged names", `{"Raw":"x","-":1,"content":[{"Raw":1,"raw":[]}]}`, true},
	{"big numbers", `{"structuredContent":[1e999,-123456789012345678901234567890,0.000000001]}`, true},
	{"wrong type isError", `{"isError":"true"}`, false},
	{"wrong type content", `{"content":{}}`, false},
	{"wrong type block", `{"content":[1]}`, false},
	{"wrong type text", `{"content":[{"text":1}]}`, false},
	{"top-level null", `null`, false},
	{"top-level array", `[]`, false},
	{"trailing garbage", `{"content":[]}x`, false},
	{"trailing object", `{"content":[]}{}`, false},
	{"truncated", `{"content":[{"type":"te`, false},
	{"empty", ``, false},
	{"bad number", `{"structuredContent":01}`, false},
	{"bad number 2", `{"structuredContent":1.}`, false},
	{"bad number 3", `{"structuredContent":-}`, false},
	{"bad number 4", `{"structuredContent":1e}`, false},
	{"bad literal", `{"structuredContent":nul}`, false},
	{"bad literal 2", `{"structuredContent":truex}`, false},
	{"bad escape", `{"content":[{"text":"\x"}]}`, false},
	{"bad unicode escape", `{"content":[{"text":"\u12g4"}]}`, false},
	{"control in string", "{\"content\":[{\"text\":\"a\nb\"}]}", false},
	{"trailing comma", `{"content":[],}`, false},
	{"trailing comma array", `{"structuredContent":[1,]}`, false},
	{"missing colon", `{"content" []}`, false},
	{"unquoted key", `{content:[]}`, false},
	{"single quotes", `{'content':[]}`, false},
	{"unclosed", `{"structuredContent":{"a":1}`, false},
	{"mismatched", `{"structuredContent":{"a":1]}`, false},
	{"deep", `{"structuredContent":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`, false},
	{"too deep", `{"structuredContent":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, false},
}

// TestDecodeCallResult checks decodeCallResult against encoding/json on
// edge cases, and which of them its own reader takes.
func TestDecodeCallResult(t *testing.T) {
	for _, tc := range decodeCallResultCases {
		t.Run(tc.name, func(t *testing.T) {
			checkCallResultDecode(t, []byte(tc.in))
			var res callResult
			if fast := (&jsonReader{b: []byte(tc.in)}).callResult(&res); fast != tc.fast {
				t.Errorf("own reader took it: %v, want %v", fast, tc.fast)
			}
		})
	}
}

// TestDecodeCallResultErrors checks that malformed results are refused
// with encoding/json's error, which says what is wrong.
func TestDecodeCallResultErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"content":[]}x`:        "invalid character 'x' after top-level value",
		`{"content":[{"type":"t`: "unexpected end of JSON input",
		`{"isError":"true"}`:     "cannot unmarshal string into Go struct field callResult.isError of type bool",
	} {
		_, err := decodeCallResult([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("decodeCallResult(%s) = %v, want an error containing %q", in, err, want)
		}
	}
}

// checkCallResultDecode fails t unless decodeCallResult gives what
// json.Unmarshal gives for in: the same callResult, or the same error.
func checkCallResultDecode(t *testing.T, in []byte) {
	t.Helper()
	got, gotErr := decodeCallResult(in)
	want := callResult{Raw: in}
	wantErr := json.Unmarshal(in, &want)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("decodeCallResult(%q) error = %v, encoding/json's = %v", in, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeCallResult(%q) =\n%#v\nencoding/json gives\n%#v", in, got, want)
	}
}

// FuzzCallResultDecode checks decodeCallResult against encoding/json on
// any input: the same result, or the same error.
func FuzzCallResultDecode(f *testing.F) {
	for _, tc := range decodeCallResultCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkCallResultDecode(t, in)
	})
}

func BenchmarkDecodeCallResult(b *testing.B) {
	raw := []byte(`{"content":[{"type":"text","text":"hello"}],"structuredContent":{"message":"hello"}}`)
	b.Run("own", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeCallResult(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res := callResult{Raw: raw}
			if err := json.Unmarshal(raw, &res); err != nil {
				b.Fatal(err)
			}
		}
	})
}
