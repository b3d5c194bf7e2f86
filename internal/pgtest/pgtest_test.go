package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestDatabase checks that each test gets its own empty database on the
// shared server, and that Terminate ends another connection to it.
func TestDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := Database(t), Database(t)
	if a == b {
		t.Fatalf("two databases share the URL %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE x (v int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'x'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the second database sees %d tables named x (err %v), want 0", n, err)
	}
	ended, err := Terminate(ctx, a)
	if err != nil || ended != 1 {
		t.Fatalf("Terminate ended %d backends (err %v), want 1", ended, err)
	}
	if _, err := ca.Exec(ctx, "SELECT 1"); err == nil {
		t.Fatal("a terminated connection still answers")
	}
}
