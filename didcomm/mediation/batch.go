package mediation

import (
	"context"
	"fmt"
)

// Delivered is one message of a delivery: its delivery id (the attachment
// id, which messages-received acknowledges) and the packed message.
type Delivered struct {
	ID     string
	Packed []byte
}

// CollectBatches fetches queued messages in deliveries of at most limit and
// hands each whole delivery to handle, which must make it durable before
// it returns; only then is the delivery acknowledged. It stops when the
// queue is empty and returns how many messages handle received. A leaf
// that stores a batch in one transaction pays one fsync per delivery
// instead of one per message (Collect's way); duplicates are handle's to
// drop (the ids it already stored), since a delivery whose
// acknowledgement was lost comes again.
func (c *Client) CollectBatches(ctx context.Context, limit int, handle func([]Delivered) error) (int, error) {
	n := 0
	for {
		r, err := c.Request(ctx, TypeDeliveryRequest, DeliveryRequestBody{Limit: limit})
		if err != nil {
			return n, err
		}
		if r.Type == TypeStatus {
			return n, nil // nothing queued
		}
		if r.Type != TypeDelivery || len(r.Attachments) == 0 {
			return n, fmt.Errorf("mediator: unexpected answer %s", r.Type)
		}
		batch := make([]Delivered, 0, len(r.Attachments))
		ids := make([]string, 0, len(r.Attachments))
		for _, a := range r.Attachments {
			if a.ID == "" || len(a.Data.JSON) == 0 {
				return n, fmt.Errorf("mediator: delivery attachment without id or JSON data")
			}
			batch = append(batch, Delivered{ID: a.ID, Packed: a.Data.JSON})
			ids = append(ids, a.ID)
		}
		if err := handle(batch); err != nil {
			return n, err
		}
		n += len(batch)
		if _, err := c.Request(ctx, TypeMessagesReceived, MessagesReceivedBody{MessageIDList: ids}); err != nil {
			return n, err
		}
	}
}
