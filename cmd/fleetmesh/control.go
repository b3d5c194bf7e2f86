package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// controlClient talks to the running node of a home over its control
// socket (node.ControlSocket).
type controlClient struct {
	home string
	c    *http.Client
}

func newControl(dir string) (*controlClient, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: --home DIR is required", errUsage)
	}
	path := home(dir).ControlPath()
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no running node at %s (no %s): start it with `fleetmesh run --home %s`", dir, path, dir)
	}
	return &controlClient{home: dir, c: &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}}, nil
}

// do sends a request and decodes a JSON answer into out.
func (c *controlClient) do(ctx context.Context, method, path string, body, out any) error {
	_, err := c.doHeader(ctx, method, path, body, out)
	return err
}

// doHeader is do, returning the answer's header too.
func (c *controlClient) doHeader(ctx context.Context, method, path string, body, out any) (http.Header, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://node"+path, rd)
	if err != nil {
		return nil, err
	}
	resp, err := c.c.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return nil, fmt.Errorf("the node at %s is not answering on its control socket (is it running?): %w", c.home, err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(strings.TrimSpace(string(data)))
	}
	return resp.Header, json.Unmarshal(data, out)
}
