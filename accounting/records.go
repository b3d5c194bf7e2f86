package accounting

import (
	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/receipt"
)

// Records returns, for package standing, every co-signed receipt this
// node holds of any pair (its own and those taken from fetched reports;
// each verified before it was stored) and the disputed receipts it
// reported itself. It only reads: the checks are the store's.
func (s *Service) Records() (cosigned, disputed []*receipt.Receipt, err error) {
	err = s.db.b.View(func(tx *bolt.Tx) error {
		for _, b := range []struct {
			name []byte
			out  *[]*receipt.Receipt
		}{{bReceipts, &cosigned}, {bDisputed, &disputed}} {
			if err := tx.Bucket(b.name).ForEach(func(_, v []byte) error {
				r, err := receipt.Decode(v)
				if err != nil {
					return err
				}
				*b.out = append(*b.out, r)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return cosigned, disputed, err
}
