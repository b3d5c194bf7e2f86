package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// createStanding is the table through which the front-end holding the
// mesh role shares its node's standing view with the others: one row per
// node, the whole view (DID to score) as of its last take. The others
// have no receipts of their own to compute it from, and a policy that
// reads standing (the labels', spec/labels.md) must judge alike at every
// front-end.
const createStanding = `CREATE TABLE IF NOT EXISTS fleetmesh_standing (
	did text PRIMARY KEY,
	scores jsonb NOT NULL,
	taken timestamptz NOT NULL
)`

// ShareStanding writes the node's standing view, scores by DID as the
// front-end holding the mesh role last took them, for the other
// front-ends (SharedStanding).
func (m *Members) ShareStanding(ctx context.Context, scores map[string]float64) error {
	js, err := json.Marshal(scores)
	if err != nil {
		return err
	}
	_, err = m.pool.Exec(ctx, `INSERT INTO fleetmesh_standing (did, scores, taken) VALUES ($1, $2, now())
		ON CONFLICT (did) DO UPDATE SET scores = $2, taken = now()`, m.did, js)
	if err != nil {
		return fmt.Errorf("frontend: sharing standing: %w", err)
	}
	return nil
}

// SharedStanding reads the node's standing view as the front-end holding
// the mesh role last shared it, and when; if it was not newer than since,
// it returns nil scores without reading them. No view shared yet: nil
// scores and the zero time.
func (m *Members) SharedStanding(ctx context.Context, since time.Time) (map[string]float64, time.Time, error) {
	var taken time.Time
	var js []byte // NULL, so nil, unless newer than since
	err := m.pool.QueryRow(ctx, `SELECT taken, CASE WHEN taken > $2 THEN scores END FROM fleetmesh_standing WHERE did = $1`, m.did, since).Scan(&taken, &js)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, nil
	}
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("frontend: reading shared standing: %w", err)
	}
	if js == nil {
		return nil, taken, nil
	}
	scores := map[string]float64{}
	if err := json.Unmarshal(js, &scores); err != nil {
		return nil, time.Time{}, fmt.Errorf("frontend: shared standing: %w", err)
	}
	return scores, taken, nil
}
