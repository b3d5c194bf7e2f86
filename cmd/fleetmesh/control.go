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
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://node"+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.c.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return fmt.Errorf("the node at %s is not answering on its control socket (is it running?): %w", c.home, err)
		}
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New(strings.TrimSpace(string(data)))
	}
	return json.Unmarshal(data, out)
}
