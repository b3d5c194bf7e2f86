package receipt

// Bounds of one page of a node's records (spec/receipts.md "Publication
// and fetching"): each receipt is well under 1 KiB and each report under
// 64 KiB, so a page fits in one sync protocol answer and one DIDComm
// message.
const (
	MaxPageReceipts = 600
	MaxPageReports  = 64
	// MaxPageBytes bounds the records' bytes in one page, so that a page
	// of full report pages (each up to 64 KiB) still fits one DIDComm
	// message (1 MiB, base64 in JSON).
	MaxPageBytes = 512 << 10
)

// Page is one page of a node's co-signed receipts and reports, as a node
// that holds them answers: canonical bytes each, and the cursor of the
// next page ("" after the last).
type Page struct {
	Receipts [][]byte `json:"receipts"`
	Reports  [][]byte `json:"reports"`
	Next     string   `json:"next"`
}
