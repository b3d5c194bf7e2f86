package dashboard

import (
	"strings"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
)

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		every time.Duration
		ok    bool
	}{{10 * time.Second, true}, {0, true}, {minSampleInterval, true}, {10 * time.Millisecond, false}, {-time.Second, false}} {
		c := DefaultConfig()
		c.SampleInterval = setting.DurationOf(tc.every)
		err := c.Check()
		if tc.ok != (err == nil) || (err != nil && !strings.HasPrefix(err.Error(), "sample_interval ")) {
			t.Errorf("sample_interval %s: err %v, want ok %v", tc.every, err, tc.ok)
		}
	}
}
