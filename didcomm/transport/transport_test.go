package transport

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"fleetmesh.org/fleetmesh/didcomm"
)

func TestFrames(t *testing.T) {
	for _, size := range []int{0, 1, 127, 128, 300, 70000} {
		var buf bytes.Buffer
		in := bytes.Repeat([]byte{'x'}, size)
		if err := WriteFrame(&buf, in); err != nil {
			t.Fatal(err)
		}
		out, err := ReadFrame(bufio.NewReader(&buf), MaxFrameBytes)
		if err != nil || !bytes.Equal(in, out) {
			t.Fatalf("size %d: %v", size, err)
		}
	}
	if err := WriteFrame(&bytes.Buffer{}, make([]byte, MaxFrameBytes+1)); err == nil {
		t.Fatal("wrote an oversized frame")
	}
	for _, bad := range [][]byte{{}, {0x80}, {0x05, 'a'}, {0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(bad)), 100); err == nil {
			t.Fatalf("read frame from %x", bad)
		}
	}
}

func TestMediaType(t *testing.T) {
	for in, want := range map[string]string{
		`{"protected":"x","ciphertext":"y"}`: didcomm.MediaTypeEncrypted,
		`{"payload":"x","signatures":[]}`:    didcomm.MediaTypeSigned,
		`{"id":"1","type":"t","body":{}}`:    didcomm.MediaTypePlain,
	} {
		if got := MediaType([]byte(in)); got != want {
			t.Errorf("MediaType(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestPostHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != didcomm.MediaTypeEncrypted {
			w.WriteHeader(http.StatusUnsupportedMediaType)
			return
		}
		switch r.URL.Path {
		case "/accept":
			w.WriteHeader(http.StatusAccepted)
		case "/answer":
			_, _ = w.Write([]byte(`{"answer":1}`))
		default:
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"problem":1}`))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	msg := []byte(`{"ciphertext":"x"}`)
	if out, err := PostHTTP(ctx, srv.Client(), srv.URL+"/accept", msg); err != nil || out != nil {
		t.Fatalf("accept: %s %v", out, err)
	}
	if out, err := PostHTTP(ctx, srv.Client(), srv.URL+"/answer", msg); err != nil || string(out) != `{"answer":1}` {
		t.Fatalf("answer: %s %v", out, err)
	}
	if out, err := PostHTTP(ctx, srv.Client(), srv.URL+"/bad", msg); err == nil || string(out) != `{"problem":1}` {
		t.Fatalf("bad: %s %v", out, err)
	}
}

func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteFrame(&buf, []byte(`{"ciphertext":"x"}`))
	f.Add(buf.Bytes())
	f.Add([]byte{0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := ReadFrame(bufio.NewReader(bytes.NewReader(data)), 4096)
		if err != nil {
			return
		}
		if len(out) > 4096 {
			t.Fatalf("frame of %d bytes over the bound", len(out))
		}
		var again bytes.Buffer
		if err := WriteFrame(&again, out); err != nil {
			t.Fatal(err)
		}
		back, err := ReadFrame(bufio.NewReader(&again), 4096)
		if err != nil || !bytes.Equal(back, out) {
			t.Fatalf("frame does not survive re-encoding: %v", err)
		}
	})
}
