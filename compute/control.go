package compute

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// RunRequest is the body of POST /jobs/run on the node's control socket:
// what `fleetmesh job run` sends. Module and Input are base64 in JSON.
type RunRequest struct {
	Module []byte `json:"module"`
	Input  []byte `json:"input"`
	// Redundancy is the least number of executors (0: [compute]
	// redundancy).
	Redundancy int `json:"redundancy"`
}

// maxRunRequest bounds the control request's body: a module and an
// input at their protocol bounds, base64, with room for the rest.
const maxRunRequest = 2 * (MaxModuleBytes + MaxInputBytes)

// ServeRun answers POST /jobs/run on the control socket: it runs the job
// and answers with the Verdict as JSON, or a plain-text error.
func (mk *Market) ServeRun(w http.ResponseWriter, r *http.Request) {
	var req RunRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRunRequest+1))
	if err == nil && len(body) > maxRunRequest {
		err = errors.New("request larger than a module and an input at their bounds")
	}
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("job run: %v", err), http.StatusBadRequest)
		return
	}
	if req.Redundancy < 0 || req.Redundancy > MaxRedundancy {
		http.Error(w, fmt.Sprintf("--redundancy %d: must be from 1 to %d", req.Redundancy, MaxRedundancy), http.StatusBadRequest)
		return
	}
	v, err := mk.Run(r.Context(), Job{Module: req.Module, Input: req.Input}, req.Redundancy)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
