package iroh

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

func TestReadMsg(t *testing.T) {
	for _, tc := range []struct {
		in, t string
		ok    bool
	}{
		{`{"t":"stream","token":"ab","req":0,"alpn":"/x","remote":"00"}` + "\n", "stream", true},
		{`{"t":"ready","id":"aa","addrs":["127.0.0.1:1"]}` + "\n" + "rest", "ready", true},
		{`{"token":"ab"}` + "\n", "", false},
		{`not json` + "\n", "", false},
		{`{"t":"ready"}`, "", false}, // no newline: cut short
		{`{"t":"` + strings.Repeat("a", MaxLineBytes) + `"}` + "\n", "", false},
	} {
		m, err := readMsg(newLineReader(strings.NewReader(tc.in)))
		if (err == nil) != tc.ok || m.T != tc.t {
			t.Errorf("%.40q: got %q, %v", tc.in, m.T, err)
		}
	}
}

// TestReadMsgLeavesStreamBytes: the bytes after a stream's header line are
// the stream's, and stay in the reader.
func TestReadMsgLeavesStreamBytes(t *testing.T) {
	r := newLineReader(strings.NewReader(`{"t":"stream"}` + "\npayload\n{"))
	if _, err := readMsg(r); err != nil {
		t.Fatal(err)
	}
	var rest bytes.Buffer
	rest.ReadFrom(r)
	if rest.String() != "payload\n{" {
		t.Fatalf("rest %q", rest.String())
	}
}

func FuzzReadMsg(f *testing.F) {
	f.Add([]byte(`{"t":"stream","token":"ab","req":3}` + "\n"))
	f.Add([]byte(`{"t":"conn","cid":1,"remote":"aa","alpn":"/a","dir":"in","path":"direct"}` + "\n"))
	f.Add([]byte(`{"t":"dialerr","req":1,"err":"x"}` + "\n"))
	f.Add([]byte("\n"))
	f.Add([]byte(`{"t":1}` + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := readMsg(bufio.NewReaderSize(bytes.NewReader(b), MaxLineBytes))
		if err != nil {
			return
		}
		if m.T == "" {
			t.Fatal("a message without a type was accepted")
		}
		var buf bytes.Buffer
		if err := writeMsg(&buf, m); err != nil {
			t.Fatal(err)
		}
		m2, err := readMsg(newLineReader(&buf))
		if err != nil || m2.T != m.T || m2.Req != m.Req || m2.Remote != m.Remote {
			t.Fatalf("round trip: %+v -> %+v, %v", m, m2, err)
		}
	})
}
